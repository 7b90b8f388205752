package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"gopkg.in/yaml.v3"

	"github.com/agentbridge/bridge/internal/framelog"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
)

// Frames is where the raw frames of exchanges are read from; a
// *framelog.Log is one.
type Frames interface {
	Frames(exchange string) []framelog.Frame
}

// Upstream is one upstream agent as the admin API shows it.
type Upstream struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	URL      string `json:"url"`
	// Breaker is the breaker's state: closed, half-open or open.
	Breaker string        `json:"breaker"`
	Counts  BreakerCounts `json:"counts"`
}

// BreakerCounts are a breaker's counts in its current window (gobreaker's
// Counts).
type BreakerCounts struct {
	Requests             uint32 `json:"requests"`
	TotalSuccesses       uint32 `json:"total_successes"`
	TotalFailures        uint32 `json:"total_failures"`
	ConsecutiveSuccesses uint32 `json:"consecutive_successes"`
	ConsecutiveFailures  uint32 `json:"consecutive_failures"`
}

// Options configures a Server. Every field may be left nil; what it feeds
// is then empty (or, for /metrics, absent).
type Options struct {
	// Metrics serves /metrics (promhttp's handler for the bridge's registry).
	Metrics http.Handler
	// Store holds the exchanges shown.
	Store store.Store
	// Frames holds their raw frames.
	Frames Frames
	// Upstreams returns the upstreams and their breakers, read per request.
	Upstreams func() []Upstream
	// Config returns the effective config, read per request. It is
	// marshalled with its yaml tags (the shape of the config file) and
	// redacted before it is served.
	Config func() any
	// Ready reports whether the bridge takes traffic; false (draining)
	// makes /readyz answer 503. nil: always ready.
	Ready func() bool
	// Logger receives serving errors (default slog.Default()).
	Logger *slog.Logger
}

// Limits of the exchange views.
const (
	// DefaultListLimit and MaxListLimit bound /api/exchanges' ?limit=.
	DefaultListLimit = 50
	MaxListLimit     = 1000
	// MaxTimelineEvents is how many of an exchange's latest events are shown.
	MaxTimelineEvents = 2000
)

// Server is the admin listener's HTTP server.
type Server struct {
	opts    Options
	srv     *fasthttp.Server
	metrics fasthttp.RequestHandler
}

// New returns a server for opts.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts}
	if opts.Metrics != nil {
		s.metrics = fasthttpadaptor.NewFastHTTPHandler(opts.Metrics)
	}
	s.srv = &fasthttp.Server{
		Handler:               s.handle,
		Name:                  "agent-bridge-admin",
		NoDefaultServerHeader: true,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           2 * time.Minute,
		MaxRequestBodySize:    1 << 10, // nothing here takes a body
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{opts.Logger},
	}
	return s
}

// Handler returns the request handler, for tests and embedding.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops the server, waiting for open requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		s.jsonError(ctx, fasthttp.StatusMethodNotAllowed, "the admin listener only reads: use GET")
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	path := string(ctx.Path())
	switch {
	case path == "/metrics" && s.metrics != nil:
		s.metrics(ctx)
	case path == "/healthz":
		s.json(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	case path == "/readyz":
		if s.opts.Ready != nil && !s.opts.Ready() {
			s.json(ctx, fasthttp.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		s.json(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
	case path == "/api/config":
		s.apiConfig(ctx)
	case path == "/api/upstreams":
		s.json(ctx, fasthttp.StatusOK, s.upstreams())
	case path == "/api/exchanges":
		s.json(ctx, fasthttp.StatusOK, s.recent(listLimit(ctx)))
	case strings.HasPrefix(path, "/api/exchanges/"):
		v, status := s.exchangeView(strings.TrimPrefix(path, "/api/exchanges/"))
		if v == nil {
			s.jsonError(ctx, status, "no exchange with that id")
			return
		}
		s.json(ctx, fasthttp.StatusOK, v)
	case path == "/":
		s.pageIndex(ctx)
	case strings.HasPrefix(path, "/exchanges/"):
		s.pageExchange(ctx, strings.TrimPrefix(path, "/exchanges/"))
	default:
		s.jsonError(ctx, fasthttp.StatusNotFound, "nothing at "+path)
	}
}

func (s *Server) json(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.opts.Logger.Error("admin: encoding a reply", "path", string(ctx.Path()), "error", err)
		status, b = fasthttp.StatusInternalServerError, []byte(`{"error":"encoding the reply failed"}`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

func (s *Server) jsonError(ctx *fasthttp.RequestCtx, status int, msg string) {
	s.json(ctx, status, map[string]string{"error": msg})
}

func listLimit(ctx *fasthttp.RequestCtx) int {
	n, err := strconv.Atoi(string(ctx.QueryArgs().Peek("limit")))
	if err != nil || n <= 0 {
		return DefaultListLimit
	}
	return min(n, MaxListLimit)
}

// upstreams returns the upstreams with URL credentials redacted.
func (s *Server) upstreams() []Upstream {
	if s.opts.Upstreams == nil {
		return []Upstream{}
	}
	ups := s.opts.Upstreams()
	out := make([]Upstream, len(ups))
	for i, u := range ups {
		u.URL = redactURL(u.URL)
		out[i] = u
	}
	return out
}

// ExchangeSummary is one line of the exchange list.
type ExchangeSummary struct {
	ID         string          `json:"id"`
	ClientID   string          `json:"client_id,omitempty"`
	Downstream string          `json:"downstream,omitempty"`
	Upstream   string          `json:"upstream,omitempty"`
	Route      string          `json:"route,omitempty"`
	Session    string          `json:"session,omitempty"`
	State      translate.State `json:"state,omitempty"`
	Events     uint64          `json:"events"`
	Created    time.Time       `json:"created"`
	Updated    time.Time       `json:"updated"`
}

func (s *Server) recent(limit int) []ExchangeSummary {
	if s.opts.Store == nil {
		return []ExchangeSummary{}
	}
	xs := s.opts.Store.List(limit)
	out := make([]ExchangeSummary, 0, len(xs))
	for _, x := range xs {
		out = append(out, ExchangeSummary{ID: x.ID, ClientID: x.ClientID, Downstream: x.Downstream,
			Upstream: x.Upstream, Route: x.Route, Session: x.Session, State: x.State, Events: x.LastSeq,
			Created: x.Created, Updated: x.Updated})
	}
	return out
}

// Frame is a raw frame as the admin API shows it: its bytes as text.
type Frame struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Dir       string    `json:"dir"`
	Data      string    `json:"data"`
	Size      int       `json:"size"`
	Truncated bool      `json:"truncated,omitempty"`
}

// Timeline lanes.
const (
	LaneDownstream = "downstream"
	LaneCanonical  = "canonical"
	LaneUpstream   = "upstream"
)

// Entry is one item of an exchange's timeline: a frame or an event.
type Entry struct {
	Time time.Time `json:"time"`
	// Lane is downstream or upstream for a frame, canonical for an event.
	Lane string `json:"lane"`
	// Seq is the frame's or the event's sequence number.
	Seq uint64 `json:"seq"`
	// Dir is a frame's direction (down-in, down-out, up-out, up-in).
	Dir string `json:"dir,omitempty"`
	// Kind is an event's kind (state, content, …).
	Kind string `json:"kind,omitempty"`
	// Text is the frame's bytes, or a one-line summary of the event.
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
	// Event is the whole event, for the page's detail view.
	Event *translate.Event `json:"-"`
}

// ExchangeView is what /api/exchanges/{id} returns.
type ExchangeView struct {
	Exchange *store.Exchange    `json:"exchange"`
	Events   []*translate.Event `json:"events"`
	// EventsDropped is true when older events were dropped, by the store's
	// bound or by MaxTimelineEvents.
	EventsDropped bool    `json:"events_dropped,omitempty"`
	Frames        []Frame `json:"frames"`
	Timeline      []Entry `json:"timeline"`
}

// exchangeView gathers exchange id, or returns nil and the status to
// answer.
func (s *Server) exchangeView(id string) (*ExchangeView, int) {
	if s.opts.Store == nil || id == "" || strings.Contains(id, "/") {
		return nil, fasthttp.StatusNotFound
	}
	x, err := s.opts.Store.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fasthttp.StatusNotFound
	}
	if err != nil {
		s.opts.Logger.Warn("admin: reading an exchange", "exchange", id, "error", err)
		return nil, fasthttp.StatusServiceUnavailable
	}
	v := &ExchangeView{Exchange: x, Events: []*translate.Event{}, Frames: []Frame{}}
	v.Events, v.EventsDropped = s.events(x)
	if s.opts.Frames != nil {
		for _, f := range s.opts.Frames.Frames(id) {
			v.Frames = append(v.Frames, Frame{Seq: f.Seq, Time: f.Time, Dir: f.Dir, Data: string(f.Data),
				Size: f.Size, Truncated: f.Truncated})
		}
	}
	v.Timeline = timeline(v.Events, v.Frames)
	return v, fasthttp.StatusOK
}

// events returns the exchange's latest events, at most MaxTimelineEvents,
// and whether older ones are missing.
func (s *Server) events(x *store.Exchange) ([]*translate.Event, bool) {
	after := uint64(0)
	if x.LastSeq > MaxTimelineEvents {
		after = x.LastSeq - MaxTimelineEvents
	}
	evs, err := s.opts.Store.Events(x.ID, after)
	if errors.Is(err, store.ErrExpired) {
		// The store dropped some of them: find the oldest it still has.
		lo, hi := after, x.LastSeq // Events(lo) expired; Events(hi) never does
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if _, err := s.opts.Store.Events(x.ID, mid); errors.Is(err, store.ErrExpired) {
				lo = mid
			} else {
				hi = mid
			}
		}
		evs, err = s.opts.Store.Events(x.ID, hi)
		after = hi
	}
	if err != nil {
		s.opts.Logger.Warn("admin: reading an exchange's events", "exchange", x.ID, "error", err)
	}
	if evs == nil {
		evs = []*translate.Event{}
	}
	return evs, after > 0
}

// timeline merges events and frames into one list ordered by time. Items
// recorded at the same instant keep the order of their own lane.
func timeline(evs []*translate.Event, frames []Frame) []Entry {
	out := make([]Entry, 0, len(evs)+len(frames))
	for _, f := range frames {
		lane := LaneDownstream
		if strings.HasPrefix(f.Dir, "up") {
			lane = LaneUpstream
		}
		out = append(out, Entry{Time: f.Time, Lane: lane, Seq: f.Seq, Dir: f.Dir, Text: f.Data, Truncated: f.Truncated})
	}
	for _, ev := range evs {
		out = append(out, Entry{Time: ev.Time, Lane: LaneCanonical, Seq: ev.Seq, Kind: ev.Kind.String(),
			Text: summarize(ev), Event: ev})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// summarize says in one line what an event carries.
func summarize(ev *translate.Event) string {
	var b strings.Builder
	add := func(parts ...string) {
		for _, p := range parts {
			if p == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p)
		}
	}
	switch ev.Kind {
	case translate.KindState:
		add(string(ev.State))
		if ev.Err != nil {
			add(ev.Err.Code+":", ev.Err.Message)
		} else {
			add(translate.PartsText(ev.Parts))
		}
	case translate.KindMessageStart, translate.KindMessageEnd:
		if m := ev.Message; m != nil {
			add(string(m.Role), m.Type, m.ID)
			if ev.Kind == translate.KindMessageEnd {
				add(strconv.Quote(m.Text()))
			}
		} else {
			add(ev.MessageID)
		}
	case translate.KindContent:
		if p := ev.Part; p != nil {
			if p.Kind == translate.PartText {
				add(strconv.Quote(p.Text))
			} else {
				add(string(p.Kind), p.Name, p.URI)
			}
		}
		if ev.Delta {
			add("(delta)")
		}
	case translate.KindToolCall, translate.KindToolResult:
		if t := ev.Tool; t != nil {
			add(t.Name, t.CallID)
			if ev.Kind == translate.KindToolCall {
				add(t.Arguments)
			} else {
				add("→", t.Output)
				if t.IsError {
					add("(error)")
				}
			}
		}
	case translate.KindArtifact:
		if a := ev.Artifact; a != nil {
			add(a.Name, a.ID)
			for _, p := range a.Parts {
				add(string(p.Kind), p.MIME, p.URI)
			}
		}
	case translate.KindInputRequest:
		add(translate.PartsText(ev.Parts))
	case translate.KindUsage:
		add(string(ev.Data))
	case translate.KindError:
		if ev.Err != nil {
			add(ev.Err.Code+":", ev.Err.Message)
		}
	}
	return b.String()
}

// apiConfig serves the effective config, redacted.
func (s *Server) apiConfig(ctx *fasthttp.RequestCtx) {
	if s.opts.Config == nil {
		s.json(ctx, fasthttp.StatusOK, map[string]any{})
		return
	}
	v, err := Redacted(s.opts.Config())
	if err != nil {
		s.opts.Logger.Error("admin: rendering the config", "error", err)
		s.jsonError(ctx, fasthttp.StatusInternalServerError, "rendering the config failed")
		return
	}
	s.json(ctx, fasthttp.StatusOK, v)
}

// RedactedValue replaces every secret in the served config.
const RedactedValue = "[redacted]"

// secretWords mark a config key whose value is a secret.
var secretWords = []string{"token", "secret", "key", "authorization", "password", "passwd", "credential", "cookie"}

// Redacted returns cfg as a generic value (maps, lists, scalars) in the
// shape of its yaml tags, with secrets replaced by RedactedValue: every
// value of a "headers" map, the value of every key whose name contains
// token, secret, key, authorization, password, passwd, credential or
// cookie, and the password of every URL with one.
func Redacted(cfg any) (any, error) {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return redact(v), nil
}

func redact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			lk := strings.ToLower(k)
			switch {
			case lk == "headers":
				v[k] = redactAll(val)
			case isSecretName(lk):
				if val != nil && val != "" {
					v[k] = RedactedValue
				}
			default:
				v[k] = redact(val)
			}
		}
		return v
	case []any:
		for i := range v {
			v[i] = redact(v[i])
		}
		return v
	case string:
		return redactURL(v)
	}
	return v
}

// redactAll replaces every value of a map (header values, whatever their
// names) and leaves its keys.
func redactAll(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil
		}
		return RedactedValue
	}
	for k := range m {
		m[k] = RedactedValue
	}
	return m
}

func isSecretName(k string) bool {
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// redactURL hides the credentials of a URL that has them (as xxxxx, the
// way url.URL.Redacted does); other strings pass.
func redactURL(s string) string {
	if !strings.Contains(s, "@") || !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); !has {
		u.User = url.User("xxxxx") // a user name alone is often a token
	}
	return u.Redacted()
}

// fasthttpLogger sends fasthttp's own messages to slog.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Warn("admin listener", "msg", strings.TrimSpace(fmt.Sprintf(format, args...)))
}
