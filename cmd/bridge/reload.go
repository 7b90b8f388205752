package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/tracing/tracer"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/plugins"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// Config reload.
//
// On SIGHUP, or when the config file changes, the whole file is loaded and
// validated again and, when it is good, the server's routing table is
// swapped in one atomic store (downstream.Server.SetRouting). Requests read
// the table once, when they arrive, so streams in flight keep the route and
// upstream client they started with; the next request sees the new table.
//
// Only upstreams and routes change live. Everything else (listen, accept,
// paths, limits, the AIP Partner section, and whatever is added later, the
// admin address say) is fixed when the server starts: a change there is
// rejected with a log line naming the keys, and the old config keeps
// serving, as is any config that does not parse or validate. An upstream
// whose config is unchanged keeps its client, and so its connections and
// its breaker state; a new or changed one gets a new client. Clients of
// removed upstreams are dropped once their last stream ends.

// reloadDebounce is how long the file must be quiet before it is read:
// editors write a file in several steps (truncate, write, rename).
const reloadDebounce = 200 * time.Millisecond

// reloader re-reads the config file and applies it to a running gateway.
type reloader struct {
	path     string
	gw       *gateway
	override func(*mapping.Config) // the flags given beside --config
	log      *slog.Logger
	debounce time.Duration

	mu     sync.Mutex // serializes reloads
	cfg    *mapping.Config
	agents map[string]translate.Agent
	seen   []byte // the file as last read, to skip events that changed nothing
}

// newReloader returns a reloader for the gateway gw, serving cfg (loaded
// from path, override applied).
func newReloader(path string, cfg *mapping.Config, gw *gateway, override func(*mapping.Config), log *slog.Logger) *reloader {
	r := &reloader{path: path, gw: gw, override: override, log: log, debounce: reloadDebounce,
		cfg: cfg, agents: maps.Clone(*gw.agents.Load())}
	r.seen, _ = os.ReadFile(path)
	return r
}

// startReloader reloads the config at path on SIGHUP and when the file
// changes, until ctx ends or the returned stop is called; stop waits for
// the reloader to finish.
func startReloader(ctx context.Context, path string, cfg *mapping.Config, gw *gateway, override func(*mapping.Config), log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r := newReloader(path, cfg, gw, override, log)
	go func() {
		defer close(done)
		r.run(ctx, hup)
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// closeTracer flushes the spans still queued, for a few seconds at most.
func closeTracer(t *tracer.Tracer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.Close(ctx)
}

// run reloads on each value from hup (SIGHUP) and on each change of the
// file, until ctx ends. Without a file watcher (fsnotify unavailable), it
// logs why and serves SIGHUP alone.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err == nil {
		// The directory, not the file: editors and config managers replace
		// the file (write a new one, rename it over), which ends a watch on
		// the file itself.
		if err = w.Add(filepath.Dir(r.path)); err != nil {
			_ = w.Close()
		}
	}
	if err != nil {
		r.log.Warn("config file not watched; reload with SIGHUP", "file", r.path, "error", err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = r.reload("SIGHUP", true)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if r.concerns(ev.Name) {
				debounce.Reset(r.debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			r.log.Warn("config file watch", "file", r.path, "error", err)
		case <-debounce.C:
			_ = r.reload("file changed", false)
		}
	}
}

// concerns reports whether a change of name in the watched directory may
// change the config: the file itself, or a symlink it resolves through
// (Kubernetes swaps a ..data link when a ConfigMap changes).
func (r *reloader) concerns(name string) bool {
	base := filepath.Base(name)
	return filepath.Clean(name) == filepath.Clean(r.path) || strings.HasPrefix(base, "..")
}

// reload loads the file and applies it, or logs why not and keeps the
// config in force. With always false, a file whose bytes did not change
// since the last attempt is skipped.
func (r *reloader) reload(why string, always bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	raw, err := os.ReadFile(r.path)
	if err == nil && !always && bytes.Equal(raw, r.seen) {
		return nil
	}
	if err == nil {
		r.seen = raw
	}
	cfg, err := r.load(err)
	if err == nil {
		err = restartNeeded(r.cfg, cfg)
	}
	if err != nil {
		r.log.Error("config reload rejected; the old config keeps serving", "file", r.path, "trigger", why, "error", err)
		return err
	}
	added, changed, removed, err := r.apply(cfg)
	if err != nil {
		r.log.Error("config reload rejected; the old config keeps serving", "file", r.path, "trigger", why, "error", err)
		return err
	}
	r.log.Info(fmt.Sprintf("reloaded: %d routes, upstreams added %v changed %v removed %v",
		len(cfg.EffectiveRoutes()), added, changed, removed), "file", r.path, "trigger", why)
	return nil
}

// load parses and validates the file (already read, or failed with rerr),
// with the command line's overrides, as cmdServe does at start.
func (r *reloader) load(rerr error) (*mapping.Config, error) {
	if rerr != nil {
		return nil, fmt.Errorf("config: %w", rerr)
	}
	cfg, err := mapping.Load(r.path)
	if err != nil {
		return nil, err
	}
	if r.override != nil {
		r.override(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// apply builds clients for new and changed upstreams, keeps the others,
// and swaps the routing table. When a client cannot be built (a protocol
// the config accepts but no client implements yet), nothing changes.
func (r *reloader) apply(cfg *mapping.Config) (added, changed, removed []string, err error) {
	agents := make(map[string]translate.Agent, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		old := r.cfg.Upstream(u.Name)
		if c, ok := r.agents[u.Name]; ok && old != nil && reflect.DeepEqual(*old, u) {
			agents[u.Name] = c
			continue
		}
		if old == nil {
			added = append(added, u.Name)
		} else {
			changed = append(changed, u.Name)
		}
		c, err := newUpstream(r.gw.upstreamConfig(cfg, u, r.log))
		if err != nil {
			return nil, nil, nil, err
		}
		agents[u.Name] = c
	}
	for _, u := range r.cfg.Upstreams {
		if cfg.Upstream(u.Name) == nil {
			removed = append(removed, u.Name)
		}
	}
	r.gw.server.SetRouting(routingFor(cfg, agents))
	r.gw.obs.setConfig(cfg)
	r.cfg, r.agents = cfg, agents
	r.gw.agents.Store(&agents) // the admin view follows the clients in service
	return added, changed, removed, nil
}

// restartNeeded returns an error naming the top-level keys, other than
// upstreams and routes, whose values differ between old and new.
func restartNeeded(old, cur *mapping.Config) error {
	ov, nv := reflect.ValueOf(*old), reflect.ValueOf(*cur)
	var keys []string
	for i := range ov.NumField() {
		f := ov.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		if key == "upstreams" || key == "routes" || !f.IsExported() {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return fmt.Errorf("%w: %s changed; only upstreams and routes change without a restart", errRestart, strings.Join(keys, ", "))
}

// errRestart marks a config change that needs a restart.
var errRestart = errors.New("restart needed")

// upstreamConfig is the client config of upstream u of cfg. Breaker
// changes are logged and counted by the admin metrics.
func (gw *gateway) upstreamConfig(cfg *mapping.Config, u mapping.Upstream, log *slog.Logger) upstream.Config {
	return upstream.Config{
		Name:     u.Name,
		URL:      u.URL,
		Protocol: u.Protocol,
		Timeouts: upstream.Timeouts{Connect: u.Timeouts.Connect, FirstByte: u.Timeouts.FirstByte,
			Idle: u.Timeouts.Idle, Total: u.Timeouts.Total},
		Breaker: upstream.BreakerConfig{ConsecutiveFailures: u.Breaker.ConsecutiveFailures,
			FailureRatio: u.Breaker.FailureRatio, MinRequests: u.Breaker.MinRequests,
			Interval: u.Breaker.Interval, OpenFor: u.Breaker.OpenFor, HalfOpenProbes: u.Breaker.HalfOpenProbes},
		MaxConcurrent: u.MaxConcurrent,
		MaxEventBytes: cfg.Limits.MaxEventBytes,
		Headers:       u.Headers,
		AIP: upstream.AIPOptions{Mode: u.AIP.Mode, AutoComplete: u.AIP.AutoComplete,
			PollInterval: u.AIP.PollInterval, Paths: u.AIP.Paths, LeaderID: u.AIP.LeaderID},
		AP: upstream.APOptions{Dialect: u.AP.Dialect, Agent: u.AP.Agent},
		OnBreakerChange: func(name, from, to string) {
			log.Warn("breaker state changed", "upstream", name, "from", from, "to", to)
			gw.obs.breakerChanged(name, from, to)
		},
	}
}

// routingFor is the routing table of cfg over the upstream clients agents.
// The config's plugins wrap each route's client (the clients themselves stay
// bare, so the admin view still finds their breakers).
func routingFor(cfg *mapping.Config, agents map[string]translate.Agent) *downstream.Routing {
	mask := cfg.Plugins.Redact.Mask
	if mask == "" {
		mask = "[redacted]"
	}
	redact, _ := plugins.Redact(mask, cfg.Plugins.Redact.Patterns...) // validated with the config
	rt := &downstream.Routing{}
	for _, r := range cfg.EffectiveRoutes() {
		rt.Routes = append(rt.Routes, downstream.Route{
			Name: r.Name, Host: r.Host, PathPrefix: r.PathPrefix,
			Upstream: r.Upstream, Proto: cfg.Upstream(r.Upstream).Protocol,
			Agent: plugins.Wrap(agents[r.Upstream], redact),
		})
	}
	return rt
}
