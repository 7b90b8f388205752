package loadagent

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Options are the defaults for requests that carry no marker.
type Options struct {
	Events    int // content deltas per reply (default 10)
	EventSize int // bytes of text per delta (default 64)
	// FlushEvery flushes after this many events (default 1: every event).
	FlushEvery int
}

// Agent is the load-test agent. GET /health answers ok; GET /stats the
// requests answered and connections accepted so far, as JSON.
type Agent struct {
	opts  Options
	srv   *fasthttp.Server
	reqs  atomic.Uint64
	conns atomic.Uint64
	nextN atomic.Uint64
}

// New returns an agent with opts' defaults.
func New(opts Options) *Agent {
	if opts.Events <= 0 {
		opts.Events = 10
	}
	if opts.EventSize <= 0 {
		opts.EventSize = 64
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 1
	}
	a := &Agent{opts: opts}
	a.srv = &fasthttp.Server{
		Handler:               a.handle,
		Name:                  "bench-agent",
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		ReadTimeout:           time.Minute,
		IdleTimeout:           2 * time.Minute,
		CloseOnShutdown:       true,
		ReadBufferSize:        16 << 10,
		WriteBufferSize:       16 << 10,
		ConnState: func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateNew {
				a.conns.Add(1)
			}
		},
	}
	return a
}

// Serve serves ln until Shutdown.
func (a *Agent) Serve(ln net.Listener) error { return a.srv.Serve(ln) }

// Shutdown stops the agent.
func (a *Agent) Shutdown() error { return a.srv.Shutdown() }

// Requests is the number of /process requests answered.
func (a *Agent) Requests() uint64 { return a.reqs.Load() }

// Conns is the number of connections accepted: a proxy that pools its
// upstream connections opens few; one that does not, one per request.
func (a *Agent) Conns() uint64 { return a.conns.Load() }

// Handler returns the request handler, for embedding.
func (a *Agent) Handler() fasthttp.RequestHandler { return a.handle }

var marker = []byte("[bench events=")

// Marker returns the text that asks the agent for n deltas of size bytes.
func Marker(n, size int) string {
	return "[bench events=" + strconv.Itoa(n) + " size=" + strconv.Itoa(size) + "]"
}

// parseMarker reads "[bench events=N size=S]" from body; zeros where absent.
func parseMarker(body []byte) (n, size int) {
	i := bytes.Index(body, marker)
	if i < 0 {
		return 0, 0
	}
	rest := body[i+len(marker):]
	n, rest = leadingInt(rest)
	if bytes.HasPrefix(rest, []byte(" size=")) {
		size, _ = leadingInt(rest[len(" size="):])
	}
	return n, size
}

func leadingInt(b []byte) (int, []byte) {
	v, i := 0, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && i < 9; i++ {
		v = v*10 + int(b[i]-'0')
	}
	return v, b[i:]
}

func (a *Agent) handle(ctx *fasthttp.RequestCtx) {
	switch {
	case ctx.IsGet() && string(ctx.Path()) == "/health":
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"status":"ok"}`)
		return
	case ctx.IsGet() && string(ctx.Path()) == "/stats":
		ctx.SetContentType("application/json")
		fmt.Fprintf(ctx, `{"requests":%d,"conns":%d}`, a.Requests(), a.Conns())
		return
	case !ctx.IsPost() || string(ctx.Path()) != "/process":
		ctx.Error(`{"error":"not found"}`, fasthttp.StatusNotFound)
		return
	}
	a.reqs.Add(1)
	n, size := parseMarker(ctx.PostBody())
	if n <= 0 {
		n = a.opts.Events
	}
	if size <= 0 {
		size = a.opts.EventSize
	}
	id := a.nextN.Add(1)
	flushEvery := a.opts.FlushEvery
	ctx.SetContentType("text/event-stream; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		writeStream(w, id, n, size, flushEvery)
	})
}
