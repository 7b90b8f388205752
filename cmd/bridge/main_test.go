package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut syncBuffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsageAndUnknownCommand(t *testing.T) {
	if code, out, _ := runCmd(t, "--help"); code != 0 || !strings.Contains(out, "bridge demo") {
		t.Fatalf("--help: %d %q", code, out)
	}
	if code, _, errOut := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	for _, cmd := range []string{"serve", "agent", "demo", "call", "validate"} {
		code, _, errOut := runCmd(t, cmd, "--help")
		if code != 0 || !strings.Contains(errOut, "Usage: bridge "+cmd) || !strings.Contains(errOut, "--") {
			t.Errorf("%s --help: %d %q", cmd, code, errOut)
		}
	}
	if code, _, errOut := runCmd(t, "serve"); code != 2 || !strings.Contains(errOut, "--upstream") {
		t.Fatalf("serve without upstream: %d %q", code, errOut)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("listen: 127.0.0.1:9000\nupstreams: [{name: a, url: 'http://127.0.0.1:8090/process', protocol: agentapi}]\n"), 0o644)
	if code, out, errOut := runCmd(t, "validate", "--config", good); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("good config: %d %q %q", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:9000\nupstreams: [{name: a, url: 'nope', protocol: smoke-signals}]\n"), 0o644)
	if code, _, errOut := runCmd(t, "validate", "--config", bad); code != 1 || !strings.Contains(errOut, "smoke-signals") {
		t.Fatalf("bad config: %d %q", code, errOut)
	}
}

// TestDemoAndCall runs what README tells a newcomer: bridge demo, then
// bridge call against the URL it printed.
func TestDemoAndCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0", "--aip-agent-listen", "127.0.0.1:0", "--ap-agent-listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, &out, &errOut)
	}()
	re := regexp.MustCompile(`call --protocol agentapi --url (http://[0-9.:]+) `)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no call line:\n%s\n%s", out.String(), errOut.String())
		}
	}
	if !strings.Contains(out.String(), "curl -N "+base+"/process") {
		t.Fatalf("demo printed no curl line for %s:\n%s", base, out.String())
	}
	code, got, e := runCmd(t, "call", "--protocol", "agentapi", "--url", base, "hello [tool]")
	if code != 0 || !strings.Contains(got, "echo: hello [tool]") || !strings.Contains(got, "[tool call] get_weather") {
		t.Fatalf("call: %d\n%s\n%s", code, got, e)
	}
	// AIP Leader → bridge → Agent API agent, and → AIP agent.
	for _, url := range []string{base, base + "/to-aip"} {
		code, got, e = runCmd(t, "call", "--protocol", "aip", "--url", url, "hi [file]")
		if code != 0 || !strings.Contains(got, "echo: hi [file]") || !strings.Contains(got, "report.txt") {
			t.Fatalf("call --protocol aip --url %s: %d\n%s\n%s", url, code, got, e)
		}
	}
	// Agent Protocol client → bridge → the first agent GET / lists, whose
	// path is a route prefix: {prefix}/process is told from the Agent API's
	// by its body.
	code, got, e = runCmd(t, "call", "--protocol", "ap", "--url", base, "hello [tool]")
	if code != 0 || !strings.Contains(got, "echo: hello [tool]") || !strings.Contains(got, "[tool call] get_weather") {
		t.Fatalf("call --protocol ap: %d\n%s\n%s", code, got, e)
	}
	// Agent API client → bridge → AIP agent.
	code, got, e = runCmd(t, "call", "--url", base+"/to-aip/process", "hello")
	if code != 0 || !strings.Contains(got, "echo: hello") {
		t.Fatalf("agentapi to aip: %d\n%s\n%s", code, got, e)
	}
	code, _, e = runCmd(t, "call", "--url", base, "x [fail]")
	if code != 1 || !strings.Contains(e, "AGENT_FAILED") {
		t.Fatalf("call [fail]: %d %q", code, e)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo exited %d: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("demo did not stop")
	}
}

// TestREADMEConfigIsValid keeps the README's config example true.
func TestREADMEConfigIsValid(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no yaml block")
	}
	path := filepath.Join(t.TempDir(), "readme.yaml")
	if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, e := runCmd(t, "validate", "--config", path); code != 0 {
		t.Fatalf("README's config: %d %s %s", code, out, e)
	}
}
