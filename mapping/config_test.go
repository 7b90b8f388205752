package mapping

import (
	"strings"
	"testing"
	"time"
)

const full = `
listen: 127.0.0.1:9000
accept: [agentapi, AP]
agentapi_path: /api/agent/process
limits:
  max_body_bytes: 1024
  keepalive: 5s
upstreams:
  - name: weather
    url: http://127.0.0.1:8090/process
    protocol: agentapi
    timeouts: {connect: 1s, first_byte: 2s, idle: 3s, total: 4s}
    breaker: {consecutive_failures: 3, failure_ratio: 0.5, min_requests: 10, open_for: 7s}
    headers: {Authorization: "Bearer secret"}
routes:
  - name: weather
    path_prefix: /weather
    upstream: weather
`

func TestParseFullConfig(t *testing.T) {
	c, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if c.Accept[1] != "agentprotocol" {
		t.Errorf("accept alias not normalized: %v", c.Accept)
	}
	u := c.Upstream("weather")
	if u == nil || u.Timeouts.Idle != 3*time.Second || u.Breaker.OpenFor != 7*time.Second || u.Breaker.FailureRatio != 0.5 {
		t.Fatalf("upstream %+v", u)
	}
	if c.Limits.KeepAlive != 5*time.Second || c.Limits.MaxBodyBytes != 1024 {
		t.Errorf("limits %+v", c.Limits)
	}
	if r := c.EffectiveRoutes(); len(r) != 1 || r[0].PathPrefix != "/weather" {
		t.Errorf("routes %+v", r)
	}
}

func TestDefaultRouteIsTheFirstUpstream(t *testing.T) {
	c, err := Parse([]byte("listen: :9000\nupstreams: [{name: a, url: 'http://h/process', protocol: agentapi}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.EffectiveRoutes(); len(r) != 1 || r[0].Upstream != "a" {
		t.Fatalf("routes %+v", r)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	bad := `
listen: nope
accept: [smtp]
upstreams:
  - {name: a, url: 'ftp://h/x', protocol: carrier-pigeon, breaker: {failure_ratio: 2}}
  - {name: a, url: 'http://h/process', protocol: agentapi}
routes:
  - {upstream: missing, path_prefix: weather}
`
	_, err := Parse([]byte(bad))
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"listen", "accept[0]", "upstreams[0].url", "upstreams[0].protocol",
		"failure_ratio", "used twice", "routes[0].upstream", "routes[0].path_prefix"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	_, err := Parse([]byte("listen: :9000\nupstream: []\n"))
	if err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Fatalf("typo accepted: %v", err)
	}
}

func TestNormalizeProtocol(t *testing.T) {
	for in, want := range map[string]string{"agentapi": "agentapi", "AIP": "aip", "ap": "agentprotocol", " agentprotocol ": "agentprotocol"} {
		if got, err := NormalizeProtocol(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := NormalizeProtocol("a2a"); err == nil {
		t.Error("a2a accepted")
	}
}

func TestPluginPatternsAreValidated(t *testing.T) {
	_, err := Parse([]byte("listen: :9000\nupstreams: [{name: a, url: 'http://h/process', protocol: agentapi}]\nplugins: {redact: {patterns: ['(']}}\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.redact.patterns[0]") {
		t.Fatalf("bad pattern: %v", err)
	}
}
