package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbridge/bridge/bench/load"
	"github.com/agentbridge/bridge/bench/loadagent"
)

// phase is one measurement: one scenario, workload and mode, one run.
type phase struct {
	Scenario string       `json:"scenario"`
	Workload string       `json:"workload"`
	Mode     string       `json:"mode"` // "open" or "closed"
	Run      int          `json:"run"`
	Res      *load.Result `json:"-"`
	// Proxy process figures over the phase (HasProc false for direct and
	// in-process runs).
	HasProc  bool    `json:"has_proc"`
	CPUSecs  float64 `json:"cpu_seconds"`
	RSSKiB   uint64  `json:"peak_rss_kib"`
	RSSReset bool    `json:"peak_rss_reset"` // false: VmHWM is the process's lifetime peak
	// Connections the agent accepted over the phase: how well the path
	// pools its upstream connections.
	HasAgentConns bool   `json:"has_agent_conns"`
	AgentConns    uint64 `json:"agent_conns"`
	// CPU seconds of the scenario's agent process over the phase (it
	// shares a core with the load generator); HasAgentCPU false in-process.
	HasAgentCPU  bool    `json:"has_agent_cpu"`
	AgentCPUSecs float64 `json:"agent_cpu_seconds"`
	// Heap allocations in the bridge over the phase.
	HasMallocs bool   `json:"has_mallocs"`
	Mallocs    uint64 `json:"mallocs"`
}

// phaseOpts are the run-wide settings a phase needs.
type phaseOpts struct {
	Duration  time.Duration
	Warmup    time.Duration
	Rate      float64 // before the workload's RateDiv
	Conns     int
	EventSize int
	Timeout   time.Duration
	// ProfileDir, when set, receives a CPU profile of the bridge over
	// each of its closed-loop phases ("SCENARIO-WORKLOAD.pprof", then
	// "SCENARIO-WORKLOAD-2.pprof" for the next run, …).
	ProfileDir string
	// AgentStats is the agent's GET /stats URL ("" to skip).
	AgentStats string
	// Agent is the shared agent's process, for its CPU (nil: in-process).
	Agent *proc
}

// requestBody is an AgentRequest whose user text carries the agent's
// marker, padded so that the whole body is reqBytes long.
func requestBody(reqBytes, events, eventSize int) []byte {
	head := `{"input":[{"role":"user","type":"message","content":[{"type":"text","text":"` +
		loadagent.Marker(events, eventSize) + " "
	const tailJSON = `"}]}]}`
	pad := max(reqBytes-len(head)-len(tailJSON), 0)
	return []byte(head + strings.Repeat("x", pad) + tailJSON)
}

// openRate is the offered rate of workload w's open-loop phase.
func openRate(o phaseOpts, w workload) float64 { return o.Rate / float64(max(w.RateDiv, 1)) }

// measure runs one phase against f.
func measure(ctx context.Context, f *front, w workload, mode string, o phaseOpts) (*phase, error) {
	t := load.Target{URL: f.base + "/process", Body: requestBody(w.ReqBytes, w.Events, o.EventSize),
		WantEvents: w.Events, Timeout: o.Timeout}
	if f.noDeltas {
		t.WantEvents, t.WholeContent, t.MinContentBytes = 1, true, w.Events*o.EventSize
	}
	conns := o.Conns
	if mode == "open" {
		conns = 4096
	}
	c, err := load.NewClient(t, conns)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	run := func(d time.Duration) (*load.Result, error) {
		if mode == "open" {
			return load.RunOpen(ctx, c, load.OpenOptions{Rate: openRate(o, w), Duration: d})
		}
		return load.RunClosed(ctx, c, load.ClosedOptions{Conns: o.Conns, Duration: d})
	}
	if o.Warmup > 0 {
		if _, err := run(o.Warmup); err != nil {
			return nil, fmt.Errorf("warmup: %w", err)
		}
	}
	ph := &phase{Workload: w.Name, Mode: mode}
	var pids []int
	var cpu0 float64
	if f.proc != nil {
		pids = procTree(f.proc.Pid())
		ph.RSSReset = resetPeakRSS(pids)
		if cpu0, err = cpuSeconds(pids); err != nil {
			return nil, err
		}
	}
	var m0 memStats
	if f.stats != "" {
		if m0, err = fetchMemStats(f.stats); err != nil {
			return nil, err
		}
	}
	var prof chan error
	if o.ProfileDir != "" && f.stats != "" && mode == "closed" {
		prof = make(chan error, 1)
		go func() { prof <- fetchProfile(f.stats, o.Duration, o.ProfileDir, f.profileName(), w.Name) }()
	}
	if f.agentStats != "" {
		o.AgentStats = f.agentStats
	}
	if f.agent != nil {
		o.Agent = f.agent
	}
	var agentCPU0 float64
	if o.Agent != nil {
		if agentCPU0, err = cpuSeconds([]int{o.Agent.Pid()}); err != nil {
			return nil, err
		}
	}
	var a0 agentStats
	if o.AgentStats != "" {
		if a0, err = fetchAgentStats(o.AgentStats); err != nil {
			return nil, err
		}
	}
	res, err := run(o.Duration)
	if prof != nil {
		if perr := <-prof; perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return nil, err
	}
	ph.Res = res
	if f.proc != nil {
		cpu1, err := cpuSeconds(pids)
		if err != nil {
			return nil, err
		}
		if ph.RSSKiB, err = peakRSSKiB(pids); err != nil {
			return nil, err
		}
		ph.HasProc, ph.CPUSecs = true, cpu1-cpu0
	}
	if o.Agent != nil {
		cpu1, err := cpuSeconds([]int{o.Agent.Pid()})
		if err != nil {
			return nil, err
		}
		ph.HasAgentCPU, ph.AgentCPUSecs = true, cpu1-agentCPU0
	}
	if o.AgentStats != "" {
		a1, err := fetchAgentStats(o.AgentStats)
		if err != nil {
			return nil, err
		}
		ph.HasAgentConns, ph.AgentConns = true, a1.Conns-a0.Conns
	}
	if f.stats != "" {
		m1, err := fetchMemStats(f.stats)
		if err != nil {
			return nil, err
		}
		// Two /memstats calls allocate a little themselves; it is noise
		// next to thousands of requests.
		ph.HasMallocs, ph.Mallocs = true, m1.Mallocs-m0.Mallocs
	}
	return ph, nil
}

func fetchMemStats(url string) (memStats, error) {
	var m memStats
	return m, getJSON(url, &m)
}

// agentStats is the load agent's GET /stats.
type agentStats struct {
	Requests uint64 `json:"requests"`
	Conns    uint64 `json:"conns"`
}

func fetchAgentStats(url string) (agentStats, error) {
	var a agentStats
	return a, getJSON(url, &a)
}

func getJSON(url string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("stats %s: %w", url, err)
	}
	return nil
}

// fetchProfile saves a CPU profile of the bridge taken over d.
func fetchProfile(statsURL string, d time.Duration, dir, scen, wl string) error {
	base := strings.TrimSuffix(statsURL, "/memstats")
	secs := max(int(d.Seconds()), 1)
	c := &http.Client{Timeout: d + 10*time.Second}
	resp, err := c.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs))
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	name := filepath.Join(dir, scen+"-"+wl+".pprof")
	for i := 2; ; i++ {
		if _, err := os.Stat(name); err != nil {
			break
		}
		name = filepath.Join(dir, fmt.Sprintf("%s-%s-%d.pprof", scen, wl, i))
	}
	out, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer out.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}
