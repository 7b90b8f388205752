package downstream

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/translate/aip"
)

// ACSSkill is one skill of the ACS document (ACS spec v01.00 §3).
type ACSSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     string   `json:"version,omitempty"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

type acsEndpoint struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

type acsCapabilities struct {
	Streaming    bool     `json:"streaming"`
	Notification bool     `json:"notification"`
	MessageQueue []string `json:"messageQueue"`
}

type acsDocument struct {
	AIC                string          `json:"aic,omitempty"`
	Active             bool            `json:"active"`
	LastModifiedTime   string          `json:"lastModifiedTime"`
	ProtocolVersion    string          `json:"protocolVersion"`
	Name               string          `json:"name"`
	Description        string          `json:"description"`
	Version            string          `json:"version"`
	EndPoints          []acsEndpoint   `json:"endPoints"`
	Capabilities       acsCapabilities `json:"capabilities"`
	DefaultInputModes  []string        `json:"defaultInputModes"`
	DefaultOutputModes []string        `json:"defaultOutputModes"`
	Skills             []ACSSkill      `json:"skills"`
}

// acsStarted stands for the document's lastModifiedTime: the configuration
// it describes is the process's.
var acsStarted = time.Now()

// serveACS answers GET /.well-known/acs.json with the ACS document of the
// fronted agent. Its endpoint is the rpc URL of this listener as the client
// reached it (scheme from TLS or X-Forwarded-Proto, the Host header, the
// route's path prefix and AIPOptions.Prefix); every AIP method is served
// there, and the stream and notification siblings beside it.
func (s *Server) serveACS(ctx *fasthttp.RequestCtx, route *Route) {
	o := &s.opts.AIP
	scheme := "http"
	if ctx.IsTLS() {
		scheme = "https"
	}
	if p := string(ctx.Request.Header.Peek("X-Forwarded-Proto")); p == "https" || p == "http" {
		scheme = p
	}
	base := scheme + "://" + string(ctx.Host())
	name, desc, version := o.Name, o.Description, o.Version
	if route != nil {
		if p := strings.TrimSuffix(route.PathPrefix, "/"); p != "" {
			base += p
		}
		if name == "" {
			name = route.Upstream
		}
		if name == "" {
			name = route.Name
		}
	}
	if name == "" {
		name = "agent-bridge"
	}
	if desc == "" {
		desc = "An agent fronted by the agent bridge as an ACPs AIP v01.00 Partner."
	}
	if version == "" {
		version = "1.0.0"
	}
	in, out := o.InputModes, o.OutputModes
	if len(in) == 0 {
		in = []string{"text/plain"}
	}
	if len(out) == 0 {
		out = []string{"text/plain"}
	}
	skills := o.Skills
	if skills == nil {
		skills = []ACSSkill{}
	}
	doc := acsDocument{
		AIC:              o.AIC,
		Active:           true,
		LastModifiedTime: acsStarted.In(aip.Beijing).Format(aip.TimeLayout),
		ProtocolVersion:  aip.Version,
		Name:             name,
		Description:      desc,
		Version:          version,
		EndPoints:        []acsEndpoint{{URL: base + o.prefix() + "/rpc", Transport: "JSONRPC"}},
		Capabilities: acsCapabilities{Streaming: true, Notification: !o.DisableNotifications,
			MessageQueue: []string{}},
		DefaultInputModes:  in,
		DefaultOutputModes: out,
		Skills:             skills,
	}
	b, err := json.Marshal(&doc)
	if err != nil {
		writeJSONError(ctx, fasthttp.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
