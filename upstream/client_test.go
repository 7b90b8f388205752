package upstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		" 0 ":                           0,
		"-3":                            0,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:00:30 GMT": 30 * time.Second,
		"Wed, 31 Dec 2025 23:00:00 GMT": 0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://h/x", "http://", "://x", "127.0.0.1:80/process"} {
		if _, err := NewAgentAPI(Config{Name: "u", URL: u}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := NewAgentAPI(Config{Name: "u", URL: "https://agent.example/api/agent/process"}); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrencyBoundAnswersBusy(t *testing.T) {
	c, err := newClient(Config{Name: "u", URL: "http://127.0.0.1:1/process", MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := c.acquire()
	r2, _ := c.acquire()
	_, err = c.acquire()
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != translate.CodeBusy || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("third call past a bound of 2: %v", err)
	}
	r1(nil)
	r1(nil) // releasing twice must not free two slots
	if _, err := c.acquire(); err != nil {
		t.Fatalf("slot not freed: %v", err)
	}
	if _, err := c.acquire(); err == nil {
		t.Fatal("double release freed a second slot")
	}
	r2(nil)
}

func TestErrorCanonical(t *testing.T) {
	e := &Error{Code: translate.CodeUpstreamTimeout, Status: 504, Err: errors.New("slow")}
	c := e.Canonical()
	if c.Code != translate.CodeUpstreamTimeout || !c.Retryable || !strings.Contains(c.Message, "504") {
		t.Fatalf("%+v", c)
	}
	if (&Error{Code: translate.CodeBadRequest, Err: errors.New("x")}).Canonical().Retryable {
		t.Fatal("a bad request is not retryable")
	}
}
