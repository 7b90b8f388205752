package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/bench/loadagent"
)

// serve runs h on a loopback listener for the test's lifetime.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/process"
}

func body(events, size int) []byte {
	return []byte(`{"input":[{"role":"user","type":"message","content":[{"type":"text","text":"` +
		loadagent.Marker(events, size) + `"}]}]}`)
}

func TestClosedLoopCountsEvents(t *testing.T) {
	url := serve(t, loadagent.New(loadagent.Options{}).Handler())
	c, err := NewClient(Target{URL: url, Body: body(1000, 300), WantEvents: 1000}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := RunClosed(context.Background(), c, ClosedOptions{Conns: 4, Duration: 5 * time.Second, MaxReqs: 40})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 40 || res.OK != 40 || res.Errors != 0 {
		t.Fatalf("sent %d ok %d errors %d (%v)", res.Sent, res.OK, res.Errors, res.ErrorSample)
	}
	if res.Events != 40*1000 || res.Total.Count() != 40 || res.TTFE.Count() != 40 {
		t.Fatalf("events %d, latencies %d, ttfe %d", res.Events, res.Total.Count(), res.TTFE.Count())
	}
	if res.TTFE.Max() > res.Total.Max() {
		t.Fatalf("first event after the end: %v > %v", res.TTFE.Max(), res.Total.Max())
	}
}

func TestWrongEventCountIsAnError(t *testing.T) {
	url := serve(t, loadagent.New(loadagent.Options{}).Handler())
	c, err := NewClient(Target{URL: url, Body: body(5, 10), WantEvents: 6}, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunClosed(context.Background(), c, ClosedOptions{Conns: 1, Duration: time.Second, MaxReqs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 0 || res.Errors != 3 || res.ErrorKinds[errCount.Error()] != 3 {
		t.Fatalf("ok %d errors %d kinds %v", res.OK, res.Errors, res.ErrorKinds)
	}
}

func TestOnlyLoopback(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:80/process", "http://example.com/process", "https://127.0.0.1/process"} {
		if _, err := NewClient(Target{URL: u}, 1); err == nil {
			t.Errorf("NewClient(%q) accepted a non-loopback or non-http target", u)
		}
	}
}

// TestOpenLoopChargesStalls checks the coordinated-omission correction: a
// server that takes 5 ms per request, reached one request at a time, while
// requests are due every 1 ms. Request i cannot start before i*5 ms but was
// due at i*1 ms, so its latency is about 5+4i ms: the last of 40 about
// 160 ms. A generator that timed from the actual send would report 5 ms.
func TestOpenLoopChargesStalls(t *testing.T) {
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(5 * time.Millisecond)
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			fmt.Fprint(w, "data: {\"object\":\"content\",\"delta\":true}\n\n")
			fmt.Fprint(w, "data: {\"object\":\"response\",\"status\":\"completed\"}\n\n")
		})
	})
	c, err := NewClient(Target{URL: url, Body: []byte("{}")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunOpen(context.Background(), c, OpenOptions{Rate: 1000, Duration: 40 * time.Millisecond, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 40 || res.Errors != 0 {
		t.Fatalf("ok %d errors %d (%v)", res.OK, res.Errors, res.ErrorSample)
	}
	if res.Total.Min() < 5*time.Millisecond {
		t.Fatalf("min %v: shorter than the service time", res.Total.Min())
	}
	// The true figures are ~160 ms (max) and ~83 ms (median); assert well
	// below them so a slow machine cannot fail this, and far above the
	// 5 ms an uncorrected generator reports.
	if res.Total.Max() < 100*time.Millisecond || res.Total.Quantile(0.5) < 40*time.Millisecond {
		t.Fatalf("max %v, median %v: stalls were not charged to the requests due during them",
			res.Total.Max(), res.Total.Quantile(0.5))
	}
	if res.OfferedRate != 1000 {
		t.Fatalf("offered %v", res.OfferedRate)
	}
}

func TestFailedResponseIsClassified(t *testing.T) {
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyString("data: {\"sequence_number\":0,\"object\":\"response\",\"status\":\"failed\"," +
			"\"error\":{\"code\":\"AGENT_FAILED\",\"message\":\"failed on request\"}}\n\n")
	})
	c, err := NewClient(Target{URL: url, Body: []byte("{}")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunClosed(context.Background(), c, ClosedOptions{Conns: 1, Duration: time.Second, MaxReqs: 2})
	if err != nil {
		t.Fatal(err)
	}
	const kind = "failed response AGENT_FAILED"
	if res.Errors != 2 || res.ErrorKinds[kind] != 2 || !IsFailedResponse(kind) {
		t.Fatalf("errors %d kinds %v", res.Errors, res.ErrorKinds)
	}
}
