package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/bench/load"
	"github.com/agentbridge/bridge/bench/loadagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// TestHarnessInProcess runs a tiny version of the direct, bridge and
// translation scenarios in-process (agents and bridges on loopback
// listeners) and checks the harness itself: every request answered with
// the right number of events, no errors, ordered percentiles, a report
// that renders. It asserts no timing: targets live in reports.
func TestHarnessInProcess(t *testing.T) {
	agent := loadagent.New(loadagent.Options{})
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = agent.Serve(aln) }()
	t.Cleanup(func() { _ = agent.Shutdown() })

	fronts := map[string]*front{"direct": {base: "http://" + aln.Addr().String()}}
	fronts["bridge"] = startTestBridge(t, translate.ProtoAgentAPI, "http://"+aln.Addr().String()+"/process")
	// The translation scenarios: the canonical load agent served in AIP and
	// in the Agent Protocol, each behind its own bridge.
	for name, proto := range map[string]string{"bridge-aip": translate.ProtoAIP, "bridge-ap": translate.ProtoAgentProtocol} {
		base, stats := startTestProtocolAgent(t, proto)
		f := startTestBridge(t, proto, base)
		f.agentStats = stats
		fronts[name] = f
	}
	var scens []scenario
	for _, s := range scenarios {
		if f := fronts[s.Name]; f != nil {
			f.name, f.noDeltas = s.Name, s.NoDeltas
			scens = append(scens, s)
		}
	}
	wls := []workload{
		{Name: "1KB-10ev", ReqBytes: 1 << 10, Events: 10, RateDiv: 1},
		{Name: "1KB-1000ev", ReqBytes: 1 << 10, Events: 1000, RateDiv: 20},
	}
	// 2000 req/s for 0.1 s: 200 requests of 10 events, 10 of 1000.
	po := phaseOpts{Duration: 100 * time.Millisecond, Warmup: 20 * time.Millisecond, Rate: 2000, Conns: 8,
		EventSize: 32, Timeout: 10 * time.Second, AgentStats: "http://" + aln.Addr().String() + "/stats"}
	rep := &report{Started: time.Now(), Command: "go test ./bench", Opts: runOpts{Runs: 1, Rate: po.Rate,
		Conns: po.Conns, Duration: po.Duration, Warmup: po.Warmup, EventSize: po.EventSize},
		PinNote: "not pinned (test)", Machine: machineInfo(), UptimeBefore: uptime(), LoadBefore: -1,
		Scenarios: scens, Workloads: wls, Skipped: map[string]string{"nginx": nginxInstall}}
	ctx := context.Background()
	for _, w := range wls {
		for _, s := range scens {
			for _, mode := range []string{"open", "closed"} {
				ph, err := measure(ctx, fronts[s.Name], w, mode, po)
				if err != nil {
					t.Fatalf("%s %s %s: %v", s.Name, w.Name, mode, err)
				}
				ph.Scenario, ph.Run = s.Name, 1
				want := w.Events
				if fronts[s.Name].noDeltas {
					want = 1 // one whole content event per reply
				}
				checkPhase(t, ph, w, po, want)
				rep.Phases = append(rep.Phases, ph)
			}
		}
	}
	rep.Finished, rep.UptimeAfter = time.Now(), uptime()
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets of issue 7", "passthrough adds", "### 1KB-10ev", "| bridge |",
		"| bridge-aip |", "| bridge-ap |", "translation adds", "over passthrough", "nginx is not installed", "Closed loop: saturation"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, f := range []string{"results.json", "throughput.svg", "latency-1KB-10ev.svg", "latency-1KB-1000ev.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (len %d)", f, err, len(b))
		}
		if strings.HasSuffix(f, ".svg") && !strings.Contains(string(b), "<polyline") && !strings.Contains(string(b), "<rect x=") {
			t.Errorf("%s has no data drawn", f)
		}
	}
	if testing.Verbose() {
		t.Log(string(md))
	}
}

// startTestBridge serves the bridge in-process in front of the agent at
// upstreamURL, which speaks proto. The breaker is off here: this test
// checks the harness, and one transient upstream failure must not turn
// into a run of refusals.
func startTestBridge(t *testing.T, proto, upstreamURL string) *front {
	t.Helper()
	gw, err := newBridge(upstreamURL, proto, upstream.BreakerConfig{ConsecutiveFailures: -1}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gw.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
	})
	return &front{base: "http://" + ln.Addr().String()}
}

// startTestProtocolAgent serves the load agent in proto in-process, as the
// agent role does, and returns its base URL and its /stats URL.
func startTestProtocolAgent(t *testing.T, proto string) (base, stats string) {
	t.Helper()
	srv, a, err := newProtocolAgent(proto, loadagent.Options{}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	go func() { _ = srv.Serve(cl) }()
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ss := serveAgentStats(sln, a, cl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = ss.Close()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), "http://" + sln.Addr().String() + "/stats"
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func checkPhase(t *testing.T, ph *phase, w workload, po phaseOpts, wantEvents int) {
	t.Helper()
	r := ph.Res
	name := ph.Scenario + " " + ph.Workload + " " + ph.Mode
	// The harness must see every reply whole. What it tolerates is the
	// bridge's own faults, which it detects and counts: today, under a
	// burst of requests, the bridge's upstream client sometimes fails a
	// call with UPSTREAM_UNAVAILABLE ("server closed connection before
	// returning the first response byte") and answers a failed response,
	// after which the next request on that client connection finds stray
	// bytes ("0\r\n\r\n"). Those are bridge bugs the report shows, not
	// harness faults, so they are logged here and not failed on, as long
	// as most requests go through.
	var tolerated uint64
	for kind, n := range r.ErrorKinds {
		if strings.HasPrefix(ph.Scenario, "bridge") && (load.IsFailedResponse(kind) || load.IsStrayBytes(kind)) {
			tolerated += n
			t.Logf("%s: bridge fault on %d of %d requests: %.300s", name, n, r.Sent, r.ErrorSample[kind])
		}
	}
	if r.Errors != tolerated || tolerated*2 > r.Sent || r.OK == 0 || r.OK+r.Errors != r.Sent {
		t.Fatalf("%s: sent %d ok %d errors %d %v", name, r.Sent, r.OK, r.Errors, r.ErrorSample)
	}
	if ph.Mode == "open" {
		want := uint64(openRate(po, w)*po.Duration.Seconds() + 0.5)
		if r.Sent != want {
			t.Errorf("%s: sent %d, want %d (rate × duration)", name, r.Sent, want)
		}
	}
	if r.Events != r.OK*uint64(wantEvents) {
		t.Errorf("%s: %d events for %d replies of %d", name, r.Events, r.OK, wantEvents)
	}
	if !ph.HasAgentConns || ph.Scenario == "direct" && ph.AgentConns > r.Sent {
		t.Errorf("%s: agent connections %d (counted %v) for %d requests", name, ph.AgentConns, ph.HasAgentConns, r.Sent)
	}
	if r.Total.Count() != r.OK || r.TTFE.Count() != r.OK {
		t.Errorf("%s: %d latencies, %d TTFEs for %d replies", name, r.Total.Count(), r.TTFE.Count(), r.OK)
	}
	prev := time.Duration(0)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		v := r.Total.Quantile(q)
		if v < prev || v <= 0 {
			t.Errorf("%s: q%v = %v after %v", name, q, v, prev)
		}
		prev = v
	}
	if r.Total.Max() != prev {
		t.Errorf("%s: q1 %v != max %v", name, prev, r.Total.Max())
	}
}

func TestRequestBodySize(t *testing.T) {
	for _, n := range []int{1 << 10, 16 << 10} {
		if b := requestBody(n, 1000, 64); len(b) != n {
			t.Errorf("requestBody(%d) is %d bytes", n, len(b))
		}
	}
}

func TestSummarize(t *testing.T) {
	s := summarize([]float64{3, 1, 2})
	if s.Med != 2 || s.Min != 1 || s.Max != 3 || s.format(1) != "2.0 (1.0–3.0)" {
		t.Fatalf("%+v %q", s, s.format(1))
	}
	if got := summarize([]float64{1, 4}).Med; got != 2.5 {
		t.Fatalf("median of two: %v", got)
	}
	if got := summarize([]float64{math.NaN(), 5}); got.N != 1 || got.Med != 5 {
		t.Fatalf("NaNs should be left out: %+v", got)
	}
	if summarize(nil).format(1) != "—" {
		t.Fatal("empty stat should print a dash")
	}
}
