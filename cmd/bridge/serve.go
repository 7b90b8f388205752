package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/internal/tracing/tracer"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// logFlags are the logging flags every serving command has.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", errUsage, l.level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q: want text or json", errUsage, l.format)
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [--config FILE] [--listen ADDR] [--accept LIST] [--upstream URL --upstream-protocol P]", stderr)
	configPath := fs.String("config", "", "YAML config file with listen, accept, upstreams and routes (see README)")
	listen := fs.String("listen", "127.0.0.1:9000", "address of the listener that accepts every protocol")
	accept := fs.StringSlice("accept", nil, "protocols to accept, comma-separated: agentapi, aip, agentprotocol (ap); default all")
	upURL := fs.String("upstream", "", "the one upstream agent's URL, for the sidecar case (for agentapi the full /process URL)")
	upProto := fs.String("upstream-protocol", translate.ProtoAgentAPI, "protocol the upstream agent speaks")
	upName := fs.String("upstream-name", "upstream", "name of the --upstream agent in logs and metrics")
	apiPath := fs.String("agentapi-path", "/process", "path of the Agent API endpoint on the listener")
	aipPrefix := fs.String("aip-prefix", "", "path prefix of the AIP endpoints (/rpc, /stream, /notification/...), e.g. /acps-aip-v1")
	maxBody := fs.Int("max-body", 4<<20, "largest request body accepted, in bytes (larger gets HTTP 413)")
	keepAlive := fs.Duration("keepalive", 15*time.Second, "interval of SSE keep-alive comments on quiet streams (0 disables)")
	drain := fs.Duration("drain", 30*time.Second, "on SIGTERM, how long open streams may take to finish")
	adminAddr := fs.String("admin", "", "address of the admin listener: /metrics, /healthz, /readyz, the admin API and page (default off)")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	var cfg *mapping.Config
	if *configPath != "" {
		if cfg, err = mapping.Load(*configPath); err != nil {
			return err
		}
	} else {
		if *upURL == "" {
			return fmt.Errorf("%w: give --config FILE, or --upstream URL for one agent", errUsage)
		}
		cfg = &mapping.Config{Upstreams: []mapping.Upstream{{Name: *upName, URL: *upURL, Protocol: *upProto}}}
	}
	// override applies the flags given beside --config (again on reload).
	override := func(cfg *mapping.Config) {
		if cfg.Listen == "" || fs.Changed("listen") {
			cfg.Listen = *listen
		}
		if len(cfg.Accept) == 0 || fs.Changed("accept") {
			cfg.Accept = *accept
		}
		if cfg.AgentAPIPath == "" || fs.Changed("agentapi-path") {
			cfg.AgentAPIPath = *apiPath
		}
		if fs.Changed("aip-prefix") {
			cfg.AIP.Prefix = *aipPrefix
		}
		if cfg.Limits.MaxBodyBytes == 0 || fs.Changed("max-body") {
			cfg.Limits.MaxBodyBytes = *maxBody
		}
		if cfg.Limits.KeepAlive == 0 || fs.Changed("keepalive") {
			cfg.Limits.KeepAlive = *keepAlive
		}
		if fs.Changed("admin") {
			cfg.Admin = *adminAddr
		}
	}
	override(cfg)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	gw, err := newGateway(cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	log.Info("bridge listening", "addr", ln.Addr().String(), "accept", acceptList(cfg.Accept),
		"upstreams", len(cfg.Upstreams), "routes", len(cfg.EffectiveRoutes()))
	_, stopAdmin, err := startAdmin(ctx, gw, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopAdmin()
	defer closeTracer(gw.tracer)
	if *configPath != "" {
		defer startReloader(ctx, *configPath, cfg, gw, override, log)()
	}
	return serveUntil(ctx, gw.server, ln, *drain, log)
}

// serveUntil serves ln until ctx ends, then drains for at most drain.
func serveUntil(ctx context.Context, srv *downstream.Server, ln net.Listener, drain time.Duration, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "drain", drain)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return <-errc
}

func acceptList(a []string) string {
	if len(a) == 0 {
		return "all"
	}
	return strings.Join(a, ",")
}

// gateway is a configured bridge: its server and the upstream clients the
// server's routes use.
type gateway struct {
	server *downstream.Server
	// agents holds the upstream clients by name; a reload swaps the map
	// whole, and readers (the admin view) load it.
	agents atomic.Pointer[map[string]translate.Agent]
	obs    *observability // metrics and frames for the admin listener; nil when off
	tracer *tracer.Tracer // OTLP span export; nil when no endpoint is set
}

// newGateway builds upstream clients and the server from a valid config.
func newGateway(cfg *mapping.Config, log *slog.Logger) (*gateway, error) {
	st := store.NewMemory(store.Limits{
		MaxExchanges:         cfg.Limits.MaxExchanges,
		MaxAge:               cfg.Limits.ExchangeMaxAge,
		MaxEventsPerExchange: cfg.Limits.MaxEventsPerExchange,
	}, nil)
	gw := &gateway{}
	gw.obs = newObservability(cfg, st, gw)
	agents := map[string]translate.Agent{}
	gw.agents.Store(&agents)
	for _, u := range cfg.Upstreams {
		uc := gw.upstreamConfig(cfg, u, log)
		c, err := newUpstream(uc)
		if err != nil {
			return nil, err
		}
		agents[u.Name] = c
	}
	rt := routingFor(cfg, agents)
	var err error
	if gw.tracer, err = tracer.FromEnv(log); err != nil {
		return nil, err
	}
	gw.server = downstream.New(downstream.Options{
		Accept:       cfg.Accept,
		AgentAPIPath: cfg.AgentAPIPath,
		AIP:          aipPartnerOptions(cfg.AIP),
		MaxBodyBytes: cfg.Limits.MaxBodyBytes,
		KeepAlive:    keepAliveOption(cfg.Limits.KeepAlive),
		Store:        st,
		Logger:       log,
		Observer:     tracer.Join(gw.obs.observer(), gw.tracer.Observer()),
		Frames:       gw.obs.frameRecorder(),
		// The admin view shows streamed exchanges' events; without it
		// nobody reads them, so they are not kept.
		RecordStreams: cfg.Admin != "",
	}, rt)
	return gw, nil
}

// aipPartnerOptions maps the config's AIP section to the server's options.
func aipPartnerOptions(c mapping.AIPPartner) downstream.AIPOptions {
	o := downstream.AIPOptions{
		Prefix: c.Prefix, AIC: c.AIC, Name: c.Name, Description: c.Description, Version: c.Version,
		DisableNotifications:      c.Notifications != nil && !*c.Notifications,
		CompleteDirectly:          c.CompleteDirectly,
		ResponseTimeout:           c.ResponseTimeout,
		AwaitingInputTimeout:      c.AwaitingInputTimeout,
		AwaitingCompletionTimeout: c.AwaitingCompletionTimeout,
	}
	for _, sk := range c.Skills {
		o.Skills = append(o.Skills, downstream.ACSSkill{ID: sk.ID, Name: sk.Name, Description: sk.Description,
			Tags: sk.Tags, Examples: sk.Examples})
	}
	return o
}

// newUpstream returns the client for an upstream of any protocol.
func newUpstream(cfg upstream.Config) (translate.Agent, error) {
	switch cfg.Protocol {
	case translate.ProtoAgentAPI:
		return upstream.NewAgentAPI(cfg)
	case translate.ProtoAIP:
		return upstream.NewAIP(cfg)
	case translate.ProtoAgentProtocol:
		return upstream.NewAgentProtocol(cfg)
	}
	return nil, fmt.Errorf("upstream %q: the %s upstream client is not built yet (see README's protocol table)", cfg.Name, cfg.Protocol)
}

// keepAliveOption maps the user's "0 disables" to the server's negative.
func keepAliveOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func cmdValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("validate", "validate --config FILE", stderr)
	path := fs.String("config", "", "YAML config file to check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("%w: --config FILE is required", errUsage)
	}
	cfg, err := mapping.Load(*path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: valid (%d upstreams, %d routes)\n", *path, len(cfg.Upstreams), len(cfg.EffectiveRoutes()))
	return nil
}
