package agentprotocol

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// DiscoveryPath is the path of the agent list: "/" in the README
// dialects, "/_discovery" on the agentic server.
func (d Dialect) DiscoveryPath() string {
	if d == DialectAgentic {
		return "/_discovery"
	}
	return "/"
}

// DescribePath is the descriptor's path under agentPath ("/weather").
func (d Dialect) DescribePath(agentPath string) string { return joinPath(agentPath, "describe") }

// StreamPath is the one-shot stream_request path under agentPath.
func (d Dialect) StreamPath(agentPath string) string { return joinPath(agentPath, "stream_request") }

// SubmitPath is where a client POSTs the body EncodeRequest writes for
// command c: process (DialectProcess, and the agentic start), run
// (DialectRun), resume (the agentic continue). Commands the dialect cannot
// send give an error wrapping translate.ErrUnsupported.
func (d Dialect) SubmitPath(agentPath string, c translate.Command) (string, error) {
	d = d.orDefault()
	switch c {
	case translate.CommandStart, translate.CommandContinue, translate.CommandCancel:
	default:
		return "", errors.Join(translate.ErrUnsupported, errors.New("agentprotocol: no request for command "+c.String()))
	}
	switch d {
	case DialectRun:
		return joinPath(agentPath, "run"), nil
	case DialectAgentic:
		switch c {
		case translate.CommandContinue:
			return joinPath(agentPath, "resume"), nil
		case translate.CommandCancel:
			return "", errors.Join(translate.ErrUnsupported, errors.New("agentprotocol: the agentic dialect has no cancel"))
		}
	}
	return joinPath(agentPath, "process"), nil
}

// EventsPath is the path and query to GET the events of turn:
//
//	DialectProcess  {agent}/getevents/{turn}?stream=true&since=N
//	DialectRun      {agent}/get_events/{turn}?stream=true&since=N
//	DialectAgentic  {agent}/getevents?request_id={turn}&stream=true
//
// since is written only when > 0 (agentic has no since).
func (d Dialect) EventsPath(agentPath, turn string, stream bool, since uint64) string {
	d = d.orDefault()
	var b strings.Builder
	switch d {
	case DialectAgentic:
		b.WriteString(joinPath(agentPath, "getevents"))
		b.WriteString("?request_id=")
		b.WriteString(url.QueryEscape(turn))
		b.WriteString("&stream=")
		b.WriteString(strconv.FormatBool(stream))
		return b.String()
	case DialectRun:
		b.WriteString(joinPath(agentPath, "get_events/"))
	default:
		b.WriteString(joinPath(agentPath, "getevents/"))
	}
	b.WriteString(url.PathEscape(turn))
	b.WriteString("?stream=")
	b.WriteString(strconv.FormatBool(stream))
	if since > 0 {
		b.WriteString("&since=")
		b.WriteString(strconv.FormatUint(since, 10))
	}
	return b.String()
}

// Endpoints lists the endpoints a descriptor of dialect d advertises.
func (d Dialect) Endpoints() []string {
	switch d.orDefault() {
	case DialectRun:
		return []string{"/describe", "/run", "/get_events", "/configure", "/stream_request"}
	case DialectAgentic:
		return []string{"/process", "/getevents", "/describe"}
	}
	return []string{"/describe", "/process", "/getevents", "/stream_request"}
}

func joinPath(agentPath, rel string) string {
	return strings.TrimRight(agentPath, "/") + "/" + rel
}

// AgentPath returns the path the agentic server gives an agent named name:
// every character but ASCII letters and digits replaced by "_", lowercased,
// after a "/" ("Weather Agent" → "/weather_agent").
func AgentPath(name string) string {
	b := make([]byte, 0, len(name)+1)
	b = append(b, '/')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	return string(b)
}

// NewDescriptor builds the describe document of an agent: no operations
// means the default chat operation; endpoints are those of dialect d;
// tools is written as [] when nil.
func NewDescriptor(name, purpose string, ops []AgentOperation, tools []string, d Dialect) *AgentDescriptor {
	if len(ops) == 0 {
		ops = []AgentOperation{ChatOperation}
	}
	if tools == nil {
		tools = []string{}
	}
	return &AgentDescriptor{Name: name, Purpose: purpose, Endpoints: d.Endpoints(), Operations: ops, Tools: tools}
}

// AppendDescriptor writes desc as JSON for dialect d: the agentic server
// writes operations as a list of names.
func AppendDescriptor(dst []byte, desc *AgentDescriptor, d Dialect) ([]byte, error) {
	c := *desc
	if c.Endpoints == nil {
		c.Endpoints = []string{}
	}
	if c.Tools == nil {
		c.Tools = []string{}
	}
	var b []byte
	var err error
	if d == DialectAgentic {
		names := make([]string, len(c.Operations))
		for i, o := range c.Operations {
			names[i] = o.Name
		}
		type agenticDescriptor struct {
			Name       string            `json:"name"`
			Purpose    string            `json:"purpose"`
			Tools      []string          `json:"tools"`
			Endpoints  []string          `json:"endpoints"`
			Operations []string          `json:"operations"`
			Prompts    map[string]string `json:"prompts"`
		}
		p := c.Prompts
		if p == nil {
			p = map[string]string{}
		}
		b, err = json.Marshal(agenticDescriptor{c.Name, c.Purpose, c.Tools, c.Endpoints, names, p})
	} else {
		if c.Operations == nil {
			c.Operations = []AgentOperation{}
		}
		b, err = json.Marshal(&c)
	}
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// DecodeDescriptor reads a describe answer of any dialect. Errors wrap
// translate.ErrMalformed.
func DecodeDescriptor(body []byte) (*AgentDescriptor, error) {
	if !isObject(body) {
		return nil, malformed("descriptor is not a JSON object")
	}
	var desc AgentDescriptor
	if err := json.Unmarshal(body, &desc); err != nil {
		return nil, malformed("descriptor: %v", err)
	}
	return &desc, nil
}

// AppendAgentList writes the agent list: [[name, path], …] (the README's
// "list[name, path] pairs") or, for DialectAgentic, ["/path", …].
func AppendAgentList(dst []byte, agents []AgentRef, d Dialect) []byte {
	dst = append(dst, '[')
	for i, a := range agents {
		if i > 0 {
			dst = append(dst, ',')
		}
		if d == DialectAgentic {
			dst = jsonw.AppendString(dst, a.Path)
			continue
		}
		dst = append(dst, '[')
		dst = jsonw.AppendString(dst, a.Name)
		dst = append(dst, ',')
		dst = jsonw.AppendString(dst, a.Path)
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// DecodeAgentList reads an agent list of any shape: [[name, path]],
// [{name, path}] or the agentic ["/path"] (the name is then the path
// without its slash). Errors wrap translate.ErrMalformed.
func DecodeAgentList(body []byte) ([]AgentRef, error) {
	if !gjson.ValidBytes(body) {
		return nil, malformed("agent list is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsArray() {
		return nil, malformed("agent list is not a JSON array")
	}
	var out []AgentRef
	var err error
	root.ForEach(func(_, v gjson.Result) bool {
		switch {
		case v.Type == gjson.String:
			out = append(out, AgentRef{Name: strings.TrimPrefix(v.Str, "/"), Path: v.Str})
		case v.IsArray() && len(v.Array()) == 2:
			a := v.Array()
			out = append(out, AgentRef{Name: a[0].Str, Path: a[1].Str})
		case v.IsObject():
			out = append(out, AgentRef{Name: v.Get("name").Str, Path: v.Get("path").Str})
		default:
			err = malformed("agent list entry %s is not a name and path", v.Raw)
		}
		return err == nil
	})
	return out, err
}

// DetectDialect tells the dialect of a body an agent (or a client) sent:
// an event or a list of events, a submit answer, an agent list, a
// descriptor, a request body. It returns DialectUnknown when the body does
// not tell: the two README editions share the agent list, text_output and
// the other mid-turn events, and differ only in their start and end
// events, ids and endpoints.
func DetectDialect(body []byte) Dialect {
	if !gjson.ValidBytes(body) {
		return DialectUnknown
	}
	root := gjson.ParseBytes(body)
	if root.IsArray() {
		d := DialectUnknown
		root.ForEach(func(_, v gjson.Result) bool {
			switch {
			case v.Type == gjson.String:
				d = DialectAgentic // /_discovery's ["/path"]
			case v.IsObject():
				d = detectEvent(v)
			}
			return d == DialectUnknown
		})
		return d
	}
	if !root.IsObject() {
		return DialectUnknown
	}
	if root.Get("type").Exists() {
		return detectEvent(root)
	}
	if ops := root.Get("operations"); ops.IsArray() {
		if first := ops.Get("0"); first.Type == gjson.String || root.Get("prompts").Exists() {
			return DialectAgentic
		}
		for _, e := range root.Get("endpoints").Array() {
			switch strings.TrimPrefix(e.Str, "/") {
			case "run", "get_events", "configure":
				return DialectRun
			case "process", "getevents":
				return DialectProcess
			}
		}
		return DialectUnknown
	}
	if root.Get("request_id").Exists() && root.Get("thread_id").Exists() && !root.Get("run_id").Exists() &&
		!root.Get("input").Exists() && !root.Get("request_keys").Exists() {
		return DialectAgentic // StartRequestResponse
	}
	if p, err := ParseRequest(body); err == nil {
		return p.Dialect
	}
	return DialectUnknown
}
