package aip

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/tidwall/gjson"
)

// JSON-RPC method names of AIP v01.00. Partners in the wild mount one HTTP
// path per method; the method in the body is what this package dispatches on.
const (
	MethodRPC                = "rpc"
	MethodStream             = "stream"
	MethodNotificationSet    = "notification/set"
	MethodNotificationGet    = "notification/get"
	MethodNotificationDelete = "notification/delete"
	MethodNotificationStart  = "notification/start"
	MethodGroup              = "group"
)

// Error codes: JSON-RPC 2.0's and AIP's own (spec §5.2).
const (
	CodeParseError                         = -32700
	CodeInvalidRequest                     = -32600
	CodeMethodNotFound                     = -32601
	CodeInvalidParams                      = -32602
	CodeInternalError                      = -32603
	CodeTaskNotFound                       = -32001
	CodeTaskNotCancelable                  = -32002
	CodeNotificationNotSupported           = -32003
	CodeUnsupportedOperation               = -32004
	CodeContentTypeNotSupported            = -32005
	CodeInvalidAgentResponse               = -32006
	CodeGroupNotSupported                  = -32007
	CodeAuthenticationRequired             = -32008
	CodeAuthorizationFailed                = -32009
	CodeAccessTokenInvalid                 = -32010
	codeServerErrorMin, codeServerErrorMax = -32099, -32000
)

// ErrorMessage returns the spec's message for code ("Task not found"), or
// "Server error" for another code in the server range and "Unknown error"
// otherwise.
func ErrorMessage(code int) string {
	switch code {
	case CodeParseError:
		return "Invalid JSON payload"
	case CodeInvalidRequest:
		return "Invalid JSON-RPC Request"
	case CodeMethodNotFound:
		return "Method not found"
	case CodeInvalidParams:
		return "Invalid method parameters"
	case CodeInternalError:
		return "Internal server error"
	case CodeTaskNotFound:
		return "Task not found"
	case CodeTaskNotCancelable:
		return "Task cannot be canceled"
	case CodeNotificationNotSupported:
		return "Notification is not supported"
	case CodeUnsupportedOperation:
		return "This operation is not supported"
	case CodeContentTypeNotSupported:
		return "Incompatible content types"
	case CodeInvalidAgentResponse:
		return "Invalid agent response type"
	case CodeGroupNotSupported:
		return "Group communication is not supported"
	case CodeAuthenticationRequired:
		return "Authentication required"
	case CodeAuthorizationFailed:
		return "Authorization failed"
	case CodeAccessTokenInvalid:
		return "Invalid access token"
	}
	if code >= codeServerErrorMin && code <= codeServerErrorMax {
		return "Server error"
	}
	return "Unknown error"
}

// ErrorName returns the spec's name for code ("TaskNotFoundError"), or "".
func ErrorName(code int) string {
	switch code {
	case CodeParseError:
		return "ParseError"
	case CodeInvalidRequest:
		return "InvalidRequest"
	case CodeMethodNotFound:
		return "MethodNotFound"
	case CodeInvalidParams:
		return "InvalidParams"
	case CodeInternalError:
		return "InternalError"
	case CodeTaskNotFound:
		return "TaskNotFoundError"
	case CodeTaskNotCancelable:
		return "TaskNotCancelableError"
	case CodeNotificationNotSupported:
		return "NotificationNotSupportedError"
	case CodeUnsupportedOperation:
		return "UnsupportedOperationError"
	case CodeContentTypeNotSupported:
		return "ContentTypeNotSupportedError"
	case CodeInvalidAgentResponse:
		return "InvalidAgentResponseError"
	case CodeGroupNotSupported:
		return "GroupNotSupportedError"
	case CodeAuthenticationRequired:
		return "AuthenticationRequiredError"
	case CodeAuthorizationFailed:
		return "AuthorizationFailedError"
	case CodeAccessTokenInvalid:
		return "AccessTokenInvalidError"
	}
	return ""
}

// Error is a JSON-RPC error object. Data, when set, is raw JSON.
type Error struct {
	Code    int
	Message string
	Data    json.RawMessage
}

// NewError returns an Error with the spec's message for code and, when
// detail is not empty, Data {"details": detail}.
func NewError(code int, detail string) *Error {
	e := &Error{Code: code, Message: ErrorMessage(code)}
	if detail != "" {
		e.Data = jsonw.AppendString([]byte(`{"details":`), detail)
		e.Data = append(e.Data, '}')
	}
	return e
}

func errorf(code int, format string, args ...any) *Error {
	return NewError(code, fmt.Sprintf(format, args...))
}

func (e *Error) Error() string {
	s := "aip: " + strconv.Itoa(e.Code) + " " + e.Message
	if d := gjson.GetBytes(e.Data, "details"); d.Type == gjson.String {
		s += ": " + d.Str
	}
	return s
}

// AppendJSON appends the error object's JSON encoding.
func (e *Error) AppendJSON(dst []byte) []byte {
	w := newEnc(dst)
	w.key("code")
	w.b = strconv.AppendInt(w.b, int64(e.Code), 10)
	w.str("message", e.Message)
	w.rawOpt("data", e.Data)
	return w.done()
}

func (e *Error) decode(v gjson.Result) error {
	*e = Error{}
	return members(v, nil, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "code":
			var n int64
			n, err = wantInt(k, val)
			e.Code = int(n)
		case "message":
			e.Message, err = wantString(k, val)
		case "data":
			e.Data = rawValue(val)
		}
		return true, err
	})
}

// nullID is the id of a response to a request whose id could not be read.
var nullID = json.RawMessage("null")

// Request is a JSON-RPC 2.0 request. ID keeps the id's exact JSON text (a
// string, a number or null; nil when absent) so that a response echoes it
// byte for byte. Params stays raw; ParseRequest also decodes it into the
// field its method uses.
type Request struct {
	JSONRPC string
	Method  string
	ID      json.RawMessage
	Params  json.RawMessage
	Extra   json.RawMessage

	// Message is params.message of rpc, stream and notification/start.
	Message *Message
	// Notification is the params of notification/set.
	Notification *NotificationConfig
	// NotificationID is the params of notification/get and notification/delete.
	NotificationID *NotificationIDParams
}

// ResponseID returns the id a response to r carries: r.ID, or null.
func (r *Request) ResponseID() json.RawMessage {
	if r == nil || len(r.ID) == 0 {
		return nullID
	}
	return r.ID
}

// AppendJSON appends the request's JSON encoding. Params is written as is
// when set; otherwise it is built from Message ({"message": …}),
// Notification or NotificationID.
func (r *Request) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("jsonrpc", "2.0")
	e.str("method", r.Method)
	if len(r.ID) > 0 {
		e.raw("id", r.ID)
	} else {
		e.raw("id", nullID)
	}
	switch {
	case len(r.Params) > 0:
		e.raw("params", r.Params)
	case r.Message != nil:
		e.key("params")
		e.b = append(e.b, `{"message":`...)
		e.b = r.Message.AppendJSON(e.b)
		e.b = append(e.b, '}')
	case r.Notification != nil:
		e.key("params")
		e.b = r.Notification.AppendJSON(e.b)
	case r.NotificationID != nil:
		e.key("params")
		e.b = r.NotificationID.AppendJSON(e.b)
	}
	e.extra(r.Extra)
	return e.done()
}

// MarshalJSON implements json.Marshaler.
func (r *Request) MarshalJSON() ([]byte, error) { return marshalVia(r.AppendJSON) }

// Response is a JSON-RPC 2.0 response: Result (raw JSON) or Error.
type Response struct {
	JSONRPC string
	ID      json.RawMessage
	Result  json.RawMessage
	Error   *Error
	Extra   json.RawMessage
}

// AppendJSON appends the response's JSON encoding.
func (r *Response) AppendJSON(dst []byte) []byte {
	e := newEnc(dst)
	e.str("jsonrpc", "2.0")
	if len(r.ID) > 0 {
		e.raw("id", r.ID)
	} else {
		e.raw("id", nullID)
	}
	if r.Error != nil {
		e.key("error")
		e.b = r.Error.AppendJSON(e.b)
	} else {
		if len(r.Result) > 0 {
			e.raw("result", r.Result)
		} else {
			e.raw("result", nullID)
		}
	}
	e.extra(r.Extra)
	return e.done()
}

// MarshalJSON implements json.Marshaler.
func (r *Response) MarshalJSON() ([]byte, error) { return marshalVia(r.AppendJSON) }

// DecodeResponse decodes a JSON-RPC response envelope. A null "error" or
// "result" (FastAPI writes both) is absent.
func DecodeResponse(b []byte) (*Response, error) {
	v, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	r := new(Response)
	err = members(v, &r.Extra, func(k string, val gjson.Result) (bool, error) {
		var err error
		switch k {
		case "jsonrpc":
			r.JSONRPC, err = wantString(k, val)
		case "id":
			if val.Type != gjson.String && val.Type != gjson.Number {
				return true, decodeError("id: want a string or number")
			}
			r.ID = json.RawMessage(val.Raw)
		case "result":
			r.Result = rawValue(val)
		case "error":
			r.Error = new(Error)
			err = r.Error.decode(val)
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return nil, err
	}
	if r.Result == nil && r.Error == nil {
		return nil, decodeError("response has neither result nor error")
	}
	return r, nil
}

// AppendResultResponse appends {"jsonrpc":"2.0","id":id,"result":result};
// result is already-encoded JSON. A nil id is written as null.
func AppendResultResponse(dst []byte, id json.RawMessage, result []byte) []byte {
	r := Response{ID: id, Result: result}
	return r.AppendJSON(dst)
}

// AppendObjectResponse appends a response whose result is obj (a Task, a
// Message).
func AppendObjectResponse(dst []byte, id json.RawMessage, obj Object) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	dst = obj.AppendJSON(dst)
	return append(dst, '}')
}

// AppendErrorResponse appends {"jsonrpc":"2.0","id":id,"error":err}.
func AppendErrorResponse(dst []byte, id json.RawMessage, err *Error) []byte {
	r := Response{ID: id, Error: err}
	return r.AppendJSON(dst)
}

func appendID(dst []byte, id json.RawMessage) []byte {
	if len(id) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}

// AppendMessageRequest appends a request of method (rpc, stream,
// notification/start) whose params are {"message": m}: what a Leader sends.
func AppendMessageRequest(dst []byte, method string, id json.RawMessage, m *Message) []byte {
	r := Request{Method: method, ID: id, Message: m}
	return r.AppendJSON(dst)
}

// DetectVersion tells which AIP version a request body is: "01.00" when
// params.message is a "message", "02" when it carries a v02 "task-command"
// (params.command, or params.message of type "task-command"), "" when it
// cannot tell. It looks at nothing else, and is cheap.
func DetectVersion(body []byte) string {
	p := gjson.GetBytes(body, "params")
	if t := p.Get("message.type"); t.Exists() {
		switch t.Str {
		case TypeMessage:
			return Version
		case "task-command":
			return "02"
		}
		return ""
	}
	if p.Get("command").IsObject() {
		return "02"
	}
	if p.Get("message").IsObject() {
		return Version
	}
	return ""
}

// ParseRequest reads a JSON-RPC request body as a Partner receives it and
// checks it enough that a handler can trust it:
//
//   - not JSON: -32700 Parse error;
//   - JSON but not a JSON-RPC 2.0 request object (not an object, jsonrpc
//     not "2.0", method not a string, id neither string, number nor null):
//     -32600 Invalid Request;
//   - a method AIP v01.00 does not define: -32601 Method not found;
//   - params missing or wrong for the method: -32602 Invalid params. For
//     rpc, stream and notification/start that is: params.message missing or
//     not a v01.00 Message, no taskId, no or an unknown command, a command
//     the method does not take (stream takes start, continue and re-stream;
//     rpc takes every command but re-stream; notification/start only start
//     with a notificationConfigId), bad commandParams. For
//     notification/set: no taskId or a url that is not absolute http(s).
//     For notification/get and /delete: no taskId. A v02 body is -32602
//     with data {"version":"02"}.
//
// The returned Request is never nil: on error it holds what could be read,
// and ResponseID gives the id to echo (null when none could be read). On
// success the field of Request matching the method is set.
func ParseRequest(body []byte) (*Request, *Error) {
	req := new(Request)
	if !json.Valid(body) {
		return req, NewError(CodeParseError, "")
	}
	v := gjson.ParseBytes(body)
	if !v.IsObject() {
		return req, NewError(CodeInvalidRequest, "request is not a JSON object")
	}
	// Read the id first so that every later error can echo it.
	if id := v.Get("id"); id.Exists() {
		switch id.Type {
		case gjson.String, gjson.Number, gjson.Null:
			req.ID = json.RawMessage(id.Raw)
		default:
			return req, NewError(CodeInvalidRequest, "id must be a string, a number or null")
		}
	}
	var method, version gjson.Result
	err := members(v, &req.Extra, func(k string, val gjson.Result) (bool, error) {
		switch k {
		case "jsonrpc":
			version = val
		case "method":
			method = val
		case "id":
		case "params":
			req.Params = rawValue(val)
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return req, NewError(CodeInvalidRequest, err.Error())
	}
	if version.Type != gjson.String || version.Str != "2.0" {
		return req, NewError(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	req.JSONRPC = version.Str
	if method.Type != gjson.String {
		return req, NewError(CodeInvalidRequest, "method must be a string")
	}
	req.Method = method.Str
	switch req.Method {
	case MethodRPC, MethodStream, MethodNotificationStart:
		return req, req.parseMessageParams(body)
	case MethodNotificationSet:
		p := v.Get("params")
		if !p.IsObject() {
			return req, NewError(CodeInvalidParams, "params must be a NotificationConfig object")
		}
		c := new(NotificationConfig)
		if err := c.decode(p); err != nil {
			return req, NewError(CodeInvalidParams, err.Error())
		}
		if e := c.Validate(); e != nil {
			return req, e
		}
		req.Notification = c
	case MethodNotificationGet, MethodNotificationDelete:
		p := v.Get("params")
		if !p.IsObject() {
			return req, NewError(CodeInvalidParams, "params must be an object with taskId")
		}
		n := new(NotificationIDParams)
		if err := n.decode(p); err != nil {
			return req, NewError(CodeInvalidParams, err.Error())
		}
		if n.TaskID == "" {
			return req, NewError(CodeInvalidParams, "taskId is required")
		}
		req.NotificationID = n
	case MethodGroup:
		// Group mode is not implemented here; the params stay raw.
		if !v.Get("params").IsObject() {
			return req, NewError(CodeInvalidParams, "params must be an object")
		}
	default:
		return req, errorf(CodeMethodNotFound, "unknown method %q", req.Method)
	}
	return req, nil
}

func (req *Request) parseMessageParams(body []byte) *Error {
	p := gjson.GetBytes(body, "params")
	if !p.IsObject() {
		return NewError(CodeInvalidParams, "params must be an object with a message")
	}
	if DetectVersion(body) == "02" {
		e := NewError(CodeInvalidParams, "AIP v02 task-command is not supported; this endpoint speaks v01.00")
		e.Data = json.RawMessage(`{"version":"02","details":"AIP v02 task-command is not supported; this endpoint speaks v01.00"}`)
		return e
	}
	mv := p.Get("message")
	if !mv.IsObject() {
		return NewError(CodeInvalidParams, "params.message must be a Message object")
	}
	m := new(Message)
	if err := m.decode(mv); err != nil {
		return NewError(CodeInvalidParams, "params.message: "+err.Error())
	}
	if m.TaskID == "" {
		return NewError(CodeInvalidParams, "params.message.taskId is required")
	}
	if m.Command == "" {
		return NewError(CodeInvalidParams, "params.message.command is required")
	}
	if !m.Command.Valid() {
		return errorf(CodeInvalidParams, "unknown command %q", m.Command)
	}
	switch req.Method {
	case MethodStream:
		switch m.Command {
		case CommandStart, CommandContinue, CommandReStream:
		default:
			return errorf(CodeInvalidParams, "command %q is not taken by stream; send it with rpc", m.Command)
		}
	case MethodRPC:
		if m.Command == CommandReStream {
			return NewError(CodeInvalidParams, "re-stream is sent with the stream method")
		}
	case MethodNotificationStart:
		if m.Command != CommandStart {
			return errorf(CodeInvalidParams, "notification/start takes command start, not %q", m.Command)
		}
		np, err := m.NotificationStartParams()
		if err != nil {
			return NewError(CodeInvalidParams, "commandParams: "+err.Error())
		}
		if np.NotificationConfigID == "" {
			return NewError(CodeInvalidParams, "commandParams.notificationConfigId is required")
		}
	}
	var err error
	switch m.Command {
	case CommandStart:
		_, err = m.StartParams()
	case CommandGet:
		_, err = m.GetParams()
	case CommandReStream:
		_, err = m.ReStreamParams()
	}
	if err != nil {
		return NewError(CodeInvalidParams, "commandParams: "+err.Error())
	}
	req.Message = m
	return nil
}

// validNotifyURL reports whether s is an absolute http or https URL with a host.
func validNotifyURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return false
	}
	return u.Scheme == "http" || u.Scheme == "https"
}
