package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
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

// TestStalePooledConnectionIsResentOnce: an agent that closes an idle
// keep-alive connection (as uvicorn does after 5s) must not fail the next
// call that the pool puts on it.
func TestStalePooledConnectionIsResentOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	body := `data: {"sequence_number":0,"object":"response","status":"completed","id":"r"}` + "\n\n"
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				time.Sleep(30 * time.Millisecond) // then close the kept-alive connection
			}(c)
		}
	}()
	a, err := NewAgentAPI(Config{Name: "u", URL: "http://" + ln.Addr().String() + "/process"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		s, err := a.Open(context.Background(), &translate.Request{Session: "s",
			Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("hi")}}}})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		evs, err := translate.Collect(s)
		if err != nil || len(evs) == 0 || !evs[len(evs)-1].Terminal() {
			t.Fatalf("call %d: %v %v", i, evs, err)
		}
		time.Sleep(80 * time.Millisecond) // the agent has closed the connection by now
	}
	if got := a.Breaker().Counts().TotalFailures; got != 0 {
		t.Fatalf("%d breaker failures from stale connections", got)
	}
	if accepted.Load() < 2 {
		t.Fatalf("only %d connections: the test did not exercise a stale one", accepted.Load())
	}
}

// TestConnectionReusedAfterTerminalEvent: the decoder stops at the terminal
// response, before the chunked body's end; the connection must still be
// reusable (drained), and never handed on with unread bytes.
func TestConnectionReusedAfterTerminalEvent(t *testing.T) {
	var conns atomic.Int32
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"object":"response","status":"created","id":"r"}`+"\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, `data: {"object":"response","status":"completed","id":"r"}`+"\n\n")
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go hs.Serve(ln)
	defer hs.Close()
	a, err := NewAgentAPI(Config{Name: "u", URL: "http://" + ln.Addr().String() + "/process"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		s, err := a.Open(context.Background(), &translate.Request{Session: "s",
			Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("hi")}}}})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		evs, err := translate.Collect(s)
		if err != nil || !evs[len(evs)-1].Terminal() || evs[len(evs)-1].State != translate.StateCompleted {
			t.Fatalf("call %d: %v %v", i, evs, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 sequential calls, want 1 reused", n)
	}
}

// TestCancelAtStreamEndNeverPoisonsThePool: a caller that cancels its
// context just as a stream ends (the downstream pump does, every time) must
// not leave a pooled connection with a spent read deadline, or the next
// call on it fails before its first byte.
func TestCancelAtStreamEndNeverPoisonsThePool(t *testing.T) {
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"object":"response","status":"completed","id":"r"}`+"\n\n")
	})}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go hs.Serve(ln)
	defer hs.Close()
	a, err := NewAgentAPI(Config{Name: "u", URL: "http://" + ln.Addr().String() + "/process",
		Breaker: BreakerConfig{ConsecutiveFailures: -1}})
	if err != nil {
		t.Fatal(err)
	}
	req := &translate.Request{Session: "s", Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("hi")}}}}
	for i := 0; i < 300; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := a.Open(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		ev, err := s.Next()
		if err != nil || !ev.Terminal() {
			t.Fatalf("call %d: %v %v", i, ev, err)
		}
		// Race the cancel against Close, as the pump's deferred calls do.
		go cancel()
		s.Close()
	}
}
