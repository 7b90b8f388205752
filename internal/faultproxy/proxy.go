package faultproxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is a fault.
type Kind string

// The faults.
const (
	None        Kind = ""
	Refuse      Kind = "refuse"       // close the connection without a byte
	Hang        Kind = "hang"         // read the request, never answer
	Delay       Kind = "delay"        // answer after Fault.Delay
	Status5xx   Kind = "5xx"          // answer Fault.Status (default 503)
	TooMany     Kind = "429"          // answer 429 with Retry-After: Fault.RetryAfter
	Garbage     Kind = "garbage"      // answer 200 text/event-stream with non-protocol bytes
	InvalidJSON Kind = "invalid-json" // after Fault.After events, an event that is not JSON
	Cut         Kind = "cut"          // close the connection after Fault.After events
	Drip        Kind = "drip"         // send the stream a few bytes per Fault.Delay
)

// Kinds lists every fault, for tables and random choice.
var Kinds = []Kind{Refuse, Hang, Delay, Status5xx, TooMany, Garbage, InvalidJSON, Cut, Drip}

// Fault is what to do to one request.
type Fault struct {
	Kind       Kind
	After      int           // events before InvalidJSON or Cut
	Delay      time.Duration // for Delay and Drip
	Status     int           // for Status5xx
	RetryAfter time.Duration // for TooMany
}

// Proxy forwards to a target server, applying the fault Choose returns for
// each request. The zero Choose means no fault.
type Proxy struct {
	Target *url.URL
	Choose func(r *http.Request) Fault

	rp       *httputil.ReverseProxy
	srv      *http.Server
	ln       net.Listener
	injected sync.Map // Kind -> *atomic.Int64
	stop     chan struct{}
	once     sync.Once
}

// Start serves the proxy on a loopback port and returns it; Close stops it.
func Start(target string, choose func(*http.Request) Fault) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: u, Choose: choose, ln: ln, stop: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host },
		FlushInterval: -1,
		ErrorHandler:  func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy and wakes hanging requests.
func (p *Proxy) Close() error {
	p.once.Do(func() { close(p.stop) })
	return p.srv.Close()
}

// Injected returns how many times each fault was applied.
func (p *Proxy) Injected() map[Kind]int64 {
	out := map[Kind]int64{}
	p.injected.Range(func(k, v any) bool {
		out[k.(Kind)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

func (p *Proxy) count(k Kind) {
	v, _ := p.injected.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// ServeHTTP applies the chosen fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := Fault{}
	if p.Choose != nil {
		f = p.Choose(r)
	}
	if f.Kind != None {
		p.count(f.Kind)
	}
	switch f.Kind {
	case Refuse:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, as a crashed agent gives
				}
				c.Close()
			}
		}
		return
	case Hang:
		select {
		case <-r.Context().Done():
		case <-p.stop:
		}
		return
	case Delay:
		if !p.sleep(r.Context(), f.Delay) {
			return
		}
	case Status5xx:
		st := f.Status
		if st == 0 {
			st = http.StatusServiceUnavailable
		}
		http.Error(w, "injected failure", st)
		return
	case TooMany:
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		http.Error(w, "injected: too many requests", http.StatusTooManyRequests)
		return
	case Garbage:
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("\x00\x01garbage\xff\xfe not a protocol\n\n{{{{\n\n"))
		return
	case InvalidJSON, Cut, Drip:
		w = &faultWriter{ResponseWriter: w, f: f, p: p, ctx: r.Context()}
	}
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-p.stop:
	}
	return false
}

// dripBytes is how much a dripping stream sends at a time: small enough to
// split every frame, large enough that a test is not all sleeping.
const dripBytes = 8

// faultWriter mangles a streamed body: it counts SSE events (blank-line
// separated) and injects, cuts or drips.
type faultWriter struct {
	http.ResponseWriter
	f      Fault
	p      *Proxy
	ctx    context.Context
	events int
	done   bool
}

func (w *faultWriter) Flush() {
	if w.done {
		return // the connection was cut and hijacked away
	}
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *faultWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *faultWriter) Write(b []byte) (int, error) {
	if w.done {
		return 0, io.ErrClosedPipe
	}
	n := len(b)
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		chunk := b
		if i >= 0 {
			chunk = b[:i+2]
		}
		if err := w.emit(chunk); err != nil {
			return n - len(b), err
		}
		b = b[len(chunk):]
		if i >= 0 {
			w.events++
			if w.events == w.f.After {
				switch w.f.Kind {
				case InvalidJSON:
					_ = w.emit([]byte("data: {\"object\": this is not json\n\n"))
				case Cut:
					w.cut()
					return n, io.ErrClosedPipe
				}
			}
		}
	}
	return n, nil
}

func (w *faultWriter) emit(b []byte) error {
	if w.f.Kind != Drip {
		_, err := w.ResponseWriter.Write(b)
		return err
	}
	for len(b) > 0 {
		n := min(len(b), dripBytes)
		if _, err := w.ResponseWriter.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
		w.Flush()
		if !w.p.sleep(w.ctx, w.f.Delay) {
			return io.ErrClosedPipe
		}
	}
	return nil
}

// cut ends the response abruptly: the client sees the connection close in
// the middle of a chunked body.
func (w *faultWriter) cut() {
	w.Flush()
	w.done = true
	if hj, ok := w.ResponseWriter.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
