package agentapi

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

// requestKeys are the AgentRequest members the model names; every other
// top-level key is carried in Request.Ext and forwarded.
var requestKeys = keySet{"input", "session_id", "user_id", "id", "stream"}

// inputMessageKeys are the members of an input message the model names; the
// rest (object, status, metadata, …) ride along in Message.Ext.
var inputMessageKeys = keySet{"id", "role", "type", "content"}

var roles = keySet{"assistant", "user", "system", "tool"}

// badRequest returns an error wrapping translate.ErrBadRequest.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{translate.ErrBadRequest}, args...)...)
}

// DecodeRequest parses the body of POST /process (an AgentRequest) into a
// start command. It validates what the Python server validates before it
// runs the agent (input present, roles, content types) and reports the first
// problem, naming the field, as an error wrapping translate.ErrBadRequest.
func DecodeRequest(body []byte) (*translate.Request, error) {
	if !gjson.ValidBytes(body) {
		return nil, badRequest("body is not valid JSON")
	}
	if !utf8.Valid(body) {
		// JSON is UTF-8 (RFC 8259); the Python server fails to decode
		// such a body too. Accepting it would forward ids that no longer
		// match once re-encoded.
		return nil, badRequest("body is not valid UTF-8")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, badRequest("body must be a JSON object")
	}
	req := &translate.Request{Command: translate.CommandStart, Stream: true}
	var ext extBuilder
	var input gjson.Result
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "input":
			input = v
		case "session_id":
			req.Session, err = optString("session_id", v)
		case "user_id":
			req.User, err = optString("user_id", v)
		case "id":
			req.ID, err = optString("id", v)
		case "stream":
			// The server ignores stream; accept what pydantic's lax bool does.
			if v.Type != gjson.Null {
				req.Stream = v.Bool()
			}
		default:
			ext.add(k, v)
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case !input.Exists() || input.Type == gjson.Null:
		return nil, badRequest("input: field required")
	case !input.IsArray():
		return nil, badRequest("input: must be a list of messages")
	}
	items := input.Array()
	if len(items) == 0 {
		return nil, badRequest("input: must not be empty")
	}
	req.Input = make([]translate.Message, len(items))
	for i, item := range items {
		if err := decodeInputMessage(i, item, &req.Input[i]); err != nil {
			return nil, err
		}
	}
	if raw := ext.bytes(); raw != nil {
		req.Ext = translate.Ext{Proto: translate.ProtoAgentAPI, Raw: raw}
	}
	return req, nil
}

func optString(field string, v gjson.Result) (string, error) {
	switch v.Type {
	case gjson.Null:
		return "", nil
	case gjson.String:
		return v.Str, nil
	}
	return "", badRequest("%s: must be a string, not %s", field, v.Raw)
}

func decodeInputMessage(i int, v gjson.Result, m *translate.Message) error {
	if !v.IsObject() {
		return badRequest("input.%d: must be an object", i)
	}
	m.Type = "message"
	var ext extBuilder
	var contentV gjson.Result
	var err error
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "id":
			m.ID, err = optString("input."+strconv.Itoa(i)+".id", f)
		case "type":
			var t string
			t, err = optString("input."+strconv.Itoa(i)+".type", f)
			if t != "" {
				m.Type = t
			}
		case "role":
			if f.Type == gjson.Null {
				break
			}
			if f.Type != gjson.String || !roles.has(f.Str) {
				err = badRequest("input.%d.role: %s is not one of assistant, user, system, tool", i, f.Raw)
				break
			}
			m.Role = translate.Role(f.Str)
		case "content":
			contentV = f
		default:
			ext.add(k, f)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if contentV.Exists() && contentV.Type != gjson.Null {
		if !contentV.IsArray() {
			return badRequest("input.%d.content: must be a list", i)
		}
		items := contentV.Array()
		if len(items) > 0 {
			m.Parts = make([]translate.Part, 0, len(items))
		}
		for j, item := range items {
			if !item.IsObject() {
				return badRequest("input.%d.content.%d: must be an object", i, j)
			}
			var c content
			readContent(item, &c, false)
			p, ok := c.part()
			if !ok {
				if c.typ == "" {
					return badRequest("input.%d.content.%d.type: missing; want one of %s", i, j, contentTypeList)
				}
				return badRequest("input.%d.content.%d.type: %q is not one of %s", i, j, c.typ, contentTypeList)
			}
			m.Parts = append(m.Parts, p)
		}
	}
	if raw := ext.bytes(); raw != nil {
		m.Ext = translate.Ext{Proto: translate.ProtoAgentAPI, Raw: raw}
	}
	return nil
}

// EncodeRequest appends the AgentRequest JSON body for req to dst: input,
// session_id and user_id when set, stream true (the server streams anyway),
// id when set, then the members carried in an Agent API Ext. Input messages
// carry only what is set, like the Python client's exclude_none dump.
func EncodeRequest(dst []byte, req *translate.Request) []byte {
	dst = append(dst, `{"input":[`...)
	for i := range req.Input {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInputMessage(dst, &req.Input[i])
	}
	dst = append(dst, ']')
	if req.Session != "" {
		dst = append(dst, `,"session_id":`...)
		dst = jsonw.AppendString(dst, req.Session)
	}
	if req.User != "" {
		dst = append(dst, `,"user_id":`...)
		dst = jsonw.AppendString(dst, req.User)
	}
	dst = append(dst, `,"stream":true`...)
	if req.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = jsonw.AppendString(dst, req.ID)
	}
	dst = appendExt(dst, validObject(req.Ext.For(translate.ProtoAgentAPI)), requestKeys, nil)
	return append(dst, '}')
}

func appendInputMessage(dst []byte, m *translate.Message) []byte {
	dst = append(dst, '{')
	if m.ID != "" {
		dst = append(dst, `"id":`...)
		dst = jsonw.AppendString(dst, m.ID)
		dst = append(dst, ',')
	}
	if m.Role != "" {
		dst = append(dst, `"role":`...)
		dst = jsonw.AppendString(dst, string(m.Role))
		dst = append(dst, ',')
	}
	typ := m.Type
	if typ == "" {
		typ = "message"
	}
	dst = append(dst, `"type":`...)
	dst = jsonw.AppendString(dst, typ)
	dst = append(dst, `,"content":[`...)
	for i := range m.Parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRequestContent(dst, &m.Parts[i])
	}
	dst = append(dst, ']')
	dst = appendExt(dst, validObject(m.Ext.For(translate.ProtoAgentAPI)), inputMessageKeys, nil)
	return append(dst, '}')
}

// AppendHTTPError appends the JSON body the bridge answers a request it
// refuses before any stream starts with (HTTP 400, 413, …):
// {"error":{"code":"...","message":"..."}}.
func AppendHTTPError(dst []byte, code, message string) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = jsonw.AppendString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = jsonw.AppendString(dst, message)
	return append(dst, '}', '}')
}
