package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
)

// namedAgent serves the reference agent over the Agent API, with name put
// before the user's text: it answers "echo: <name> <text>".
func namedAgent(t *testing.T, name string) string {
	t.Helper()
	ref := refagent.New()
	ref.Delay = 0
	agent := translate.AgentFunc(func(ctx context.Context, req *translate.Request) (translate.Stream, error) {
		if m := req.LastInput(); m != nil {
			m.Parts = []translate.Part{translate.TextPart(name + " " + m.Text())}
		}
		return ref.Open(ctx, req)
	})
	srv := downstream.New(downstream.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		&downstream.Routing{Routes: []downstream.Route{{Name: name, Upstream: name, Proto: translate.ProtoAgentAPI, Agent: agent}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String() + "/process"
}

// writeConfig replaces the file as editors do: a new file renamed over it.
func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func routeConfig(listen, target string, urls map[string]string) string {
	return fmt.Sprintf(`listen: %s
upstreams:
  - {name: one, url: %q, protocol: agentapi, headers: {Authorization: "Bearer s3cret-one"}}
  - {name: two, url: %q, protocol: agentapi}
routes:
  - {name: main, upstream: %s}
`, listen, urls["one"], urls["two"], target)
}

// ask sends text to the bridge's Agent API endpoint and returns the
// answer's text, or an error for anything but a completed answer.
func ask(client *http.Client, base, text string) (string, error) {
	body, _ := json.Marshal(map[string]any{"input": []any{map[string]any{"role": "user", "type": "message",
		"content": []any{map[string]any{"type": "text", "text": text}}}}})
	resp, err := client.Post(base+"/process", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	var answer strings.Builder
	status := ""
	for _, block := range strings.Split(string(raw), "\n\n") {
		js, ok := strings.CutPrefix(block, "data: ")
		if !ok {
			continue
		}
		f := gjson.Parse(js)
		if f.Get("object").String() == "content" && f.Get("delta").Bool() {
			answer.WriteString(f.Get("text").String())
		}
		if f.Get("object").String() == "response" {
			status = f.Get("status").String()
		}
	}
	if status != "completed" {
		return "", fmt.Errorf("answer status %q: %s", status, raw)
	}
	return answer.String(), nil
}

// TestReloadSwapsRoutesUnderLoad serves from a config file, keeps
// requests flowing, and rewrites the file: the route moves to another
// upstream without a failed request, a stream in flight keeps its
// upstream, and invalid or restart-only changes are rejected while the old
// config keeps serving.
func TestReloadSwapsRoutesUnderLoad(t *testing.T) {
	urls := map[string]string{"one": namedAgent(t, "one"), "two": namedAgent(t, "two")}
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	writeConfig(t, path, routeConfig("127.0.0.1:0", "one", urls))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", path, "--drain", "5s"}, &out, &errOut) }()
	re := regexp.MustCompile(`msg="bridge listening" addr=([0-9.:]+)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(errOut.String()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge did not start:\n%s", errOut.String())
		}
	}
	waitLog := func(what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); strings.Count(errOut.String(), what) < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("log has no %q (%d wanted):\n%s", what, n, errOut.String())
			}
		}
	}

	// Steady traffic from a few clients.
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	var failures []string
	var last atomic.Value // the newest answer
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := ask(client, base, fmt.Sprintf("c%d-%d", c, i))
				sent.Add(1)
				if err == nil && got != fmt.Sprintf("echo: one c%d-%d", c, i) && got != fmt.Sprintf("echo: two c%d-%d", c, i) {
					err = fmt.Errorf("answer %q", got)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				last.Store(got)
			}
		}()
	}
	waitAnswer := func(prefix string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if s, _ := last.Load().(string); strings.HasPrefix(s, prefix) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("answers never became %q; last %v\n%s", prefix, last.Load(), errOut.String())
			}
		}
	}
	waitAnswer("echo: one ")

	// A slow stream in flight during the swap stays on upstream one.
	slow := make(chan string, 1)
	go func() {
		got, err := ask(client, base, "in flight [slow]")
		if err != nil {
			got = err.Error()
		}
		slow <- got
	}()
	time.Sleep(100 * time.Millisecond)

	writeConfig(t, path, routeConfig("127.0.0.1:0", "two", urls))
	waitLog("reloaded: 1 routes, upstreams added [] changed [] removed []", 1)
	waitAnswer("echo: two ")
	if got := <-slow; got != "echo: one in flight [slow]" {
		t.Errorf("stream in flight during the reload answered %q", got)
	}

	// An invalid file: rejected, every problem named, the old config serves.
	writeConfig(t, path, "listen: 127.0.0.1:0\nupstreams: [{name: one, url: 'nope', protocol: smoke-signals}]\nroutes: [{upstream: ghost}]\n")
	waitLog("config reload rejected", 1)
	rejection := errOut.String()[strings.LastIndex(errOut.String(), "config reload rejected"):]
	for _, want := range []string{"smoke-signals", "nope", "ghost"} {
		if !strings.Contains(rejection, want) {
			t.Errorf("rejection does not name %q: %s", want, rejection)
		}
	}
	// A change that needs a restart: rejected too.
	writeConfig(t, path, routeConfig("127.0.0.1:1", "one", urls))
	waitLog("config reload rejected", 2)
	if !strings.Contains(errOut.String(), "listen changed; only upstreams and routes change without a restart") {
		t.Errorf("restart-only change not explained:\n%s", errOut.String())
	}
	n := sent.Load()
	for deadline := time.Now().Add(5 * time.Second); sent.Load() < n+20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("traffic stalled")
		}
	}
	if s, _ := last.Load().(string); !strings.HasPrefix(s, "echo: two ") {
		t.Errorf("after rejected reloads the bridge answers %q, want upstream two's", s)
	}

	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %s", len(failures), sent.Load(), failures[0])
	}
	if strings.Contains(errOut.String(), "s3cret") {
		t.Errorf("an upstream header value was logged:\n%s", errOut.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestReloadOnSIGHUP drives the reloader's signal channel: the changed
// upstream gets a new client, the unchanged one keeps its client (and
// breaker), and a file that did not change is reloaded anyway.
func TestReloadOnSIGHUP(t *testing.T) {
	urls := map[string]string{"one": namedAgent(t, "one"), "two": namedAgent(t, "two")}
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	writeConfig(t, path, routeConfig("127.0.0.1:0", "one", urls))
	cfg, err := mapping.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	gw, err := newGateway(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	r := newReloader(path, cfg, gw, nil, log)
	r.debounce = time.Hour // only the signal reloads
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx, hup) }()
	defer func() { cancel(); <-done }()

	r.mu.Lock()
	oneBefore := r.agents["one"]
	r.mu.Unlock()
	changed := strings.Replace(routeConfig("127.0.0.1:0", "two", urls), "{name: two, url:", "{name: two, max_concurrent: 7, url:", 1)
	changed = strings.Replace(changed, "routes:\n", "routes:\n  - {name: extra, upstream: one, path_prefix: /x}\n", 1)
	writeConfig(t, path, changed)
	hup <- syscall.SIGHUP
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "reloaded:"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload on SIGHUP:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "reloaded: 2 routes, upstreams added [] changed [two] removed []") {
		t.Fatalf("reload log:\n%s", logs.String())
	}
	r.mu.Lock()
	if r.agents["one"] != oneBefore {
		t.Error("the unchanged upstream got a new client")
	}
	r.mu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gw.server.Serve(ln) }()
	defer gw.server.Shutdown(context.Background())
	base := "http://" + ln.Addr().String()
	if got, err := ask(http.DefaultClient, base, "hi"); err != nil || got != "echo: two hi" {
		t.Fatalf("after SIGHUP: %q %v", got, err)
	}
	if got, err := ask(http.DefaultClient, base+"/x", "hi"); err != nil || got != "echo: one hi" {
		t.Fatalf("new route: %q %v", got, err)
	}

	// Remove an upstream, add one; a second SIGHUP without change reloads
	// and reports nothing changed.
	writeConfig(t, path, strings.Replace(routeConfig("127.0.0.1:0", "three", urls), "name: two,", "name: three,", 1))
	hup <- syscall.SIGHUP
	hup <- syscall.SIGHUP
	for deadline := time.Now().Add(5 * time.Second); strings.Count(logs.String(), "reloaded:") < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reloads:\n%s", logs.String())
		}
	}
	for _, want := range []string{"reloaded: 1 routes, upstreams added [three] changed [] removed [two]",
		"reloaded: 1 routes, upstreams added [] changed [] removed []"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	// The admin view reads the clients in service, not those of the start.
	clients := *gw.agents.Load()
	if _, ok := clients["three"]; !ok {
		t.Errorf("gateway clients after reload: %v", clients)
	}
	if _, ok := clients["two"]; ok {
		t.Errorf("removed upstream still among the gateway's clients")
	}
}

func TestRestartNeeded(t *testing.T) {
	base := func() *mapping.Config {
		c, err := mapping.Parse([]byte("listen: 127.0.0.1:9000\naccept: [agentapi]\nupstreams: [{name: a, url: 'http://127.0.0.1:1/process', protocol: agentapi}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := base()
	if err := restartNeeded(old, base()); err != nil {
		t.Fatalf("same config: %v", err)
	}
	c := base()
	c.Upstreams[0].URL = "http://127.0.0.1:2/process"
	c.Routes = []mapping.Route{{Upstream: "a"}}
	if err := restartNeeded(old, c); err != nil {
		t.Fatalf("upstreams and routes are live: %v", err)
	}
	c = base()
	c.Listen, c.Accept, c.Limits.MaxBodyBytes = "127.0.0.1:9001", []string{"aip"}, 1
	err := restartNeeded(old, c)
	if err == nil || !strings.Contains(err.Error(), "accept, limits, listen changed") {
		t.Fatalf("restart-only changes: %v", err)
	}
}

// TestValidateReportsEveryProblem: bridge validate lists all the problems
// of a file at once, not the first one.
func TestValidateReportsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte(`listen: nowhere
accept: [agentapi, telepathy]
upstreams:
  - {name: a, url: 'nope', protocol: smoke-signals, breaker: {failure_ratio: 2}}
  - {name: a, url: 'http://127.0.0.1:1/process', protocol: agentapi}
routes:
  - {upstream: ghost, path_prefix: weather}
`), 0o644)
	code, _, errOut := runCmd(t, "validate", "--config", path)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"listen:", "telepathy", "smoke-signals", "nope", "failure_ratio", `"a" is used twice`, "ghost", "weather"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("validate does not report %q:\n%s", want, errOut)
		}
	}
}
