package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/faultproxy"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// path is one upstream the soak drives through the bridge.
type path struct {
	proto     string
	prefix    string
	resumable bool // a cut stream can be resumed upstream
	proxy     *faultproxy.Proxy
}

// tally counts outcomes; safe for concurrent use.
type tally struct {
	mu        sync.Mutex
	exchanges map[string]int // path -> count
	outcomes  map[string]int // path/status/code -> count
	lost      map[string]int // path -> completed replies that were wrong
	examples  []string       // a few lost replies, for the report
}

func (t *tally) add(p, status, code string, lost bool, want, got string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.exchanges[p]++
	k := p + " " + status
	if code != "" {
		k += " " + code
	}
	t.outcomes[k]++
	if lost {
		t.lost[p]++
		if len(t.examples) < 5 {
			t.examples = append(t.examples, fmt.Sprintf("%s: want %q, got %q", p, want, got))
		}
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	duration := fs.Duration("duration", 10*time.Second, "how long to run")
	conc := fs.Int("concurrency", 16, "concurrent client streams")
	rate := fs.Float64("fault-rate", 0.2, "share of upstream requests that get a random fault")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed, for a repeatable run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rng := rand.New(rand.NewPCG(*seed, 1))
	var rngMu sync.Mutex
	// Faults that suit a soak: quick to show. Hang is left out so the run
	// is not all waiting on timeouts; the fault tests cover it.
	kinds := []faultproxy.Kind{faultproxy.Refuse, faultproxy.Delay, faultproxy.Status5xx, faultproxy.TooMany,
		faultproxy.Garbage, faultproxy.InvalidJSON, faultproxy.Cut, faultproxy.Drip}
	choose := func(r *http.Request) faultproxy.Fault {
		if r.Method == http.MethodGet || strings.Contains(r.URL.Path, "/rpc") {
			return faultproxy.Fault{} // capability documents, completes and cancels stay clean
		}
		rngMu.Lock()
		defer rngMu.Unlock()
		if rng.Float64() >= *rate {
			return faultproxy.Fault{}
		}
		k := kinds[rng.IntN(len(kinds))]
		return faultproxy.Fault{Kind: k, After: 1 + rng.IntN(4), Delay: time.Millisecond,
			Status: 502, RetryAfter: 0}
	}

	paths := []*path{
		{proto: translate.ProtoAgentAPI, prefix: "/agentapi"},
		{proto: translate.ProtoAIP, prefix: "/aip", resumable: true},
	}
	rt := &downstream.Routing{}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for _, p := range paths {
		agentURL, stop, err := serveReference(p.proto, log)
		if err != nil {
			return err
		}
		closers = append(closers, stop)
		if p.proxy, err = faultproxy.Start(agentURL, choose); err != nil {
			return err
		}
		closers = append(closers, func() { p.proxy.Close() })
		cfg := upstream.Config{Name: p.proto, Protocol: p.proto, URL: p.proxy.URL(),
			Timeouts: upstream.Timeouts{FirstByte: 2 * time.Second, Idle: 2 * time.Second},
			Breaker:  upstream.BreakerConfig{ConsecutiveFailures: 1000}} // keep calling: the soak measures faults, not the breaker
		var agent translate.Agent
		var err2 error
		if p.proto == translate.ProtoAgentAPI {
			cfg.URL += "/process"
			agent, err2 = upstream.NewAgentAPI(cfg)
		} else {
			cfg.AIP.Mode = upstream.AIPModeStream
			agent, err2 = upstream.NewAIP(cfg)
		}
		if err2 != nil {
			return err2
		}
		rt.Routes = append(rt.Routes, downstream.Route{Name: p.proto, PathPrefix: p.prefix, Upstream: p.proto, Proto: p.proto, Agent: agent})
	}
	srv := downstream.New(downstream.Options{Logger: log, KeepAlive: -1}, rt)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	base := "http://" + ln.Addr().String()

	t := &tally{exchanges: map[string]int{}, outcomes: map[string]int{}, lost: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conc}}
	var wg sync.WaitGroup
	var n atomic.Int64
	start := time.Now()
	for i := 0; i < *conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				id := n.Add(1)
				p := paths[id%int64(len(paths))]
				text := fmt.Sprintf("soak %d [tool]", id)
				status, code, reply := exchange(client, base+p.prefix+"/process", fmt.Sprint("soak-", id), text)
				lost := status == "completed" && reply != "echo: "+text
				t.add(p.proto, status, code, lost, "echo: "+text, reply)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	report(out, t, paths, elapsed, *seed)
	for _, p := range paths {
		if p.resumable && t.lost[p.proto] > 0 {
			return fmt.Errorf("%d events lost on the resumable %s path", t.lost[p.proto], p.proto)
		}
	}
	return nil
}

// exchange sends one Agent API request and returns the final status, its
// error code and the reply text.
func exchange(c *http.Client, url, session, text string) (status, code, reply string) {
	body := fmt.Sprintf(`{"session_id":%q,"input":[{"role":"user","type":"message","content":[{"type":"text","text":%q}]}]}`, session, text)
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return "client-error", "", ""
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		return "client-error", "read", ""
	}
	var final gjson.Result
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "data: ") {
			if f := gjson.Parse(line[6:]); f.Get("object").String() == "response" {
				final = f
			}
		}
	}
	if !final.Exists() {
		return "no-final-response", "", ""
	}
	for _, m := range final.Get("output").Array() {
		if m.Get("type").String() == "message" && m.Get("role").String() == "assistant" {
			reply += m.Get("content.0.text").String()
		}
	}
	return final.Get("status").String(), final.Get("error.code").String(), reply
}

// serveReference serves the reference agent in protocol p on loopback.
func serveReference(p string, log *slog.Logger) (string, func(), error) {
	a := refagent.New()
	srv := downstream.New(downstream.Options{Accept: []string{p}, Logger: log, KeepAlive: -1,
		AIP: downstream.AIPOptions{CompleteDirectly: true}},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

func report(out io.Writer, t *tally, paths []*path, elapsed time.Duration, seed uint64) {
	total := 0
	for _, n := range t.exchanges {
		total += n
	}
	fmt.Fprintf(out, "soak: %d exchanges in %v (%.0f/s), seed %d\n\n", total, elapsed.Round(time.Millisecond),
		float64(total)/elapsed.Seconds(), seed)
	fmt.Fprintf(out, "%-10s %10s %12s %12s\n", "upstream", "exchanges", "faults", "events lost")
	for _, p := range paths {
		faults := int64(0)
		for _, n := range p.proxy.Injected() {
			faults += n
		}
		note := ""
		if p.resumable {
			note = "  (resumable: must be 0)"
		}
		fmt.Fprintf(out, "%-10s %10d %12d %12d%s\n", p.proto, t.exchanges[p.proto], faults, t.lost[p.proto], note)
	}
	fmt.Fprintf(out, "\nfaults injected:\n")
	for _, p := range paths {
		inj := p.proxy.Injected()
		keys := make([]string, 0, len(inj))
		for k := range inj {
			keys = append(keys, string(k))
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "  %-10s %-14s %d\n", p.proto, k, inj[faultproxy.Kind(k)])
		}
	}
	for _, e := range t.examples {
		fmt.Fprintf(out, "lost: %s\n", e)
	}
	fmt.Fprintf(out, "\noutcomes (client side, by upstream, status and error code):\n")
	keys := make([]string, 0, len(t.outcomes))
	for k := range t.outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  %-50s %d\n", k, t.outcomes[k])
	}
}
