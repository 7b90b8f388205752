package upstream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/agentbridge/bridge/translate"
)

// BreakerConfig sets when an upstream's breaker opens and how it recovers.
// The zero value gives the defaults noted on each field.
type BreakerConfig struct {
	// ConsecutiveFailures opens the breaker after this many failures in a
	// row (default 5; negative disables this trigger).
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// FailureRatio opens the breaker when failures/requests reaches it in
	// the current Interval, once MinRequests were seen (0 disables).
	FailureRatio float64 `yaml:"failure_ratio"`
	MinRequests  int     `yaml:"min_requests"`
	// Interval is the closed-state window over which counts are kept
	// (default 60s).
	Interval time.Duration `yaml:"interval"`
	// OpenFor is how long the breaker stays open before it lets probes
	// through (default 10s).
	OpenFor time.Duration `yaml:"open_for"`
	// HalfOpenProbes is how many requests may pass while half-open (default 1).
	HalfOpenProbes int `yaml:"half_open_probes"`
}

// ErrClientGone marks an exchange the client abandoned; a breaker ignores it.
var ErrClientGone = errors.New("client went away")

// Breaker guards one upstream. Outcomes are reported when an exchange ends,
// so a stream cut half-way counts as a failure even though it began well.
type Breaker struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]

	openFor time.Duration

	mu       sync.Mutex
	notUntil time.Time // from Retry-After: refuse calls until then
	openedAt time.Time // when the breaker last opened
	now      func() time.Time
}

// NewBreaker returns a breaker named name. onChange, when not nil, is told of
// every state change (for metrics and logs).
func NewBreaker(name string, cfg BreakerConfig, onChange func(name string, from, to gobreaker.State)) *Breaker {
	consecutive := cfg.ConsecutiveFailures
	if consecutive == 0 {
		consecutive = 5
	}
	b := &Breaker{now: time.Now}
	st := gobreaker.Settings{
		Name:        name,
		MaxRequests: uint32(max(cfg.HalfOpenProbes, 1)),
		Interval:    cfg.Interval,
		Timeout:     cfg.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if consecutive > 0 && c.ConsecutiveFailures >= uint32(consecutive) {
				return true
			}
			return cfg.FailureRatio > 0 && c.Requests >= uint32(max(cfg.MinRequests, 1)) &&
				float64(c.TotalFailures)/float64(c.Requests) >= cfg.FailureRatio
		},
		OnStateChange: func(n string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.mu.Lock()
				b.openedAt = b.now()
				b.mu.Unlock()
			}
			if onChange != nil {
				onChange(n, from, to)
			}
		},
		IsExcluded: func(err error) bool {
			return errors.Is(err, ErrClientGone) || errors.Is(err, context.Canceled)
		},
	}
	if st.Interval == 0 {
		st.Interval = time.Minute
	}
	if st.Timeout == 0 {
		st.Timeout = 10 * time.Second
	}
	b.openFor = st.Timeout
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return b
}

// Allow asks to make one call. On success the caller must call done exactly
// once with the outcome: nil for success, an error for a failure, and an
// error wrapping ErrClientGone when the client abandoned the call.
func (b *Breaker) Allow() (done func(error), err error) {
	b.mu.Lock()
	wait := b.notUntil.Sub(b.now())
	b.mu.Unlock()
	if wait > 0 {
		return nil, &Error{Code: translate.CodeUpstreamUnavailable, RetryAfter: wait,
			Err: errors.Join(ErrUnavailable, errors.New("upstream asked to retry later"))}
	}
	done, err = b.cb.Allow()
	if err != nil {
		return nil, &Error{Code: translate.CodeUpstreamUnavailable, RetryAfter: b.openRemaining(),
			Err: errors.Join(ErrUnavailable, err)}
	}
	return done, nil
}

// HoldOff refuses calls for d, as an upstream's Retry-After asks.
func (b *Breaker) HoldOff(d time.Duration) {
	if d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.now().Add(d); t.After(b.notUntil) {
		b.notUntil = t
	}
}

// State returns the breaker's state: closed, half-open or open.
func (b *Breaker) State() gobreaker.State { return b.cb.State() }

// Counts returns the breaker's counts in the current window.
func (b *Breaker) Counts() gobreaker.Counts { return b.cb.Counts() }

// openRemaining is how long the breaker stays open, a hint for Retry-After;
// at least one second, the smallest wait the header can say.
func (b *Breaker) openRemaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.openFor-b.now().Sub(b.openedAt), time.Second)
}
