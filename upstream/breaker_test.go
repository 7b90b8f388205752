package upstream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

var errBoom = errors.New("boom")

func call(t *testing.T, b *Breaker, outcome error) error {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		return err
	}
	done(outcome)
	return nil
}

func TestBreakerOpensOnConsecutiveFailuresAndRecovers(t *testing.T) {
	var changes []string
	b := NewBreaker("u", BreakerConfig{ConsecutiveFailures: 3, OpenFor: 50 * time.Millisecond},
		func(_ string, from, to gobreaker.State) { changes = append(changes, from.String()+">"+to.String()) })
	for i := 0; i < 2; i++ {
		_ = call(t, b, errBoom)
	}
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("open after 2 of 3 failures")
	}
	_ = call(t, b, errBoom)
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("closed after 3 failures")
	}
	err := call(t, b, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open breaker let a call through: %v", err)
	}
	var ue *Error
	if !errors.As(err, &ue) || ue.RetryAfter < time.Second {
		t.Fatalf("open breaker error %v lacks a Retry-After hint", err)
	}
	time.Sleep(60 * time.Millisecond)
	if err := call(t, b, nil); err != nil { // the half-open probe succeeds
		t.Fatalf("probe refused: %v", err)
	}
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("state %s after a successful probe", b.State())
	}
	if got := strings.Join(changes, ","); got != "closed>open,open>half-open,half-open>closed" {
		t.Fatalf("transitions %s", got)
	}
}

func TestBreakerFailedProbeReopens(t *testing.T) {
	b := NewBreaker("u", BreakerConfig{ConsecutiveFailures: 1, OpenFor: 30 * time.Millisecond}, nil)
	_ = call(t, b, errBoom)
	time.Sleep(40 * time.Millisecond)
	_ = call(t, b, errBoom)
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("state %s after a failed probe", b.State())
	}
}

func TestBreakerFailureRatioNeedsMinRequests(t *testing.T) {
	b := NewBreaker("u", BreakerConfig{ConsecutiveFailures: -1, FailureRatio: 0.5, MinRequests: 4}, nil)
	_ = call(t, b, errBoom)
	_ = call(t, b, nil)
	_ = call(t, b, errBoom)
	if b.State() != gobreaker.StateClosed {
		t.Fatal("opened before min_requests")
	}
	_ = call(t, b, errBoom) // 3 of 4 failed
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("closed at 3/4 failures")
	}
}

func TestClientGoneIsNotAFailure(t *testing.T) {
	b := NewBreaker("u", BreakerConfig{ConsecutiveFailures: 1}, nil)
	_ = call(t, b, fmt.Errorf("stream: %w", ErrClientGone))
	if b.State() != gobreaker.StateClosed || b.Counts().TotalFailures != 0 {
		t.Fatalf("a departed client tripped the breaker: %+v", b.Counts())
	}
}

func TestHoldOff(t *testing.T) {
	b := NewBreaker("u", BreakerConfig{}, nil)
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.HoldOff(10 * time.Second)
	if err := call(t, b, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call during hold-off: %v", err)
	}
	now = now.Add(11 * time.Second)
	if err := call(t, b, nil); err != nil {
		t.Fatalf("call after hold-off: %v", err)
	}
}
