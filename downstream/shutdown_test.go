package downstream_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
)

// TestShutdownEndsOpenStreamsWithATerminalEvent: on shutdown the server
// reports not ready, lets streams run for the drain time, then ends the ones
// still open with a proper terminal event in their protocol.
func TestShutdownEndsOpenStreamsWithATerminalEvent(t *testing.T) {
	a := refagent.New()
	a.Delay = time.Second // a [slow] answer outlives the drain below
	srv := downstream.New(downstream.Options{Logger: quietLog(), KeepAlive: -1},
		&downstream.Routing{Routes: []downstream.Route{{Name: "r", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	resp, err := http.Post(base+"/process", "application/json", strings.NewReader(userRequest("drain", "x [slow]")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first frame: %q %v", line, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()

	var last gjson.Result
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			last = gjson.Parse(strings.TrimPrefix(strings.TrimSpace(line), "data: "))
		}
		if err != nil {
			break
		}
	}
	if last.Get("object").String() != "response" || last.Get("status").String() != "failed" ||
		last.Get("error.code").String() != downstream.CodeShuttingDown {
		t.Fatalf("stream ended with %s, want a failed response %s", last.Raw, downstream.CodeShuttingDown)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("the stream was ended after %v, before its drain time", took)
	}
}
