package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/translate"
)

// Timeouts bound one call to an upstream. Zero means the default noted.
type Timeouts struct {
	Connect   time.Duration // TCP connect (default 5s)
	FirstByte time.Duration // until the response header arrives (default 30s)
	Idle      time.Duration // longest silence inside a streamed body (default 5m)
	Total     time.Duration // whole unary call; never applied to streams (default 2m)
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = 5 * time.Second
	}
	if t.FirstByte <= 0 {
		t.FirstByte = 30 * time.Second
	}
	if t.Idle <= 0 {
		t.Idle = 5 * time.Minute
	}
	if t.Total <= 0 {
		t.Total = 2 * time.Minute
	}
	return t
}

// Config describes one upstream agent.
type Config struct {
	Name     string
	URL      string // the endpoint: for the Agent API, the /process URL
	Protocol string // translate.Proto*
	Timeouts Timeouts
	Breaker  BreakerConfig
	// MaxConcurrent bounds exchanges in flight to this upstream (0: 1024).
	MaxConcurrent int
	// MaxEventBytes bounds one streamed event (0: 4 MiB); MaxBodyBytes a
	// unary or error body (0: 8 MiB).
	MaxEventBytes int
	MaxBodyBytes  int
	// Headers are sent on every call (an API key, say). They are never logged.
	Headers map[string]string
	// AIP configures an AIP upstream; other protocols ignore it.
	AIP AIPOptions
	// AP configures an Agent Protocol upstream; other protocols ignore it.
	AP APOptions
	// OnBreakerChange, when not nil, is told of breaker state changes.
	OnBreakerChange func(name string, from, to string)
}

// client is the HTTP machinery shared by the protocol clients: one fasthttp
// HostClient per upstream, its breaker and its bounds.
type client struct {
	cfg     Config
	url     *url.URL
	hc      *fasthttp.HostClient
	dialer  *dialer
	breaker *Breaker
	slots   chan struct{}
}

func newClient(cfg Config) (*client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: url: %w", cfg.Name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("upstream %q: url %q: want http(s)://host[:port]/path", cfg.Name, cfg.URL)
	}
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 1024
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	d := &dialer{timeout: cfg.Timeouts.Connect}
	hc := &fasthttp.HostClient{
		Addr:                addr,
		Name:                "agent-bridge",
		IsTLS:               u.Scheme == "https",
		TLSConfig:           &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12},
		Dial:                d.dial,
		MaxConns:            cfg.MaxConcurrent,
		ReadTimeout:         cfg.Timeouts.FirstByte,
		WriteTimeout:        cfg.Timeouts.Connect + cfg.Timeouts.FirstByte,
		MaxIdleConnDuration: 4 * time.Second, // under uvicorn's 5s keep-alive

		StreamResponseBody:        true,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		DisablePathNormalizing:    true,
		NoDefaultUserAgentHeader:  true,
	}
	var onChange func(string, gobreaker.State, gobreaker.State)
	if cfg.OnBreakerChange != nil {
		onChange = func(n string, from, to gobreaker.State) { cfg.OnBreakerChange(n, from.String(), to.String()) }
	}
	return &client{
		cfg:     cfg,
		url:     u,
		hc:      hc,
		dialer:  d,
		breaker: NewBreaker(cfg.Name, cfg.Breaker, onChange),
		slots:   make(chan struct{}, cfg.MaxConcurrent),
	}, nil
}

// Breaker returns the upstream's breaker, for status pages and tests.
func (c *client) Breaker() *Breaker { return c.breaker }

// acquire takes a concurrency slot and asks the breaker. release must be
// called with the exchange's outcome.
func (c *client) acquire() (release func(error), err error) {
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, &Error{Code: translate.CodeBusy, RetryAfter: time.Second,
			Err: fmt.Errorf("%w: %d exchanges in flight", ErrUnavailable, cap(c.slots))}
	}
	done, err := c.breaker.Allow()
	if err != nil {
		<-c.slots
		return nil, err
	}
	var once sync.Once
	return func(outcome error) {
		once.Do(func() {
			done(outcome)
			<-c.slots
		})
	}, nil
}

// request is one HTTP call's inputs.
type request struct {
	path        string // overrides the configured URL's path when set
	query       string // the raw query (without "?"), when set
	body        []byte
	contentType string
	accept      string
	header      map[string]string // per-call headers (trace context)
	// held: the caller took a slot with acquire and reports the outcome of
	// its whole exchange itself, so do neither acquires nor reports (AIP
	// makes several calls per exchange).
	held bool
}

// response is a call in progress: its header is read, and the body is
// either in Body (unary) or streams from Stream.
type response struct {
	c       *client
	resp    *fasthttp.Response
	Status  int
	Stream  io.Reader
	body    *eofReader
	wc      *watchedConn
	unbind  func() (clean bool)
	release func(error)
	eof     bool // the body was read to its end (set by readers of Body)
}

// eofReader notes when the body it wraps has been read to its end: only
// then may the connection carry another request.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// Frame directions recorded for the admin view (see callctx.WithFrames).
const (
	FrameUpOut = "up-out"
	FrameUpIn  = "up-in"
)

// frameTap hands each frame of a body to a recorder as it is read: SSE
// events split at their blank line, or the whole of a unary body. It holds
// at most maxTapFrame bytes of a frame; what is longer is cut.
type frameTap struct {
	r   io.Reader
	rec callctx.FrameFunc
	buf []byte
}

const maxTapFrame = 64 << 10

func (t *frameTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	for chunk := p[:n]; len(chunk) > 0; {
		i := bytes.Index(chunk, []byte("\n\n"))
		if i < 0 {
			t.keep(chunk)
			break
		}
		t.keep(chunk[:i])
		t.flush()
		chunk = chunk[i+2:]
	}
	if err != nil {
		t.flush()
	}
	return n, err
}

func (t *frameTap) keep(b []byte) {
	if room := maxTapFrame - len(t.buf); room > 0 {
		t.buf = append(t.buf, b[:min(len(b), room)]...)
	}
}

func (t *frameTap) flush() {
	if f := bytes.TrimSpace(t.buf); len(f) > 0 {
		t.rec(FrameUpIn, f)
	}
	t.buf = t.buf[:0]
}

// Bounds of the drain that lets a connection be reused after a decoder
// stopped at its protocol's last event, before the body's own end (the
// chunked terminator, say).
const (
	drainBytes = 64 << 10
	drainWait  = 50 * time.Millisecond
)

// do sends req and returns once the response header has arrived. With
// stream set the body streams; otherwise it is read whole (bounded) before
// do returns. Non-2xx statuses become *Error and are reported to the
// breaker: 5xx and 429 as failures, other 4xx as successes (the upstream
// worked; the request was at fault).
func (c *client) do(ctx context.Context, r request, stream bool) (*response, error) {
	release, err := func(error) {}, error(nil)
	if !r.held {
		if release, err = c.acquire(); err != nil {
			return nil, err
		}
	}
	freq := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(freq)
	resp := fasthttp.AcquireResponse()
	u := *c.url
	if r.path != "" {
		u.Path = r.path
	}
	if r.query != "" {
		u.RawQuery = r.query
	}
	freq.SetRequestURI(u.String())
	freq.Header.SetMethod(fasthttp.MethodPost)
	if r.body == nil {
		freq.Header.SetMethod(fasthttp.MethodGet)
	}
	freq.Header.SetContentType(r.contentType)
	if r.accept != "" {
		freq.Header.Set("Accept", r.accept)
	}
	for k, v := range c.cfg.Headers {
		freq.Header.Set(k, v)
	}
	for k, v := range r.header {
		freq.Header.Set(k, v)
	}
	freq.SetBodyRaw(r.body)
	if rec := callctx.Frames(ctx); rec != nil {
		rec(FrameUpOut, r.body)
	}

	deadline := time.Now().Add(c.cfg.Timeouts.FirstByte)
	if !stream {
		deadline = time.Now().Add(c.cfg.Timeouts.Total)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil {
		fasthttp.ReleaseResponse(resp)
		release(ErrClientGone)
		return nil, err
	}
	err = c.hc.DoDeadline(freq, resp, deadline)
	if errors.Is(err, fasthttp.ErrConnectionClosed) && ctx.Err() == nil && time.Now().Before(deadline) {
		// A pooled keep-alive connection the agent closed while idle fails
		// before any answer byte: the agent never saw the request, so it
		// is sent once more, on a new connection. This is the only resend;
		// fasthttp's own retries are off so the breaker sees true outcomes.
		resp.Reset()
		err = c.hc.DoDeadline(freq, resp, deadline)
	}
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		e := transportError(err)
		release(e)
		return nil, e
	}
	out := &response{c: c, resp: resp, Status: resp.StatusCode(), release: release}
	if bs := resp.BodyStream(); bs != nil {
		out.body = &eofReader{r: bs}
		out.Stream = out.body
		if rec := callctx.Frames(ctx); rec != nil {
			out.Stream = &frameTap{r: out.body, rec: rec}
		}
	}
	if out.Status < 200 || out.Status > 299 {
		body, _ := out.readAll(c.cfg.MaxBodyBytes)
		e := statusError(out.Status, resp, body)
		out.finish(e)
		if e.RetryAfter > 0 {
			c.breaker.HoldOff(e.RetryAfter)
		}
		return nil, e
	}
	if wc := c.dialer.lookup(resp.LocalAddr()); wc != nil && stream {
		out.wc = wc
		out.unbind = wc.bind(ctx, c.cfg.Timeouts.Idle)
	}
	return out, nil
}

// ContentType returns the response's media type, lowercased, without parameters.
func (r *response) ContentType() string {
	ct := string(r.resp.Header.ContentType())
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// readAll reads the rest of the body, at most limit bytes.
func (r *response) readAll(limit int) ([]byte, error) {
	if r.Stream == nil {
		return r.resp.Body(), nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Stream, int64(limit)+1))
	if err == nil {
		r.eof = true
	}
	if len(b) > limit {
		r.eof = false
		return b[:limit], fmt.Errorf("body larger than %d bytes", limit)
	}
	return b, err
}

// finish ends the call once: it reports outcome to the breaker and frees the
// connection, closing it unless the body was read to its end.
func (r *response) finish(outcome error) {
	if r.resp == nil {
		return
	}
	eof := r.eof || r.body != nil && r.body.eof
	if !eof && outcome == nil && r.body != nil && r.wc != nil {
		r.wc.idle.Store(int64(drainWait))
		_, _ = io.CopyN(io.Discard, r.body, drainBytes)
		eof = r.body.eof
	}
	if r.unbind != nil && !r.unbind() {
		eof = false // cancelled while bound: the deadline is spent
	}
	if !eof || outcome != nil {
		r.resp.SetConnectionClose() // unread bytes or a broken stream: never reuse
	}
	_ = r.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(r.resp)
	r.resp = nil
	if r.Status >= 400 && r.Status < 500 && r.Status != fasthttp.StatusTooManyRequests {
		outcome = nil // the upstream is healthy; the request was refused
	}
	r.release(outcome)
}

func transportError(err error) *Error {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return &Error{Code: translate.CodeUpstreamTimeout, Err: err}
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return &Error{Code: translate.CodeBusy, RetryAfter: time.Second, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Code: translate.CodeUpstreamTimeout, Err: err}
	}
	return &Error{Code: translate.CodeUpstreamUnavailable, Err: err}
}

func statusError(status int, resp *fasthttp.Response, body []byte) *Error {
	e := &Error{Code: translate.CodeUpstreamError, Status: status}
	if status >= 400 && status < 500 {
		e.Code = translate.CodeBadRequest
	}
	if status == fasthttp.StatusTooManyRequests || status == fasthttp.StatusServiceUnavailable {
		e.Code = translate.CodeUpstreamUnavailable
		e.RetryAfter = parseRetryAfter(string(resp.Header.Peek("Retry-After")), time.Now())
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	if msg == "" {
		msg = fasthttp.StatusMessage(status)
	}
	e.Err = errors.New(msg)
	return e
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
