package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentbridge/bridge/translate"
)

// Config is the whole configuration of one bridge process.
type Config struct {
	// Listen is the address of the one downstream listener.
	Listen string `yaml:"listen"`
	// Admin is the address of the admin listener (metrics, health, the
	// admin API and page); empty means none.
	Admin string `yaml:"admin"`
	// Accept lists the protocols served there; empty means all.
	Accept []string `yaml:"accept"`
	// AgentAPIPath is the Agent API endpoint path (default /process).
	AgentAPIPath string `yaml:"agentapi_path"`
	// AIP configures the AIP Partner endpoints of the listener.
	AIP       AIPPartner `yaml:"aip"`
	Limits    Limits     `yaml:"limits"`
	Upstreams []Upstream `yaml:"upstreams"`
	Routes    []Route    `yaml:"routes"`
	// Plugins are hooks on every exchange (see package plugins).
	Plugins Plugins `yaml:"plugins"`
}

// Plugins enables the built-in hooks.
type Plugins struct {
	// Redact masks text matching these regular expressions, both ways.
	Redact struct {
		Patterns []string `yaml:"patterns"`
		Mask     string   `yaml:"mask"` // default "[redacted]"
	} `yaml:"redact"`
}

// AIPPartner describes the agent the bridge fronts to AIP Leaders.
type AIPPartner struct {
	// Prefix is put before /rpc, /stream and /notification/... (e.g.
	// /acps-aip-v1).
	Prefix      string `yaml:"prefix"`
	AIC         string `yaml:"aic"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Version     string `yaml:"version"`
	Skills      []struct {
		ID          string   `yaml:"id"`
		Name        string   `yaml:"name"`
		Description string   `yaml:"description"`
		Tags        []string `yaml:"tags"`
		Examples    []string `yaml:"examples"`
	} `yaml:"skills"`
	// Notifications turns notification/* on (default true).
	Notifications *bool `yaml:"notifications"`
	// CompleteDirectly completes a task when the agent finishes, instead
	// of waiting in awaiting-completion for the Leader's complete.
	CompleteDirectly bool          `yaml:"complete_directly"`
	ResponseTimeout  time.Duration `yaml:"response_timeout"`
	// AwaitingInputTimeout and AwaitingCompletionTimeout apply when a
	// start names none.
	AwaitingInputTimeout      time.Duration `yaml:"awaiting_input_timeout"`
	AwaitingCompletionTimeout time.Duration `yaml:"awaiting_completion_timeout"`
}

// Limits bound what one client or exchange can make the bridge hold.
type Limits struct {
	MaxBodyBytes         int           `yaml:"max_body_bytes"`
	KeepAlive            time.Duration `yaml:"keepalive"`
	MaxExchanges         int           `yaml:"max_exchanges"`
	ExchangeMaxAge       time.Duration `yaml:"exchange_max_age"`
	MaxEventsPerExchange int           `yaml:"max_events_per_exchange"`
	MaxEventBytes        int           `yaml:"max_event_bytes"`
}

// Upstream is one agent the bridge calls.
type Upstream struct {
	Name string `yaml:"name"`
	// URL is the agent's endpoint; for the Agent API the full /process URL.
	URL           string            `yaml:"url"`
	Protocol      string            `yaml:"protocol"`
	Timeouts      Timeouts          `yaml:"timeouts"`
	Breaker       Breaker           `yaml:"breaker"`
	MaxConcurrent int               `yaml:"max_concurrent"`
	Headers       map[string]string `yaml:"headers"`
	// AIP configures an AIP upstream (the bridge as AIP Leader).
	AIP AIPUpstream `yaml:"aip"`
	// AP configures an Agent Protocol upstream.
	AP APUpstream `yaml:"ap"`
}

// APUpstream is how the bridge calls an Agent Protocol agent.
type APUpstream struct {
	// Dialect: process (2025 README), run (2025 README, main branch),
	// agentic (the reference server), v1 (agentprotocol.ai tasks/steps),
	// or empty to detect it.
	Dialect string `yaml:"dialect"`
	// Agent names the agent under the base URL (default: the first listed).
	Agent string `yaml:"agent"`
}

// AIPUpstream is how the bridge drives an AIP Partner.
type AIPUpstream struct {
	// Mode: stream, rpc, or auto (default: stream when the partner's ACS
	// document advertises streaming).
	Mode string `yaml:"mode"`
	// AutoComplete sends complete when a task awaits completion and the
	// client's protocol has no such step (default true).
	AutoComplete *bool             `yaml:"auto_complete"`
	PollInterval time.Duration     `yaml:"poll_interval"`
	Paths        map[string]string `yaml:"paths"`
	LeaderID     string            `yaml:"leader_id"`
}

// Timeouts of one upstream; zero means the default.
type Timeouts struct {
	Connect   time.Duration `yaml:"connect"`
	FirstByte time.Duration `yaml:"first_byte"`
	Idle      time.Duration `yaml:"idle"`
	Total     time.Duration `yaml:"total"`
}

// Breaker configures an upstream's circuit breaker; zero means the default.
type Breaker struct {
	ConsecutiveFailures int           `yaml:"consecutive_failures"`
	FailureRatio        float64       `yaml:"failure_ratio"`
	MinRequests         int           `yaml:"min_requests"`
	Interval            time.Duration `yaml:"interval"`
	OpenFor             time.Duration `yaml:"open_for"`
	HalfOpenProbes      int           `yaml:"half_open_probes"`
}

// Route sends matching requests to an upstream. The first match wins.
type Route struct {
	Name       string `yaml:"name"`
	Host       string `yaml:"host"`
	PathPrefix string `yaml:"path_prefix"`
	Upstream   string `yaml:"upstream"`
}

// Load reads and validates the config file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML (unknown keys are errors, to catch typos) and
// validates the result.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// protocols lists the protocol names the bridge knows.
var protocols = []string{translate.ProtoAgentAPI, translate.ProtoAIP, translate.ProtoAgentProtocol}

// NormalizeProtocol returns the canonical name of a protocol name or alias
// ("ap" is the Agent Protocol), or an error naming the choices.
func NormalizeProtocol(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "ap" {
		n = translate.ProtoAgentProtocol
	}
	if slices.Contains(protocols, n) {
		return n, nil
	}
	return "", fmt.Errorf("unknown protocol %q (want one of %s, or ap)", name, strings.Join(protocols, ", "))
}

// Validate checks the whole config and reports every problem it finds. It
// normalizes protocol names in place.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Listen == "" {
		bad("listen: missing (e.g. 127.0.0.1:9000)")
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen: %v", err)
	}
	if c.Admin != "" {
		if _, port, err := net.SplitHostPort(c.Admin); err != nil {
			bad("admin: %v", err)
		} else if c.Admin == c.Listen && port != "0" {
			bad("admin: %q is the listen address; the admin listener needs its own", c.Admin)
		}
	}
	for i, p := range c.Accept {
		n, err := NormalizeProtocol(p)
		if err != nil {
			bad("accept[%d]: %v", i, err)
		}
		c.Accept[i] = n
	}
	if c.AIP.Prefix != "" && !strings.HasPrefix(c.AIP.Prefix, "/") {
		bad("aip.prefix: %q must start with /", c.AIP.Prefix)
	}
	if c.AgentAPIPath != "" && !strings.HasPrefix(c.AgentAPIPath, "/") {
		bad("agentapi_path: %q must start with /", c.AgentAPIPath)
	}
	if c.Limits.MaxBodyBytes < 0 || c.Limits.MaxExchanges < 0 || c.Limits.MaxEventsPerExchange < 0 || c.Limits.MaxEventBytes < 0 {
		bad("limits: sizes and counts must not be negative")
	}
	for i, p := range c.Plugins.Redact.Patterns {
		if _, err := regexp.Compile(p); err != nil {
			bad("plugins.redact.patterns[%d]: %v", i, err)
		}
	}
	names := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		where := fmt.Sprintf("upstreams[%d]", i)
		if u.Name == "" {
			bad("%s.name: missing", where)
		} else if names[u.Name] {
			bad("%s.name: %q is used twice", where, u.Name)
		}
		names[u.Name] = true
		n, err := NormalizeProtocol(u.Protocol)
		if err != nil {
			bad("%s.protocol: %v", where, err)
		}
		u.Protocol = n
		if pu, err := url.Parse(u.URL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad("%s.url: %q is not an http(s) URL", where, u.URL)
		}
		if u.Breaker.FailureRatio < 0 || u.Breaker.FailureRatio > 1 {
			bad("%s.breaker.failure_ratio: %v is not between 0 and 1", where, u.Breaker.FailureRatio)
		}
		switch u.AIP.Mode {
		case "", "auto", "stream", "rpc":
		default:
			bad("%s.aip.mode: %q is not stream, rpc or auto", where, u.AIP.Mode)
		}
		switch u.AP.Dialect {
		case "", "auto", "process", "run", "agentic", "v1":
		default:
			bad("%s.ap.dialect: %q is not process, run, agentic, v1 or empty", where, u.AP.Dialect)
		}
		if u.MaxConcurrent < 0 {
			bad("%s.max_concurrent: must not be negative", where)
		}
	}
	if len(c.Upstreams) == 0 {
		bad("upstreams: at least one is needed")
	}
	for i, r := range c.Routes {
		where := fmt.Sprintf("routes[%d]", i)
		if !names[r.Upstream] {
			bad("%s.upstream: %q names no upstream", where, r.Upstream)
		}
		if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
			bad("%s.path_prefix: %q must start with /", where, r.PathPrefix)
		}
	}
	return errors.Join(errs...)
}

// EffectiveRoutes returns the routes, or when none are given one catch-all
// route to the first upstream: the sidecar case.
func (c *Config) EffectiveRoutes() []Route {
	if len(c.Routes) > 0 || len(c.Upstreams) == 0 {
		return c.Routes
	}
	return []Route{{Name: "default", Upstream: c.Upstreams[0].Name}}
}

// Upstream returns the upstream named name, or nil.
func (c *Config) Upstream(name string) *Upstream {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}
