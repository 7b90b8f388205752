package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// The plots are hand-written SVG: no plotting dependency.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"}

// latencySVG plots, for one workload's open-loop phases, latency against
// percentile on the usual "nines" axis (50%, 90%, 99%, 99.9%, 99.99%),
// one line per scenario, all runs merged.
func (r *report) latencySVG(w workload) []byte {
	const (
		width, height         = 760, 420
		left, right, top, bot = 70, 170, 40, 50
		maxNines              = 4.0 // x axis ends at 99.99%
		plotW, plotH          = width - left - right, height - top - bot
	)
	type series struct {
		name string
		pts  [][2]float64 // nines, ms
	}
	var all []series
	yMax, yMin := 0.0, math.Inf(1)
	for _, s := range r.Scenarios {
		h := r.merged(s.Name, w.Name, "open")
		if h.Count() == 0 {
			continue
		}
		// Stop where the histogram runs out of resolution: a nines value
		// needs about 10^nines samples.
		top := math.Min(maxNines, math.Log10(float64(h.Count())))
		var pts [][2]float64
		for x := 0.0; x <= top+1e-9; x += 0.02 {
			q := 1 - math.Pow(10, -x)
			v := msOf(h.Quantile(q))
			pts = append(pts, [2]float64{x, v})
			yMax = math.Max(yMax, v)
			if v > 0 {
				yMin = math.Min(yMin, v)
			}
		}
		all = append(all, series{s.Name, pts})
	}
	// A log latency axis, so a 1 ms median and a 400 ms tail both show.
	yMax = niceCeil(yMax)
	if math.IsInf(yMin, 1) || yMin >= yMax {
		yMin = yMax / 10
	}
	yMin = math.Pow(10, math.Floor(math.Log10(yMin)))
	lo, hi := math.Log10(yMin), math.Log10(yMax)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">Latency by percentile, %s, open loop (all runs merged)</text>`+"\n", left, html.EscapeString(w.Name))
	xOf := func(n float64) float64 { return left + n/maxNines*plotW }
	yOf := func(v float64) float64 {
		v = math.Max(v, yMin)
		return top + plotH - (math.Log10(v)-lo)/(hi-lo)*plotH
	}
	for i, lbl := range []string{"0%", "90%", "99%", "99.9%", "99.99%"} {
		x := xOf(float64(i))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			x, top, x, top+plotH, x, top+plotH+16, lbl)
	}
	for _, v := range logTicks(yMin, yMax) {
		y := yOf(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, y, left+plotW, y, left-6, y+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">percentile</text>`+"\n", left+plotW/2, height-12)
	fmt.Fprintf(&b, `<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">latency (ms, log scale)</text>`+"\n", top+plotH/2)
	for i, s := range all {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(p[0]), yOf(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		ly := top + 10 + i*20
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			left+plotW+15, ly, left+plotW+40, ly, c, left+plotW+46, ly+4, html.EscapeString(s.name))
	}
	if len(all) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no data</text>`+"\n", left+20, top+40)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// throughputSVG draws the closed-loop throughput as horizontal bars, one
// group per workload (each scaled to its own largest bar, since a
// 1000-event stream is far slower than a 10-event one).
func (r *report) throughputSVG() []byte {
	const (
		width, barH, gap, left, labelW = 760, 18, 4, 120, 150
		barMax                         = width - left - labelW
	)
	rate := func(p *phase) float64 { return p.Res.Rate() }
	rows := len(r.Workloads) * (len(r.Scenarios) + 1)
	height := 50 + rows*(barH+gap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="14">Saturation throughput, closed loop, %d connections (median of runs; whisker: min–max)</text>`+"\n", r.Opts.Conns)
	y := 40
	for _, w := range r.Workloads {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+barH-4, html.EscapeString(w.Name))
		y += barH + gap
		best := 0.0
		for _, s := range r.Scenarios {
			best = math.Max(best, r.stat(s.Name, w.Name, "closed", rate).Max)
		}
		for i, s := range r.Scenarios {
			st := r.stat(s.Name, w.Name, "closed", rate)
			if st.N == 0 || best == 0 {
				continue
			}
			c := palette[i%len(palette)]
			scale := float64(barMax) / best
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, y+barH-5, html.EscapeString(s.Name))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y, st.Med*scale, barH, c)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n",
				float64(left)+st.Min*scale, y+barH/2, float64(left)+st.Max*scale, y+barH/2)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.0f req/s</text>`+"\n", float64(left)+st.Max*scale+6, y+barH-5, st.Med)
			y += barH + gap
		}
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// logTicks are 1, 2 and 5 times the powers of ten in [lo, hi].
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for p := lo; p <= hi*1.0001; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := p * m; v <= hi*1.0001 {
				out = append(out, v)
			}
		}
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
