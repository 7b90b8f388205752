package agentapi

import (
	"strconv"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/tidwall/gjson"
)

// appendStringOrNull writes null for an empty string, as the Python server
// writes its unset optional fields.
func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return jsonw.AppendString(dst, s)
}

// appendRaw appends a JSON value compacted onto one line, or null when raw
// is empty or not valid JSON: values that came from another peer must not be
// able to break the frame.
func appendRaw(dst []byte, raw []byte) []byte {
	if len(raw) == 0 || !gjson.ValidBytes(raw) {
		return append(dst, "null"...)
	}
	return jsonw.AppendCompact(dst, raw)
}

// compactString returns a compact copy of the JSON text raw as bytes.
func compactString(raw string) []byte {
	if raw == "" {
		return nil
	}
	return jsonw.AppendCompact(make([]byte, 0, len(raw)), raw)
}

// keySet is a small set of object keys; a linear scan beats a map at the
// sizes used here.
type keySet []string

func (ks keySet) has(k string) bool {
	for _, s := range ks {
		if s == k {
			return true
		}
	}
	return false
}

// validObject returns raw when it is a valid JSON object, else nil, so that
// a carried-over Ext from elsewhere can never break a frame.
func validObject(raw []byte) []byte {
	if len(raw) < 2 || !gjson.ValidBytes(raw) || !gjson.ParseBytes(raw).IsObject() {
		return nil
	}
	return raw
}

// appendExt splices the members of the JSON object ext (checked by
// validObject) into an object being written (dst ends inside it, after at
// least one member), leaving out the keys in skip and skip2: the ones the
// writer emits itself, so that no key is ever written twice.
func appendExt(dst []byte, ext []byte, skip, skip2 keySet) []byte {
	if len(ext) == 0 {
		return dst
	}
	gjson.ParseBytes(ext).ForEach(func(k, v gjson.Result) bool {
		if skip.has(k.Str) || skip2.has(k.Str) {
			return true
		}
		dst = append(dst, ',')
		dst = jsonw.AppendString(dst, k.Str)
		dst = append(dst, ':')
		dst = jsonw.AppendCompact(dst, v.Raw)
		return true
	})
	return dst
}

// appendExtOrNull writes the value of key in ext (checked by validObject),
// or null when ext lacks it: the fields the Python server always writes but
// the model does not name (a message's metadata, usage, …).
func appendExtOrNull(dst []byte, ext []byte, key string) []byte {
	if len(ext) > 0 {
		if v := gjson.GetBytes(ext, key); v.Exists() {
			return jsonw.AppendCompact(dst, v.Raw)
		}
	}
	return append(dst, "null"...)
}

// extBuilder collects the members of a wire object that the model does not
// name, into a JSON object for Ext.Raw. It allocates only when there is one.
type extBuilder struct{ b []byte }

func (x *extBuilder) add(k, v gjson.Result) {
	if x.b == nil {
		x.b = make([]byte, 0, 64)
		x.b = append(x.b, '{')
	} else {
		x.b = append(x.b, ',')
	}
	x.b = jsonw.AppendString(x.b, k.Str)
	x.b = append(x.b, ':')
	x.b = jsonw.AppendCompact(x.b, v.Raw)
}

func (x *extBuilder) bytes() []byte {
	if x.b == nil {
		return nil
	}
	return append(x.b, '}')
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
