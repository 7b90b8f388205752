package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/admin"
	"github.com/agentbridge/bridge/internal/framelog"
	"github.com/agentbridge/bridge/internal/metrics"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/upstream"
)

// observability is what the admin listener shows and the gateway feeds:
// Prometheus metrics and the raw frames of recent exchanges. It exists only
// when the config names an admin address; a nil *observability feeds and
// shows nothing, so the gateway pays nothing for it when it is off.
type observability struct {
	cfg     atomic.Pointer[mapping.Config] // the effective config, as /api/config shows it
	gw      *gateway
	store   store.Store
	metrics *metrics.Metrics
	frames  *framelog.Log
}

// newObservability returns the metrics and frame log of gw when cfg has an
// admin address, else nil. Breaker states are read from gw.agents (the current clients) at scrape
// time, so gw's upstreams may be added after this call.
func newObservability(cfg *mapping.Config, st store.Store, gw *gateway) *observability {
	if cfg.Admin == "" {
		return nil
	}
	o := &observability{gw: gw, store: st, frames: framelog.New(framelog.Limits{})}
	o.cfg.Store(cfg)
	o.metrics = metrics.New(metrics.Options{Breakers: o.breakerStates, StoreSize: st.Len})
	return o
}

// setConfig replaces the config /api/config and /api/upstreams show (on a
// reload).
func (o *observability) setConfig(cfg *mapping.Config) {
	if o != nil {
		o.cfg.Store(cfg)
	}
}

// observer is the downstream.Observer to give the server: nil when off.
func (o *observability) observer() downstream.Observer {
	if o == nil {
		return nil
	}
	return o.metrics
}

// frameRecorder is the downstream.FrameRecorder to give the server: nil
// when off.
func (o *observability) frameRecorder() downstream.FrameRecorder {
	if o == nil {
		return nil
	}
	return o.frames
}

// breakerChanged counts a breaker transition (upstream.Config.OnBreakerChange).
func (o *observability) breakerChanged(name, from, to string) {
	if o != nil {
		o.metrics.BreakerChanged(name, from, to)
	}
}

// breakerOf returns the breaker of upstream name, or nil.
func (o *observability) breakerOf(name string) *upstream.Breaker {
	if b, ok := (*o.gw.agents.Load())[name].(interface{ Breaker() *upstream.Breaker }); ok {
		return b.Breaker()
	}
	return nil
}

func (o *observability) breakerStates() map[string]string {
	out := map[string]string{}
	for _, u := range o.cfg.Load().Upstreams {
		if b := o.breakerOf(u.Name); b != nil {
			out[u.Name] = b.State().String()
		}
	}
	return out
}

func (o *observability) upstreams() []admin.Upstream {
	cfg := o.cfg.Load()
	out := make([]admin.Upstream, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		au := admin.Upstream{Name: u.Name, Protocol: u.Protocol, URL: u.URL, Breaker: "unknown"}
		if b := o.breakerOf(u.Name); b != nil {
			c := b.Counts()
			au.Breaker = b.State().String()
			au.Counts = admin.BreakerCounts{Requests: c.Requests, TotalSuccesses: c.TotalSuccesses,
				TotalFailures: c.TotalFailures, ConsecutiveSuccesses: c.ConsecutiveSuccesses,
				ConsecutiveFailures: c.ConsecutiveFailures}
		}
		out = append(out, au)
	}
	return out
}

// startAdmin serves the admin listener of gw on the config's admin address
// until stop is called, and returns its base URL. It does nothing (url "",
// a no-op stop) when the admin listener is off. /readyz turns 503 once ctx
// ends, when the gateway starts draining; the listener itself stays up
// through the drain so that it can say so.
func startAdmin(ctx context.Context, gw *gateway, log *slog.Logger) (url string, stop func(), err error) {
	o := gw.obs
	if o == nil {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", o.cfg.Load().Admin)
	if err != nil {
		return "", nil, fmt.Errorf("admin listener: %w (choose another address with --admin)", err)
	}
	srv := admin.New(admin.Options{
		Metrics:   o.metrics.Handler(),
		Store:     o.store,
		Frames:    o.frames,
		Upstreams: o.upstreams,
		Config:    func() any { return o.cfg.Load() },
		Ready:     func() bool { return ctx.Err() == nil },
		Logger:    log.With("component", "admin"),
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
			log.Error("admin listener stopped", "error", err)
		}
	}()
	url = "http://" + ln.Addr().String()
	log.Info("admin listening", "addr", ln.Addr().String(), "page", url+"/", "metrics", url+"/metrics")
	return url, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}
