package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/agentbridge/bridge/bench/load"
)

// stat is a figure over the runs: its median and its spread.
type stat struct {
	Med, Min, Max float64
	N             int
}

// summarize leaves out NaNs: figures that do not exist for a run (per
// request, when no request succeeded).
func summarize(v []float64) stat {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(s) == 0 {
		return stat{}
	}
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{Med: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// format prints "median (min–max)", or the median alone for one run.
func (s stat) format(prec int) string {
	if s.N == 0 {
		return "—"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf("%.*f", prec, s.Med)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Med, prec, s.Min, prec, s.Max)
}

// signed is format with an explicit sign on the median, for added latency.
func (s stat) signed(prec int) string {
	if s.N == 0 {
		return "—"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf("%+.*f", prec, s.Med)
	}
	return fmt.Sprintf("%+.*f (%+.*f–%+.*f)", prec, s.Med, prec, s.Min, prec, s.Max)
}

// find returns the phases of one scenario, workload and mode by run.
func (r *report) find(scen, wl, mode string) []*phase {
	var out []*phase
	for _, p := range r.Phases {
		if p.Scenario == scen && p.Workload == wl && p.Mode == mode {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Run < out[j].Run })
	return out
}

func (r *report) stat(scen, wl, mode string, f func(*phase) float64) stat {
	var v []float64
	for _, p := range r.find(scen, wl, mode) {
		v = append(v, f(p))
	}
	return summarize(v)
}

// quantileMs is a phase's total-latency quantile in milliseconds.
func quantileMs(q float64) func(*phase) float64 {
	return func(p *phase) float64 { return msOf(p.Res.Total.Quantile(q)) }
}

func ttfeMs(q float64) func(*phase) float64 {
	return func(p *phase) float64 { return msOf(p.Res.TTFE.Quantile(q)) }
}

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

// added is scen's open-loop quantile minus direct's, run by run (runs are
// interleaved, so run i of both saw the same machine), summarized.
func (r *report) added(scen, wl string, q float64) stat { return r.addedOver(scen, "direct", wl, q) }

// addedOver is scen's open-loop quantile minus baseline's, run by run.
func (r *report) addedOver(scen, baseline, wl string, q float64) stat {
	base := r.find(baseline, wl, "open")
	var v []float64
	for _, p := range r.find(scen, wl, "open") {
		for _, b := range base {
			if b.Run == p.Run {
				v = append(v, msOf(p.Res.Total.Quantile(q))-msOf(b.Res.Total.Quantile(q)))
			}
		}
	}
	return summarize(v)
}

// merged is the union of a scenario's histograms over the runs, for plots.
func (r *report) merged(scen, wl, mode string) *load.Histogram {
	h := load.NewHistogram()
	for _, p := range r.find(scen, wl, mode) {
		h.Merge(p.Res.Total)
	}
	return h
}

// ratio is a/b of medians, or "—".
func ratio(a, b stat) string {
	if a.N == 0 || b.N == 0 || b.Med == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a.Med/b.Med)
}

func (r *report) has(scen string) bool {
	for _, s := range r.Scenarios {
		if s.Name == scen {
			return true
		}
	}
	return false
}
