package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/agentbridge/bridge/bench/loadagent"
	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
)

// newProtocolAgent serves the load agent's reply (loadagent.Canonical) in
// proto (translate.ProtoAIP or translate.ProtoAgentProtocol) with the
// bridge's own server: downstream.New accepting that protocol only, the
// canonical agent as its one route. It is the agent of the translation
// scenarios. AIP tasks complete as soon as the agent does (no
// awaiting-completion round trip), and no keep-alive comments are sent.
//
// The exchanges it logs (AIP tasks and Agent Protocol requests always are)
// go to a store bounded well below the default, so that a long run of
// 1000-event replies does not hold gigabytes in the agent: the bound is
// far above the exchanges in flight at once.
func newProtocolAgent(proto string, opts loadagent.Options, log *slog.Logger) (*downstream.Server, *loadagent.Canonical, error) {
	switch proto {
	case translate.ProtoAIP, translate.ProtoAgentProtocol:
	default:
		return nil, nil, fmt.Errorf("agent: protocol %q: want %s or %s", proto, translate.ProtoAIP, translate.ProtoAgentProtocol)
	}
	a := loadagent.NewCanonical(opts)
	const bound = 2048
	srv := downstream.New(downstream.Options{
		Accept:    []string{proto},
		KeepAlive: -1,
		Logger:    log,
		Store:     store.NewMemory(store.Limits{MaxExchanges: bound, MaxAge: 5 * time.Minute}, nil),
		AIP:       downstream.AIPOptions{CompleteDirectly: true, MaxTasks: bound},
	}, &downstream.Routing{Routes: []downstream.Route{{
		Name: "bench-agent", Upstream: "bench-agent", Proto: translate.ProtoAgentAPI, Agent: a,
	}}})
	return srv, a, nil
}

// countingListener counts the connections it accepts, as the Agent API
// load agent does, so the report can show how a path pools them.
type countingListener struct {
	net.Listener
	n atomic.Uint64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// serveAgentStats serves GET /stats ({"requests":…,"conns":…}, as the Agent
// API load agent answers it) on ln, for a protocol agent whose own
// listener serves its protocol only.
func serveAgentStats(ln net.Listener, a *loadagent.Canonical, conns *countingListener) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(agentStats{Requests: a.Requests(), Conns: conns.n.Load()})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv
}
