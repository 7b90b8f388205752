package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"time"

	"github.com/agentbridge/bridge/bench/loadagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// A role is one server the harness starts as a subprocess. It listens,
// prints "ready ADDR" on stdout, and serves until SIGTERM.

func announce(ln net.Listener) { fmt.Printf("ready %s\n", ln.Addr()) }

func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen %q: the benchmark listens on loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

func cmdAgent(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	events := fs.Int("events", 10, "content deltas per reply when the request has no marker")
	size := fs.Int("event-size", 64, "bytes of text per delta when the request has no marker")
	proto := fs.String("proto", translate.ProtoAgentAPI, "protocol served: agentapi (the fasthttp agent), aip or agentprotocol (the canonical agent behind downstream.New)")
	stats := fs.String("stats", "", "for aip and agentprotocol: loopback address serving GET /stats (the agentapi agent serves it itself)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := listenLoopback(*listen)
	if err != nil {
		return err
	}
	opts := loadagent.Options{Events: *events, EventSize: *size}
	if *proto == translate.ProtoAgentAPI {
		a := loadagent.New(opts)
		go func() { <-ctx.Done(); _ = a.Shutdown() }()
		announce(ln)
		return a.Serve(ln)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, a, err := newProtocolAgent(*proto, opts, log)
	if err != nil {
		return err
	}
	cl := &countingListener{Listener: ln}
	if *stats != "" {
		sln, err := listenLoopback(*stats)
		if err != nil {
			return err
		}
		serveAgentStats(sln, a, cl)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	announce(ln)
	return srv.Serve(cl)
}

func cmdBridge(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	up := fs.String("upstream", "", "the agent's URL: its /process URL for agentapi, its base URL for aip and agentprotocol")
	upProto := fs.String("upstream-proto", translate.ProtoAgentAPI, "the agent's protocol: agentapi, aip (stream mode) or agentprotocol")
	stats := fs.String("stats", "", "loopback address serving GET /memstats and /debug/pprof/profile (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := newBridge(*up, *upProto, upstream.BreakerConfig{}, log)
	if err != nil {
		return err
	}
	if *stats != "" {
		sln, err := listenLoopback(*stats)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/memstats", serveMemStats)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go func() { _ = http.Serve(sln, mux) }()
	}
	ln, err := listenLoopback(*listen)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	announce(ln)
	return srv.Serve(ln)
}

// memStats is what the bridge role reports about its heap, so the harness
// can count allocations per request and per event.
type memStats struct {
	Mallocs    uint64 `json:"mallocs"`
	TotalAlloc uint64 `json:"total_alloc"`
	NumGC      uint32 `json:"num_gc"`
}

func serveMemStats(w http.ResponseWriter, _ *http.Request) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(memStats{Mallocs: m.Mallocs, TotalAlloc: m.TotalAlloc, NumGC: m.NumGC})
}

func cmdRevProxy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("revproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	up := fs.String("upstream", "", "the agent's base URL, e.g. http://127.0.0.1:8090")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target, err := url.Parse(*up)
	if err != nil || target.Host == "" {
		return fmt.Errorf("revproxy: --upstream %q: want http://host:port", *up)
	}
	ln, err := listenLoopback(*listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newRevProxy(target), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	announce(ln)
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return fmt.Errorf("revproxy: %w", err)
	}
	return nil
}
