package agentprotocol

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{translate.ErrBadRequest}, args...)...)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: agentprotocol: "+format, append([]any{translate.ErrMalformed}, args...)...)
}

// appendKey appends ,"k": (or "k": right after an opening brace).
func appendKey(dst []byte, k string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' && dst[n-1] != '[' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"', ':')
}

func appendStrField(dst []byte, k, v string) []byte {
	return jsonw.AppendString(appendKey(dst, k), v)
}

// isObject reports whether raw is a valid JSON object.
func isObject[T ~string | ~[]byte](raw T) bool {
	b := []byte(raw)
	return len(b) >= 2 && gjson.ValidBytes(b) && gjson.ParseBytes(b).IsObject()
}

// appendObject appends raw compacted when it is a valid JSON object, else
// {}: values from another peer must not break a frame.
func appendObject[T ~string | ~[]byte](dst []byte, raw T) []byte {
	if !isObject(raw) {
		return append(dst, '{', '}')
	}
	return jsonw.AppendCompact(dst, raw)
}

// appendExt splices the members of the JSON object ext into the object
// being written, leaving out the keys in skip.
func appendExt(dst []byte, ext []byte, skip func(string) bool) []byte {
	if !isObject(ext) {
		return dst
	}
	gjson.ParseBytes(ext).ForEach(func(k, v gjson.Result) bool {
		if !skip(k.Str) {
			if n := len(dst); n > 0 && dst[n-1] != '{' {
				dst = append(dst, ',')
			}
			dst = jsonw.AppendString(dst, k.Str)
			dst = append(dst, ':')
			dst = jsonw.AppendCompact(dst, v.Raw)
		}
		return true
	})
	return dst
}

// extBuilder collects unknown members into a JSON object.
type extBuilder struct{ b []byte }

func (x *extBuilder) add(k, v gjson.Result) {
	if x.b == nil {
		x.b = append(make([]byte, 0, 64), '{')
	} else {
		x.b = append(x.b, ',')
	}
	x.b = jsonw.AppendString(x.b, k.Str)
	x.b = append(x.b, ':')
	x.b = jsonw.AppendCompact(x.b, v.Raw)
}

func (x *extBuilder) ext() translate.Ext {
	if x.b == nil {
		return translate.Ext{}
	}
	return translate.Ext{Proto: translate.ProtoAgentProtocol, Raw: append(x.b, '}')}
}

// idString reads an id member: a string, or a number written as its text
// (the PR #1 README types run_id as int). Other types read as "".
func idString(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return strings.ToValidUTF8(v.Str, "\ufffd")
	case gjson.Number:
		return v.Raw
	}
	return ""
}

func appendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }
