package agentprotocol

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

const hex = "0123456789abcdef"

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{translate.ErrBadRequest}, args...)...)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: agentprotocol: "+format, append([]any{translate.ErrMalformed}, args...)...)
}

// appendString appends s as a JSON string: raw UTF-8, no HTML escaping,
// control characters escaped (so an object never spans lines), invalid
// UTF-8 replaced by U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
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
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
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
	return appendString(appendKey(dst, k), v)
}

// appendCompact appends valid JSON text without whitespace between tokens.
func appendCompact[T ~string | ~[]byte](dst []byte, raw T) []byte {
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
	return appendCompact(dst, raw)
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
			dst = appendString(dst, k.Str)
			dst = append(dst, ':')
			dst = appendCompact(dst, v.Raw)
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
	x.b = appendString(x.b, k.Str)
	x.b = append(x.b, ':')
	x.b = appendCompact(x.b, v.Raw)
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

func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return string(b)
}

func appendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }
