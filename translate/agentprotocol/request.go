package agentprotocol

import (
	"errors"
	"strings"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// RequestKind tells the 2025 request subtypes apart. The draft gives
// requests no type member, so the kind is read from the fields.
type RequestKind uint8

// The request kinds.
const (
	_ RequestKind = iota
	// KindChat: ChatRequest ("input"), or the agentic ProcessRequest
	// ("prompt").
	KindChat
	// KindResume: ResumeWithInput ("request_keys"), or the agentic
	// ResumeWithInputRequest ("continue_result").
	KindResume
	// KindCancel: CancelRequest, a body of ids only.
	KindCancel
	// KindConfigure: ConfigureRequest ("args").
	KindConfigure
)

var requestKindNames = [...]string{KindChat: "ChatRequest", KindResume: "ResumeWithInput", KindCancel: "CancelRequest", KindConfigure: "ConfigureRequest"}

func (k RequestKind) String() string {
	if int(k) < len(requestKindNames) && requestKindNames[k] != "" {
		return requestKindNames[k]
	}
	return "invalid"
}

// ParsedRequest is a 2025 request body of any dialect, read field by field.
type ParsedRequest struct {
	Kind RequestKind
	// Dialect is what the body's own members show: DialectAgentic for
	// prompt, continue_result or debug; DialectRun for thread_id;
	// DialectProcess for request_id; else DialectUnknown.
	Dialect Dialect
	// The ids as the body names them.
	RequestID, RunID, ThreadID string
	// Input is the chat text (input or prompt).
	Input string
	// Keys is the raw request_keys or continue_result object (KindResume);
	// Args the raw args object (KindConfigure).
	Keys, Args []byte
	// Ext holds every member not above (logging_level, request_metadata,
	// debug, unknown ones) as a JSON object tagged agentprotocol.
	Ext translate.Ext
}

// The members ParseRequest names; the rest go to Ext.
func namedRequestKey(k string) bool {
	switch k {
	case "input", "prompt", "request_keys", "continue_result", "args", "request_id", "run_id", "thread_id":
		return true
	}
	return false
}

// ParseRequest reads a request body (POST process, run, configure,
// stream_request, or agentic resume) and tells its kind from its fields:
// input or prompt → KindChat, request_keys or continue_result → KindResume,
// args → KindConfigure, ids and nothing else → KindCancel. Errors wrap
// translate.ErrBadRequest: not JSON, not an object, members of two kinds,
// a member of the wrong type, or no known kind at all.
func ParseRequest(body []byte) (*ParsedRequest, error) {
	if !gjson.ValidBytes(body) {
		return nil, badRequest("body is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, badRequest("body must be a JSON object")
	}
	p := &ParsedRequest{}
	var ext extBuilder
	var kinds []string
	var err error
	agentic := false
	root.ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.Null && namedRequestKey(k.Str) {
			return true // null is absent, as pydantic's Optional reads it
		}
		switch k.Str {
		case "input", "prompt":
			if v.Type != gjson.String {
				err = badRequest("%s: must be a string", k.Str)
				return false
			}
			if p.Kind == KindChat {
				err = badRequest("both input and prompt given")
				return false
			}
			p.Kind, p.Input = KindChat, v.Str
			kinds = append(kinds, k.Str)
			agentic = agentic || k.Str == "prompt"
		case "request_keys", "continue_result":
			if !v.IsObject() {
				err = badRequest("%s: must be an object", k.Str)
				return false
			}
			if p.Kind == KindResume {
				err = badRequest("both request_keys and continue_result given")
				return false
			}
			p.Kind, p.Keys = KindResume, jsonw.AppendCompact(nil, v.Raw)
			kinds = append(kinds, k.Str)
			agentic = agentic || k.Str == "continue_result"
		case "args":
			if !v.IsObject() {
				err = badRequest("args: must be an object")
				return false
			}
			p.Kind, p.Args = KindConfigure, jsonw.AppendCompact(nil, v.Raw)
			kinds = append(kinds, k.Str)
		case "request_id", "run_id", "thread_id":
			if v.Type != gjson.String && v.Type != gjson.Number {
				err = badRequest("%s: must be a string", k.Str)
				return false
			}
			switch k.Str {
			case "request_id":
				p.RequestID = idString(v)
			case "run_id":
				p.RunID = idString(v)
			default:
				p.ThreadID = idString(v)
			}
		default:
			if k.Str == "debug" {
				agentic = true
			}
			ext.add(k, v)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(kinds) > 1 {
		return nil, badRequest("ambiguous request: %s name different request types", strings.Join(kinds, " and "))
	}
	if p.Kind == 0 {
		if p.RequestID == "" && p.RunID == "" && p.ThreadID == "" {
			return nil, badRequest("no known request type: want input or prompt (ChatRequest), request_keys (ResumeWithInput), args (ConfigureRequest) or the id of the request to cancel (CancelRequest)")
		}
		p.Kind = KindCancel
	}
	p.Ext = ext.ext()
	switch {
	case agentic:
		p.Dialect = DialectAgentic
	case p.ThreadID != "":
		p.Dialect = DialectRun
	case p.RequestID != "":
		p.Dialect = DialectProcess
	}
	return p, nil
}

// turnSession returns the ids of the turn and of the session as dialect d
// names them, falling back to the other names when the preferred one is
// absent.
func (p *ParsedRequest) turnSession(d Dialect) (turn, session string) {
	switch d {
	case DialectRun:
		turn, session = p.RunID, p.ThreadID
		if turn == "" {
			turn = p.RequestID
		}
	case DialectAgentic:
		turn, session = p.RequestID, p.ThreadID
		if turn == "" && p.Kind == KindResume {
			turn = idString(gjson.GetBytes(p.Keys, "request_id"))
		}
		if session == "NEW" {
			session = ""
		}
	default:
		turn, session = p.RequestID, p.RunID
		if session == "" {
			session = p.ThreadID
		}
	}
	return turn, session
}

// Canonical turns p into a canonical request, reading its ids as dialect d
// names them (DialectUnknown: p.Dialect, else DialectProcess):
//
//   - KindChat → CommandStart; the chat text is one user message. A session
//     id (run_id, or thread_id) continues that session: it is a new turn,
//     hence a new exchange, in an old conversation.
//   - KindResume → CommandContinue of the turn the ids name, with one user
//     message: the text of a single-member request_keys, else the string
//     values joined by newlines plus a data part holding the whole object;
//     the raw object is also kept in the message's Ext so that an Agent
//     Protocol upstream gets it back unchanged.
//   - KindCancel → CommandCancel of the turn (or, with only a session id,
//     of that session's current turn: Request.ID empty).
//   - KindConfigure → an error wrapping translate.ErrUnsupported: the model
//     has no configure command. A server answers it itself (the README
//     answers RequestCompleted success).
//
// request_metadata.user_id becomes Request.User.
func (p *ParsedRequest) Canonical(d Dialect) (*translate.Request, error) {
	if d == DialectUnknown {
		d = p.Dialect
	}
	d = d.orDefault()
	req := &translate.Request{Ext: p.Ext}
	req.ID, req.Session = p.turnSession(d)
	if ext := p.Ext.Raw; ext != nil {
		if u := gjson.GetBytes(ext, "request_metadata.user_id"); u.Type == gjson.String {
			req.User = u.Str
		}
	}
	switch p.Kind {
	case KindChat:
		req.Command = translate.CommandStart
		req.Input = []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(p.Input)}}}
	case KindResume:
		req.Command = translate.CommandContinue
		req.Input = []translate.Message{resumeMessage(p.Keys)}
	case KindCancel:
		req.Command = translate.CommandCancel
	case KindConfigure:
		return nil, errors.Join(translate.ErrUnsupported, badRequest("ConfigureRequest has no canonical command"))
	default:
		return nil, badRequest("no known request type")
	}
	return req, nil
}

// resumeMessage is the user message of a ResumeWithInput.
func resumeMessage(keys []byte) translate.Message {
	m := translate.Message{Role: translate.RoleUser}
	m.Ext = translate.Ext{Proto: translate.ProtoAgentProtocol, Raw: append(append([]byte(`{"request_keys":`), keys...), '}')}
	obj := gjson.ParseBytes(keys)
	var texts []string
	n := 0
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "request_id" { // agentic's continue_result carries the paused request's id
			return true
		}
		n++
		if v.Type == gjson.String {
			texts = append(texts, v.Str)
		} else {
			texts = append(texts, v.Raw)
		}
		return true
	})
	if n == 1 {
		m.Parts = []translate.Part{translate.TextPart(texts[0])}
		return m
	}
	if len(texts) > 0 {
		m.Parts = append(m.Parts, translate.TextPart(strings.Join(texts, "\n")))
	}
	m.Parts = append(m.Parts, translate.Part{Kind: translate.PartData, Data: keys})
	return m
}

// DecodeRequest parses a request body and maps it with Canonical; d is the
// dialect the route implies (POST …/run is DialectRun, …/resume
// DialectAgentic), or DialectUnknown to go by the body.
func DecodeRequest(body []byte, d Dialect) (*translate.Request, error) {
	p, err := ParseRequest(body)
	if err != nil {
		return nil, err
	}
	return p.Canonical(d)
}

// requestKeysOf returns the request_keys object for a continuation: the
// one carried in the message's Ext, else a data part's object, else
// {"input": text}.
func requestKeysOf(m *translate.Message) []byte {
	if m == nil {
		return []byte(`{}`)
	}
	if raw := m.Ext.For(translate.ProtoAgentProtocol); raw != nil {
		if k := gjson.GetBytes(raw, "request_keys"); k.IsObject() {
			return jsonw.AppendCompact(nil, k.Raw)
		}
	}
	for i := range m.Parts {
		if p := &m.Parts[i]; p.Kind == translate.PartData && isObject(p.Data) {
			return jsonw.AppendCompact(nil, p.Data)
		}
	}
	return append(jsonw.AppendString(append([]byte(nil), `{"input":`...), m.Text()), '}')
}

// EncodeRequest writes the body a dialect d agent expects for req (client
// role), to POST to the path SubmitPath gives:
//
//   - CommandStart → ChatRequest {input, request_id, run_id} (DialectRun:
//     {input, run_id, thread_id}; DialectAgentic: {prompt, thread_id});
//   - CommandContinue → ResumeWithInput {request_keys, ids} (DialectAgentic:
//     {continue_result, thread_id} with continue_result.request_id set to
//     the turn id and every value a string);
//   - CommandCancel → CancelRequest {ids} (not DialectAgentic, which has no
//     cancel);
//   - others: an error wrapping translate.ErrUnsupported.
//
// Ids are written only when set. Members of req.Ext (tagged
// agentprotocol) that the encoder does not write itself are spliced back,
// except those that would change the request's kind.
func EncodeRequest(dst []byte, req *translate.Request, d Dialect) ([]byte, error) {
	d = d.orDefault()
	turnKey, sessKey := "request_id", "run_id"
	switch d {
	case DialectRun:
		turnKey, sessKey = "run_id", "thread_id"
	case DialectAgentic:
		turnKey, sessKey = "", "thread_id"
	}
	dst = append(dst, '{')
	switch req.Command {
	case translate.CommandStart:
		var text string
		if m := req.LastInput(); m != nil {
			text = m.Text()
		}
		if d == DialectAgentic {
			dst = appendStrField(dst, "prompt", text)
		} else {
			dst = appendStrField(dst, "input", text)
		}
	case translate.CommandContinue:
		keys := requestKeysOf(req.LastInput())
		if d == DialectAgentic {
			dst = appendKey(dst, "continue_result")
			dst = append(dst, '{')
			gjson.ParseBytes(keys).ForEach(func(k, v gjson.Result) bool {
				if k.Str == "request_id" {
					return true
				}
				val := v.Str
				if v.Type != gjson.String {
					val = v.Raw
				}
				dst = appendStrField(dst, k.Str, val)
				return true
			})
			if req.ID != "" {
				dst = appendStrField(dst, "request_id", req.ID)
			}
			dst = append(dst, '}')
		} else {
			dst = appendKey(dst, "request_keys")
			dst = append(dst, keys...)
		}
	case translate.CommandCancel:
		if d == DialectAgentic {
			return dst[:len(dst)-1], errors.Join(translate.ErrUnsupported, errors.New("agentprotocol: the agentic dialect has no cancel"))
		}
	default:
		return dst[:len(dst)-1], errors.Join(translate.ErrUnsupported, errors.New("agentprotocol: no request for command "+req.Command.String()))
	}
	if turnKey != "" && req.ID != "" {
		dst = appendStrField(dst, turnKey, req.ID)
	}
	if req.Session != "" {
		dst = appendStrField(dst, sessKey, req.Session)
	}
	dst = appendExt(dst, req.Ext.For(translate.ProtoAgentProtocol), namedRequestKey)
	return append(dst, '}'), nil
}

// SubmitResult is what a submit call answered: the ids of the turn and of
// the session, whatever the dialect calls them.
type SubmitResult struct {
	Dialect Dialect
	// Turn names the turn to read events of: request_id (DialectProcess,
	// DialectAgentic) or run_id (DialectRun).
	Turn string
	// Session is run_id (DialectProcess) or thread_id (DialectRun,
	// DialectAgentic).
	Session string
	// Event is the answer when it was an event (the README's wait=true
	// RequestStarted, or a RequestCompleted for configure); decode it with
	// an EventDecoder if it matters.
	Event []byte
}

// DecodeSubmitResponse reads the answer to POST process / run / resume. An
// empty body (the README's wait=false: only a status code) gives a zero
// result. Errors wrap translate.ErrMalformed.
func DecodeSubmitResponse(body []byte) (SubmitResult, error) {
	var r SubmitResult
	if len(strings.TrimSpace(string(body))) == 0 {
		return r, nil
	}
	if !gjson.ValidBytes(body) {
		return r, malformed("submit response is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return r, malformed("submit response is not an object")
	}
	if t := root.Get("type"); t.Exists() {
		r.Event = body
		r.Dialect = DetectDialect(body)
		switch r.Dialect {
		case DialectRun:
			r.Turn, r.Session = idString(root.Get("run_id")), idString(root.Get("thread_id"))
		default:
			r.Turn, r.Session = idString(root.Get("request_id")), idString(root.Get("run_id"))
		}
		return r, nil
	}
	r.Dialect = DialectAgentic
	r.Turn, r.Session = idString(root.Get("request_id")), idString(root.Get("thread_id"))
	if r.Turn == "" {
		return r, malformed("submit response has neither an event type nor a request_id")
	}
	return r, nil
}
