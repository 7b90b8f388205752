package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// runOpts are run's flags.
type runOpts struct {
	Scenarios string        `json:"scenarios"`
	Workloads string        `json:"workloads"`
	Duration  time.Duration `json:"duration"`
	Warmup    time.Duration `json:"warmup"`
	Runs      int           `json:"runs"`
	Rate      float64       `json:"rate"`
	Conns     int           `json:"conns"`
	EventSize int           `json:"event_size"`
	Out       string        `json:"out"`
	NoPin     bool          `json:"no_pin"`
	Profile   string        `json:"profile,omitempty"`
}

const pinnedEnv = "BRIDGE_BENCH_PINNED"

func cmdRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var o runOpts
	fs.StringVar(&o.Scenarios, "scenario", "all", "scenarios to run: all, or a comma list of direct, bridge, httputil, nginx, bridge-aip, bridge-ap")
	fs.StringVar(&o.Workloads, "workload", "all", "workloads: all, or a comma list of 1KB-10ev, 16KB-10ev, 1KB-1000ev, 16KB-1000ev")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time of each phase (open loop and closed loop)")
	fs.DurationVar(&o.Warmup, "warmup", 0, "unmeasured load before each phase (default duration/5, at most 1s)")
	fs.IntVar(&o.Runs, "runs", 3, "runs of everything; each figure is the median of the runs")
	fs.Float64Var(&o.Rate, "rate", 1000, "offered open-loop rate in requests/s (1000-event workloads get rate/20)")
	fs.IntVar(&o.Conns, "conns", 64, "connections of the closed-loop (saturation) phase")
	fs.IntVar(&o.EventSize, "event-size", 64, "bytes of text in each content delta")
	fs.StringVar(&o.Out, "out", "", "output directory (default bench/results/DATE)")
	fs.BoolVar(&o.NoPin, "no-pin", false, "do not pin processes to cores with taskset")
	fs.StringVar(&o.Profile, "profile", "", "directory for CPU profiles of the bridge over its closed-loop phases (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Runs < 1 || o.Duration <= 0 || o.Rate <= 0 || o.Conns < 1 || o.EventSize < 1 {
		return fmt.Errorf("run: --runs, --duration, --rate, --conns and --event-size must be positive")
	}
	if o.Warmup == 0 {
		o.Warmup = min(o.Duration/5, time.Second)
	}
	if o.Out == "" {
		o.Out = filepath.Join("bench", "results", time.Now().Format("2006-01-02"))
	}
	scens, err := pick(scenarios, func(s scenario) string { return s.Name }, o.Scenarios, "scenario")
	if err != nil {
		return err
	}
	wls, err := pick(workloads, func(w workload) string { return w.Name }, o.Workloads, "workload")
	if err != nil {
		return err
	}
	taskset, pinNote := pinning(o.NoPin)
	if taskset != "" && os.Getenv(pinnedEnv) == "" {
		return repin(ctx, taskset)
	}
	return runAll(ctx, o, scens, wls, taskset, pinNote)
}

// pinning decides whether to pin, and says why not when not.
func pinning(off bool) (taskset, note string) {
	cpus := machineCPUs()
	switch {
	case off:
		return "", "not pinned (--no-pin)"
	case cpus < 2:
		return "", fmt.Sprintf("not pinned: %d core", cpus)
	}
	p, err := exec.LookPath("taskset")
	if err != nil {
		return "", "not pinned: taskset not found (Debian package util-linux)"
	}
	return p, fmt.Sprintf("pinned with taskset: load generator and agent on core %d, the proxy under test on core %d (each Go process GOMAXPROCS=1, nginx 1 worker)", coreLoad, coreProxy)
}

// repin re-executes the harness under taskset -c coreLoad.
func repin(ctx context.Context, taskset string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	cmd := exec.CommandContext(ctx, taskset, append([]string{"-c", strconv.Itoa(coreLoad), self}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), pinnedEnv+"=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return exitCode(ee.ExitCode())
		}
		return fmt.Errorf("pin: %w", err)
	}
	return nil
}

func runAll(ctx context.Context, o runOpts, scens []scenario, wls []workload, taskset, pinNote string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	tmp, err := os.MkdirTemp("", "bridge-bench-")
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer os.RemoveAll(tmp)
	h := &host{self: self, tmp: tmp, taskset: taskset}
	rep := &report{Started: time.Now(), Command: "go run ./bench " + strings.Join(os.Args[1:], " "),
		Opts: o, PinNote: pinNote, Machine: machineInfo(), UptimeBefore: uptime(), LoadBefore: loadAvg1(),
		Workloads: wls, Skipped: map[string]string{}}
	fmt.Printf("bench: %s\nbench: %s\nbench: output %s\n", rep.UptimeBefore, pinNote, o.Out)

	agent, err := h.startRole("agent", coreLoad, "agent", "--listen", "127.0.0.1:0", "--event-size", strconv.Itoa(o.EventSize))
	if err != nil {
		return err
	}
	defer agent.stop()
	fronts := map[string]*front{}
	for _, s := range scens {
		if s.skip != nil {
			if why := s.skip(); why != "" {
				fmt.Printf("bench: skipping %s: %s\n", s.Name, why)
				rep.Skipped[s.Name] = why
				continue
			}
		}
		f, err := s.start(h, agent)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.Name, err)
		}
		if f.proc != nil {
			defer f.proc.stop()
		}
		if f.agent != nil {
			defer f.agent.stop()
		}
		f.name, f.noDeltas = s.Name, s.NoDeltas
		fronts[s.Name] = f
		rep.Scenarios = append(rep.Scenarios, s)
	}
	po := phaseOpts{Duration: o.Duration, Warmup: o.Warmup, Rate: o.Rate, Conns: o.Conns,
		EventSize: o.EventSize, Timeout: 30 * time.Second, ProfileDir: o.Profile,
		AgentStats: "http://" + agent.addr + "/stats", Agent: agent}
	for run := 1; run <= o.Runs; run++ {
		for _, w := range wls {
			for _, s := range rep.Scenarios {
				for _, mode := range []string{"open", "closed"} {
					if err := ctx.Err(); err != nil {
						return err
					}
					ph, err := measure(ctx, fronts[s.Name], w, mode, po)
					if err != nil {
						return fmt.Errorf("run %d %s %s %s: %w", run, s.Name, w.Name, mode, err)
					}
					ph.Scenario, ph.Run = s.Name, run
					rep.Phases = append(rep.Phases, ph)
					fmt.Println("bench:", progressLine(ph))
				}
			}
		}
	}
	rep.UptimeAfter = uptime()
	rep.Finished = time.Now()
	if err := rep.write(o.Out); err != nil {
		return err
	}
	fmt.Printf("bench: report %s\n", filepath.Join(o.Out, "report.md"))
	return nil
}

func progressLine(ph *phase) string {
	r := ph.Res
	s := fmt.Sprintf("run %d %-10s %-11s %-6s %8.0f req/s  p50 %s  p99 %s  p99.9 %s  ok %d  err %d",
		ph.Run, ph.Scenario, ph.Workload, ph.Mode, r.Rate(), ms(r.Total.Quantile(0.5)),
		ms(r.Total.Quantile(0.99)), ms(r.Total.Quantile(0.999)), r.OK, r.Errors)
	for k, v := range r.ErrorSample {
		s += fmt.Sprintf("\n    error %q: %s", k, v)
	}
	if ph.HasProc {
		s += fmt.Sprintf("  cpu %.2fs  rss %d MiB", ph.CPUSecs, ph.RSSKiB/1024)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }

// machine describes the box for the report.
type machine struct {
	CPUs   int    `json:"cpus"`
	Model  string `json:"model"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Nginx  string `json:"nginx"`
}

func machineInfo() machine {
	m := machine{CPUs: machineCPUs(), Go: runtime.Version(), Nginx: nginxVersion()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// machineCPUs counts the machine's CPUs, whatever this process's affinity.
func machineCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	n := strings.Count(string(b), "\nprocessor\t") + strings.Count(string(b[:min(len(b), 10)]), "processor")
	if n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// uptime is `uptime`'s line, or /proc/loadavg when the command is missing.
func uptime() string {
	if out, err := exec.Command("uptime").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		return "load average (1, 5, 15 min): " + strings.Join(strings.Fields(string(b))[:3], ", ")
	}
	return "unknown"
}

// loadAvg1 is the 1-minute load average, or -1.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
