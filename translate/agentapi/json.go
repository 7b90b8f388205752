package agentapi

import (
	"crypto/rand"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Like Python's
// model_dump_json it writes non-ASCII as raw UTF-8 and does no HTML
// escaping; invalid UTF-8 becomes U+FFFD so the output is always valid JSON.
// Control characters are escaped, so the result never holds a raw newline
// and an SSE frame stays on one line.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendStringOrNull writes null for an empty string, as the Python server
// writes its unset optional fields.
func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, s)
}

// appendRaw appends a JSON value compacted onto one line, or null when raw
// is empty or not valid JSON: values that came from another peer must not be
// able to break the frame.
func appendRaw(dst []byte, raw []byte) []byte {
	if len(raw) == 0 || !gjson.ValidBytes(raw) {
		return append(dst, "null"...)
	}
	return appendCompact(dst, raw)
}

// appendCompact appends valid JSON text without the whitespace between
// tokens. Whitespace inside strings is always escaped in valid JSON, so
// dropping every raw blank outside strings is enough.
func appendCompact[T string | []byte](dst []byte, raw T) []byte {
	inStr, esc := false, false
	start := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case ' ', '\t', '\n', '\r':
			dst = append(dst, raw[start:i]...)
			start = i + 1
		}
	}
	return append(dst, raw[start:]...)
}

// compactString returns a compact copy of the JSON text raw as bytes.
func compactString(raw string) []byte {
	if raw == "" {
		return nil
	}
	return appendCompact(make([]byte, 0, len(raw)), raw)
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
		dst = appendJSONString(dst, k.Str)
		dst = append(dst, ':')
		dst = appendCompact(dst, v.Raw)
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
			return appendCompact(dst, v.Raw)
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
	x.b = appendJSONString(x.b, k.Str)
	x.b = append(x.b, ':')
	x.b = appendCompact(x.b, v.Raw)
}

func (x *extBuilder) bytes() []byte {
	if x.b == nil {
		return nil
	}
	return append(x.b, '}')
}

// newUUID returns a random version 4 UUID in its canonical text form.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails on supported platforms
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j] = hexDigits[c>>4]
		b[j+1] = hexDigits[c&0xf]
		j += 2
	}
	return string(b[:])
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
