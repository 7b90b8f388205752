package upstream

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/agentbridge/bridge/translate/aip"
)

// AIPPathACS names the capability document in AIPOptions.Paths; the other
// keys are the JSON-RPC method names (aip.MethodRPC, aip.MethodStream,
// aip.MethodNotificationSet, …).
const AIPPathACS = "acs"

// aipEndpointNames are the endpoints an AIP upstream derives, in the order
// the derivation documents them.
var aipEndpointNames = []string{
	aip.MethodRPC,
	aip.MethodStream,
	aip.MethodNotificationSet,
	aip.MethodNotificationGet,
	aip.MethodNotificationDelete,
	aip.MethodNotificationStart,
	AIPPathACS,
}

// aipPaths derives the HTTP paths of an AIP Partner from its configured URL.
//
// The URL is either a base (http://host:port, or with a path prefix such as
// http://host/acps-aip-v1) or the partner's rpc URL, the form an ACS
// document's JSONRPC endpoint gives (a path whose last segment is "rpc").
// From the base the bridge calls {base}/rpc, {base}/stream,
// {base}/notification/{set,get,delete,start} and reads the capability
// document at {base}/.well-known/acs.json; from an rpc URL it replaces that
// last segment to find the siblings, which is the same thing.
//
// overrides replaces any of them by name (a method name or "acs"): the value
// is a path ("/x/stream") or an absolute URL, which must then name the same
// scheme and host as the upstream URL (one connection pool serves all
// calls). A relative value without a leading slash is taken under the base.
func aipPaths(u *url.URL, overrides map[string]string) (map[string]string, error) {
	p := strings.TrimRight(u.Path, "/")
	base := p
	if seg := p[strings.LastIndexByte(p, '/')+1:]; seg == aip.MethodRPC {
		base = p[:len(p)-len("/rpc")]
	}
	out := map[string]string{
		aip.MethodRPC:                base + "/rpc",
		aip.MethodStream:             base + "/stream",
		aip.MethodNotificationSet:    base + "/notification/set",
		aip.MethodNotificationGet:    base + "/notification/get",
		aip.MethodNotificationDelete: base + "/notification/delete",
		aip.MethodNotificationStart:  base + "/notification/start",
		AIPPathACS:                   base + "/.well-known/acs.json",
	}
	for name, v := range overrides {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("aip path override %q: unknown name (want one of %s)", name, strings.Join(aipEndpointNames, ", "))
		}
		o, err := url.Parse(v)
		if err != nil || v == "" {
			return nil, fmt.Errorf("aip path override %q: bad value %q", name, v)
		}
		switch {
		case o.IsAbs():
			if o.Scheme != u.Scheme || o.Host != u.Host {
				return nil, fmt.Errorf("aip path override %q: %q is not on %s://%s", name, v, u.Scheme, u.Host)
			}
			out[name] = o.Path
		case strings.HasPrefix(o.Path, "/"):
			out[name] = o.Path
		default:
			out[name] = base + "/" + o.Path
		}
		if out[name] == "" {
			out[name] = "/"
		}
	}
	return out, nil
}
