package downstream

import (
	"bytes"
	"strings"

	"github.com/agentbridge/bridge/translate"
)

// Route sends matching requests to one upstream agent.
type Route struct {
	Name string
	// Host, when set, must equal the request's Host (without port).
	Host string
	// PathPrefix, when set, must prefix the path; it is stripped before
	// the protocol is detected, so "/weather/process" under prefix
	// "/weather" is an Agent API call.
	PathPrefix string
	// Upstream names the agent; Proto is its protocol; Agent calls it.
	Upstream string
	Proto    string
	Agent    translate.Agent
}

// Routing is an immutable routing table: the first matching route wins.
// It is swapped whole on reload.
type Routing struct {
	Routes []Route
}

// match returns the first route for host and path, and the path with the
// route's prefix stripped.
func (rt *Routing) match(host, path []byte) (*Route, []byte) {
	if rt == nil {
		return nil, path
	}
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && !bytes.Contains(host[i:], []byte("]")) {
		host = host[:i]
	}
	for i := range rt.Routes {
		r := &rt.Routes[i]
		if r.Host != "" && !strings.EqualFold(r.Host, string(host)) {
			continue
		}
		if r.PathPrefix == "" || r.PathPrefix == "/" {
			return r, path
		}
		p := strings.TrimSuffix(r.PathPrefix, "/")
		if !bytes.HasPrefix(path, []byte(p)) {
			continue
		}
		rest := path[len(p):]
		if len(rest) != 0 && rest[0] != '/' {
			continue
		}
		if len(rest) == 0 {
			rest = []byte("/")
		}
		return r, rest
	}
	return nil, path
}
