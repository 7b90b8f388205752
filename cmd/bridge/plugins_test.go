package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/mapping"
)

// TestRedactPluginFromConfig: a plugins section in the config applies to
// the routes it builds.
func TestRedactPluginFromConfig(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	agent, err := newReferenceAgent("agentapi", "/process", 0, log)
	if err != nil {
		t.Fatal(err)
	}
	aln, _ := net.Listen("tcp", "127.0.0.1:0")
	go agent.Serve(aln)
	defer agent.Shutdown(context.Background())
	cfg, err := mapping.Parse([]byte(`listen: 127.0.0.1:0
upstreams: [{name: ref, url: 'http://` + aln.Addr().String() + `/process', protocol: agentapi}]
plugins: {redact: {patterns: ['secret\d+'], mask: '***'}}
`))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := newGateway(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go gw.server.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		gw.server.Shutdown(ctx)
	}()
	code, out, e := runCmd(t, "call", "--url", "http://"+ln.Addr().String(), "my secret123 is safe")
	if code != 0 || !strings.Contains(out, "echo: my *** is safe") || strings.Contains(out, "secret123") {
		t.Fatalf("%d %q %q", code, out, e)
	}
}
