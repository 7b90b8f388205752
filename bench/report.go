package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// report is everything one `bench run` measured, and renders itself.
type report struct {
	Started, Finished         time.Time
	Command                   string
	Opts                      runOpts
	PinNote                   string
	Machine                   machine
	UptimeBefore, UptimeAfter string
	LoadBefore                float64 // 1-minute load average at the start, -1 unknown
	Scenarios                 []scenario
	Skipped                   map[string]string
	Workloads                 []workload
	Phases                    []*phase
}

// write renders report.md, results.json and the plots into dir.
func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	files := map[string][]byte{"report.md": []byte(r.markdown())}
	for _, w := range r.Workloads {
		files["latency-"+w.Name+".svg"] = r.latencySVG(w)
	}
	files["throughput.svg"] = r.throughputSVG()
	js, err := r.json()
	if err != nil {
		return err
	}
	files["results.json"] = js
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// jsonPhase is a phase with its load figures flattened, for results.json.
type jsonPhase struct {
	*phase
	Offered   float64            `json:"offered_rate"`
	Achieved  float64            `json:"achieved_rate"`
	Elapsed   float64            `json:"elapsed_seconds"`
	Sent      uint64             `json:"sent"`
	OK        uint64             `json:"ok"`
	Errors    uint64             `json:"errors"`
	ErrKinds  map[string]uint64  `json:"error_kinds,omitempty"`
	ErrSample map[string]string  `json:"error_samples,omitempty"`
	Events    uint64             `json:"events"`
	EventRate float64            `json:"event_rate"`
	LatencyMs map[string]float64 `json:"latency_ms"`
	TTFEMs    map[string]float64 `json:"ttfe_ms"`
}

var quantiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}}

func (r *report) json() ([]byte, error) {
	var ps []jsonPhase
	for _, p := range r.Phases {
		j := jsonPhase{phase: p, Offered: p.Res.OfferedRate, Achieved: p.Res.Rate(), Elapsed: p.Res.Elapsed.Seconds(),
			Sent: p.Res.Sent, OK: p.Res.OK, Errors: p.Res.Errors, ErrKinds: p.Res.ErrorKinds, ErrSample: p.Res.ErrorSample,
			Events: p.Res.Events, EventRate: p.Res.EventRate(),
			LatencyMs: map[string]float64{"max": msOf(p.Res.Total.Max())}, TTFEMs: map[string]float64{}}
		for _, q := range quantiles {
			j.LatencyMs[q.name] = msOf(p.Res.Total.Quantile(q.q))
			j.TTFEMs[q.name] = msOf(p.Res.TTFE.Quantile(q.q))
		}
		ps = append(ps, j)
	}
	b, err := json.MarshalIndent(map[string]any{
		"started": r.Started, "command": r.Command, "options": r.Opts, "machine": r.Machine,
		"pinning": r.PinNote, "uptime_before": r.UptimeBefore, "uptime_after": r.UptimeAfter,
		"skipped": r.Skipped, "phases": ps,
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return b, nil
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Bridge benchmark, %s\n\n", r.Started.Format("2006-01-02"))
	p("`%s`, %s to %s. Figures are the median of %d run(s), with the spread (min–max) over the runs in brackets. Latencies in milliseconds.\n\n",
		r.Command, r.Started.Format("15:04:05"), r.Finished.Format("15:04:05 MST"), r.Opts.Runs)
	p("- Machine: %d CPUs, %s, Linux %s, %s", r.Machine.CPUs, r.Machine.Model, r.Machine.Kernel, r.Machine.Go)
	if r.Machine.Nginx != "" {
		p(", %s", r.Machine.Nginx)
	}
	p("\n- Pinning: %s\n", r.PinNote)
	p("- `uptime` before: `%s`\n- `uptime` after: `%s`\n", r.UptimeBefore, r.UptimeAfter)
	if r.LoadBefore >= 0.5 {
		p("- **Other work was running on the machine** (1-minute load average %.2f when the run started, on %d CPUs): other engineers build and test in the same tree. Absolute figures are noisy; the spread columns show how much.\n", r.LoadBefore, r.Machine.CPUs)
	}
	p("- Each phase: %v of unmeasured warm-up, then %v measured; open loop at %.0f req/s (1000-event workloads at rate/20), closed loop with %d connections; %d-byte text per content delta.\n\n",
		r.Opts.Warmup, r.Opts.Duration, r.Opts.Rate, r.Opts.Conns, r.Opts.EventSize)

	p("## Targets of issue 7\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, t := range r.targets() {
		p("| %s | %s | **%s** |\n", t.Goal, orDash(t.Measured), t.Verdict)
	}

	p("\n## Scenarios\n\n| scenario | kind | path |\n|---|---|---|\n")
	for _, s := range r.Scenarios {
		p("| %s | %s | %s |\n", s.Name, s.Kind, s.Desc)
	}
	for name, why := range r.Skipped {
		p("| %s | skipped | %s |\n", name, why)
	}
	p("\nWorkloads: ")
	for i, w := range r.Workloads {
		if i > 0 {
			p(", ")
		}
		p("`%s` (%d-byte request, %d content deltas)", w.Name, w.ReqBytes, w.Events)
	}
	p(".\n")

	r.openSection(&b)
	r.closedSection(&b)
	r.translationSection(&b)
	r.allocSection(&b)

	p("\n## Plots\n\n")
	for _, w := range r.Workloads {
		p("![latency by percentile, %[1]s](latency-%[1]s.svg)\n\n", w.Name)
	}
	p("![saturation throughput](throughput.svg)\n\n")
	b.WriteString(methodNotes)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func (r *report) openSection(b *strings.Builder) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n## Open loop: latency at a fixed offered rate\n\n")
	p("Latency is from each request's intended send time to its terminal `response completed` frame (coordinated-omission corrected); TTFE is the time to the first content delta. Added = the scenario's figure minus direct's in the same run.\n")
	for _, w := range r.Workloads {
		p("\n### %s\n\n", w.Name)
		p("| scenario | offered req/s | achieved req/s | p50 | p90 | p99 | p99.9 | TTFE p50 | TTFE p99 | events/s | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Scenarios {
			ph := r.find(s.Name, w.Name, "open")
			if len(ph) == 0 {
				continue
			}
			p("| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, ph[0].Res.OfferedRate,
				r.stat(s.Name, w.Name, "open", func(p *phase) float64 { return p.Res.Rate() }).format(0),
				r.stat(s.Name, w.Name, "open", quantileMs(0.5)).format(3),
				r.stat(s.Name, w.Name, "open", quantileMs(0.9)).format(3),
				r.stat(s.Name, w.Name, "open", quantileMs(0.99)).format(3),
				r.stat(s.Name, w.Name, "open", quantileMs(0.999)).format(3),
				r.stat(s.Name, w.Name, "open", ttfeMs(0.5)).format(3),
				r.stat(s.Name, w.Name, "open", ttfeMs(0.99)).format(3),
				r.stat(s.Name, w.Name, "open", func(p *phase) float64 { return p.Res.EventRate() }).format(0),
				errorsCell(ph))
		}
		p("\n| scenario | added p50 | added p90 | added p99 | added p99.9 | p99 × direct | p99 × nginx | proxy CPU s | proxy CPU ms per 1k req | proxy peak RSS MiB | agent conns opened per 1k req |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Scenarios {
			if s.Name == "direct" || len(r.find(s.Name, w.Name, "open")) == 0 {
				continue
			}
			p99 := r.stat(s.Name, w.Name, "open", quantileMs(0.99))
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name,
				r.added(s.Name, w.Name, 0.5).signed(3), r.added(s.Name, w.Name, 0.9).signed(3),
				r.added(s.Name, w.Name, 0.99).signed(3), r.added(s.Name, w.Name, 0.999).signed(3),
				ratio(p99, r.stat("direct", w.Name, "open", quantileMs(0.99))),
				ratio(p99, r.stat("nginx", w.Name, "open", quantileMs(0.99))),
				r.procCells(s.Name, w.Name, "open"), r.connsCell(s.Name, w.Name, "open"))
		}
	}
}

// connsCell is how many connections the agent accepted per 1000 requests:
// near 0 for a path that keeps its upstream connections alive, 1000 for
// one that opens a connection per request.
func (r *report) connsCell(scen, wl, mode string) string {
	ph := r.find(scen, wl, mode)
	if len(ph) == 0 || !ph[0].HasAgentConns {
		return "—"
	}
	return r.stat(scen, wl, mode, func(p *phase) float64 {
		if p.Res.Sent == 0 {
			return 0
		}
		return 1000 * float64(p.AgentConns) / float64(p.Res.Sent)
	}).format(1)
}

// procCells are the proxy's CPU seconds, CPU per 1000 requests and peak RSS.
func (r *report) procCells(scen, wl, mode string) string {
	ph := r.find(scen, wl, mode)
	if len(ph) == 0 || !ph[0].HasProc {
		return "— | — | —"
	}
	cpu := r.stat(scen, wl, mode, func(p *phase) float64 { return p.CPUSecs })
	per := r.stat(scen, wl, mode, func(p *phase) float64 {
		if p.Res.OK == 0 {
			return math.NaN()
		}
		return 1e6 * p.CPUSecs / float64(p.Res.OK)
	})
	rss := r.stat(scen, wl, mode, func(p *phase) float64 { return float64(p.RSSKiB) / 1024 })
	note := ""
	if !ph[0].RSSReset {
		note = " (lifetime)"
	}
	return fmt.Sprintf("%s | %s | %s%s", cpu.format(2), per.format(1), rss.format(1), note)
}

func errorsCell(ph []*phase) string {
	var n uint64
	var kinds []string
	for _, p := range ph {
		n += p.Res.Errors
		if k := p.Res.TopErrors(2); k != "" {
			kinds = append(kinds, k)
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(kinds, "; "))
}

func (r *report) closedSection(b *strings.Builder) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n## Closed loop: saturation throughput\n\n")
	p("%d connections, each sending its next request when the previous reply ended. The load generator and the agent share one core, so a proxy whose CPU use stays well under 1.00 core was not the bottleneck: compare it by requests per proxy CPU-second too.\n\n", r.Opts.Conns)
	p("| workload | scenario | req/s | events/s | × direct | × nginx | p99 | proxy cores used | req per proxy CPU-s | proxy peak RSS MiB | agent conns per 1k req | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	rate := func(p *phase) float64 { return p.Res.Rate() }
	for _, w := range r.Workloads {
		for _, s := range r.Scenarios {
			ph := r.find(s.Name, w.Name, "closed")
			if len(ph) == 0 {
				continue
			}
			st := r.stat(s.Name, w.Name, "closed", rate)
			cores, perCPU, rss := "—", "—", "—"
			if ph[0].HasProc {
				cores = r.stat(s.Name, w.Name, "closed", func(p *phase) float64 { return p.CPUSecs / p.Res.Elapsed.Seconds() }).format(2)
				perCPU = r.stat(s.Name, w.Name, "closed", func(p *phase) float64 {
					if p.CPUSecs == 0 || p.Res.OK == 0 {
						return math.NaN()
					}
					return float64(p.Res.OK) / p.CPUSecs
				}).format(0)
				rss = r.stat(s.Name, w.Name, "closed", func(p *phase) float64 { return float64(p.RSSKiB) / 1024 }).format(1)
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w.Name, s.Name, st.format(0),
				r.stat(s.Name, w.Name, "closed", func(p *phase) float64 { return p.Res.EventRate() }).format(0),
				ratio(st, r.stat("direct", w.Name, "closed", rate)), ratio(st, r.stat("nginx", w.Name, "closed", rate)),
				r.stat(s.Name, w.Name, "closed", quantileMs(0.99)).format(3), cores, perCPU, rss, r.connsCell(s.Name, w.Name, "closed"), errorsCell(ph))
		}
	}
}

// bridgeScenarios are the scenarios that run the bridge role (the only
// ones with heap figures): passthrough and translation.
func (r *report) bridgeScenarios() []scenario {
	var out []scenario
	for _, s := range r.Scenarios {
		if s.Kind == "passthrough" || s.Kind == "translation" {
			out = append(out, s)
		}
	}
	return out
}

func (r *report) allocSection(b *strings.Builder) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	var cols []scenario
	for _, s := range r.bridgeScenarios() {
		for _, w := range r.Workloads {
			if ph := r.find(s.Name, w.Name, "closed"); len(ph) > 0 && ph[0].HasMallocs {
				cols = append(cols, s)
				break
			}
		}
	}
	if len(cols) == 0 {
		return
	}
	p("\n## Bridge heap allocations (closed loop)\n\n")
	p("From the bridge process's runtime.MemStats.Mallocs before and after each phase. Per event is the difference between a 1000-event and a 10-event workload of the same request size, per request, over the 990 extra events (for a path without deltas, per delta the agent made).\n\n")
	p("| workload |")
	for _, s := range cols {
		p(" %s |", s.Name)
	}
	p("\n|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, w := range r.Workloads {
		p("| %s |", w.Name)
		for _, s := range cols {
			per := r.stat(s.Name, w.Name, "closed", func(p *phase) float64 {
				if p.Res.OK == 0 || !p.HasMallocs {
					return math.NaN()
				}
				return float64(p.Mallocs) / float64(p.Res.OK)
			})
			p(" %s |", per.format(1))
		}
		p("\n")
	}
	p("| per event |")
	for _, s := range cols {
		st, _ := r.allocsPerEvent(s.Name)
		p(" %s |", st.format(2))
	}
	p("\n")
}

// translationSection sets each translation scenario against direct and
// against the passthrough bridge, workload by workload.
func (r *report) translationSection(b *strings.Builder) {
	ts := r.translations(false)
	if len(ts) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n## Translation against direct and against passthrough\n\n")
	p("The load generator speaks the Agent API to the bridge in every scenario; in a translation scenario the bridge speaks AIP or the Agent Protocol to an agent that serves the same reply in that protocol. Over direct: the scenario's open-loop figure minus direct's (what the client pays for the bridge and the protocol change; the target's reading). Over passthrough: minus the Agent API passthrough bridge's (what the protocol change costs beyond the bridge itself; it also holds the difference between the two agents, see How this was measured). CPU and throughput ratios are against the passthrough bridge. The agent shares core 0 with the load generator: an agent using most of a core means the agent, not the bridge, set the pace.\n\n")
	p("| workload | scenario | p50 over direct | p99 over direct | p50 over passthrough | p99 over passthrough | bridge CPU per 1k req × passthrough (open loop) | closed-loop req/s × passthrough | bridge req per CPU-s × passthrough (closed loop) | agent cores used, closed loop (passthrough's agent) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	cpuPer := func(p *phase) float64 {
		if !p.HasProc || p.Res.OK == 0 {
			return math.NaN()
		}
		return p.CPUSecs / float64(p.Res.OK)
	}
	perCPU := func(p *phase) float64 {
		if !p.HasProc || p.CPUSecs == 0 {
			return math.NaN()
		}
		return float64(p.Res.OK) / p.CPUSecs
	}
	rate := func(p *phase) float64 { return p.Res.Rate() }
	agentCores := func(p *phase) float64 {
		if !p.HasAgentCPU || p.Res.Elapsed <= 0 {
			return math.NaN()
		}
		return p.AgentCPUSecs / p.Res.Elapsed.Seconds()
	}
	for _, w := range r.Workloads {
		for _, s := range ts {
			if len(r.find(s.Name, w.Name, "open")) == 0 {
				continue
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) |\n", w.Name, s.Name,
				r.added(s.Name, w.Name, 0.5).signed(3), r.added(s.Name, w.Name, 0.99).signed(3),
				r.addedOver(s.Name, "bridge", w.Name, 0.5).signed(3), r.addedOver(s.Name, "bridge", w.Name, 0.99).signed(3),
				ratio(r.stat(s.Name, w.Name, "open", cpuPer), r.stat("bridge", w.Name, "open", cpuPer)),
				ratio(r.stat(s.Name, w.Name, "closed", rate), r.stat("bridge", w.Name, "closed", rate)),
				ratio(r.stat(s.Name, w.Name, "closed", perCPU), r.stat("bridge", w.Name, "closed", perCPU)),
				r.stat(s.Name, w.Name, "closed", agentCores).format(2), r.stat("bridge", w.Name, "closed", agentCores).format(2))
		}
	}
	for _, s := range ts {
		if s.NoDeltas {
			p("\n%s: AIP v01.00 has no text deltas, so its agent sends the reply as one complete message and the load generator receives one whole content event of N×S bytes (checked for length) instead of N deltas; its events/s columns count those, and its time to first event is the time to the whole text.\n", s.Name)
		}
	}
}

const methodNotes = `## How this was measured

- Every server is a separate process on loopback: the load-test agent (bench/loadagent, fasthttp,
  writes SSE frames directly and flushes after every event), the bridge (this harness re-executed as
  "bench bridge", which builds the gateway from the bridge's packages as cmd/bridge's newGateway does,
  logging at warn), httputil.ReverseProxy ("bench revproxy") and nginx (config written to a temp
  prefix). The load generator (bench/load, fasthttp client) runs in the harness process.
- Translation scenarios: the bridge's upstream is upstream.NewAIP in stream mode (bridge-aip) or
  upstream.NewAgentProtocol with its dialect detected (bridge-ap), and each has its own agent process
  ("bench agent --proto aip|agentprotocol", on the load generator's core like the Agent API agent):
  loadagent.Canonical, which yields the Agent API agent's reply as canonical events (working, message
  start, N text deltas of S bytes, message end, completed), served by the bridge's own server
  (downstream.New accepting that protocol only, AIP tasks completed directly, no keep-alive comments,
  its exchange log bounded to 2048 exchanges). That agent is heavier than the fasthttp Agent API
  agent (it is a full protocol server, and it logs every event of every AIP task and Agent Protocol
  request, as those protocols' replay needs), and it shares a core with the load generator, so both
  "over direct" and "over passthrough" include the agent's extra cost as well as the bridge's
  translation. The Agent Protocol path is two HTTP calls per turn (submit, then the SSE event stream).
- Open loop: request i is due at start + i/rate; its latency counts from that intended time, so a
  stall is charged to every request due during it (coordinated omission corrected). Closed loop:
  N connections, back to back, latency from the actual send.
- Latencies go into a log-linear histogram (128 buckets per power of two: < 0.8% error); a
  percentile is its bucket's upper bound.
- Proxy CPU seconds are utime+stime from /proc/PID/stat over the measured phase (nginx: master and
  worker); peak RSS is VmHWM from /proc/PID/status, reset before each phase through
  /proc/PID/clear_refs.
- Every reply is checked: HTTP 200, exactly the asked-for number of content deltas (bridge-aip: one
  whole content event carrying at least N×S bytes), and a terminal response with status completed.
  Anything else is counted as an error and kept out of the latency.
- Runs are interleaved (run 1 of every scenario, then run 2, …), and added latency is computed run
  by run against direct's (or the passthrough bridge's) figure of the same run.

## Not measured yet

- Translation with an AIP or Agent Protocol client in front of the bridge (and so the paths into an
  Agent API agent, and AIP ↔ Agent Protocol): the load generator speaks the Agent API only; each
  needs its request body and stream reader in bench/load, then one line in bench/scenarios.go.
- A direct baseline for the AIP and Agent Protocol agents themselves (it needs those readers too), which
  would separate the agent's cost from the translation's.
`
