package load

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Target is what one run sends: the same POST to the same URL, over and over.
type Target struct {
	// URL is the Agent API endpoint, e.g. http://127.0.0.1:9000/process.
	// Only loopback hosts are accepted.
	URL string
	// Body is the request body (an AgentRequest JSON).
	Body []byte
	// WantEvents, when positive, is the number of content-delta events each
	// response must carry; a response with another count is an error.
	WantEvents int
	// WholeContent counts whole content events (delta false) instead of
	// deltas, for a path whose agent protocol has no text deltas (AIP
	// v01.00: the reply's text arrives as one complete message), and
	// MinContentBytes, when positive, is the least number of bytes those
	// frames must carry together: the text the deltas would have carried.
	WholeContent    bool
	MinContentBytes int
	// Timeout bounds one request, from send to terminal frame (default 30s).
	Timeout time.Duration
}

// Client sends a Target's request and reads its SSE reply. It is safe for
// concurrent use.
type Client struct {
	t       Target
	hc      *fasthttp.HostClient
	uri     string
	readers sync.Pool
}

// NewClient returns a client for t that opens at most maxConns connections.
func NewClient(t Target, maxConns int) (*Client, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, fmt.Errorf("load: target url: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("load: target %q: only http:// is supported", t.URL)
	}
	if err := checkLoopback(u.Hostname()); err != nil {
		return nil, err
	}
	if t.Timeout <= 0 {
		t.Timeout = 30 * time.Second
	}
	if maxConns <= 0 {
		maxConns = 1
	}
	c := &Client{t: t, uri: t.URL}
	c.hc = &fasthttp.HostClient{
		Addr:                      u.Host,
		Name:                      "bridge-bench",
		MaxConns:                  maxConns,
		MaxConnWaitTimeout:        t.Timeout,
		ReadTimeout:               t.Timeout,
		WriteTimeout:              t.Timeout,
		MaxIdleConnDuration:       time.Minute,
		StreamResponseBody:        true,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		ReadBufferSize:            16 << 10,
		WriteBufferSize:           32 << 10,
	}
	c.readers.New = func() any { return bufio.NewReaderSize(nil, 64<<10) }
	return c, nil
}

// checkLoopback refuses any host that is not a loopback address: the
// benchmark never sends load anywhere else.
func checkLoopback(host string) error {
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("load: host %q is not a loopback address; the load generator only targets loopback", host)
	}
	return nil
}

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// outcome is what one request came to.
type outcome struct {
	firstEvent time.Time // first content delta (zero if none)
	events     int       // content deltas (whole contents, with whole set)
	whole      bool      // count whole content events, not deltas
	contentLen int       // bytes of the counted whole content frames
	frames     int       // SSE frames of any kind
	bytes      int
}

var errStatus = errors.New("unexpected HTTP status")

// do sends one request and reads the whole reply.
func (c *Client) do() (outcome, error) {
	var o outcome
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.uri)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.SetBodyRaw(c.t.Body)
	deadline := time.Now().Add(c.t.Timeout)
	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		if strings.Contains(err.Error(), "first line of response") {
			// fasthttp found no status line where the response should
			// start: the server wrote past the end of its previous reply.
			return o, fmt.Errorf("%w: %w", errStrayBytes, err)
		}
		return o, fmt.Errorf("send: %w", err)
	}
	defer func() { _ = resp.CloseBodyStream() }()
	if sc := resp.StatusCode(); sc != fasthttp.StatusOK {
		return o, fmt.Errorf("%w %d", errStatus, sc)
	}
	br := c.readers.Get().(*bufio.Reader)
	defer c.readers.Put(br)
	if s := resp.BodyStream(); s != nil {
		br.Reset(s)
	} else {
		br.Reset(bytesReader(resp.Body()))
	}
	o.whole = c.t.WholeContent
	err := readSSE(br, &o, deadline)
	br.Reset(nil)
	if err != nil {
		return o, err
	}
	what := "content deltas"
	if o.whole {
		what = "whole content events"
	}
	if c.t.WantEvents > 0 && o.events != c.t.WantEvents {
		return o, fmt.Errorf("%w: got %d %s, want %d", errCount, o.events, what, c.t.WantEvents)
	}
	if o.whole && o.contentLen < c.t.MinContentBytes {
		return o, fmt.Errorf("%w: whole content frames of %d bytes, want at least %d", errCount, o.contentLen, c.t.MinContentBytes)
	}
	return o, nil
}
