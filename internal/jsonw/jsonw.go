package jsonw

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal. Non-ASCII is written as
// raw UTF-8 (as the Python peers write it) with no HTML escaping; quotes,
// backslashes and control characters are escaped, so the literal never
// spans lines and an SSE frame stays one line; U+2028 and U+2029 are
// escaped as encoding/json does, for JavaScript clients; invalid UTF-8
// becomes U+FFFD, so the output is always valid JSON.
func AppendString(dst []byte, s string) []byte {
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
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendCompact appends the valid JSON text raw without the whitespace
// between its tokens. Whitespace inside strings is always escaped in valid
// JSON, so dropping every raw blank outside strings is enough. Callers
// validate raw first (gjson.Valid) when it comes from a peer.
func AppendCompact[T ~string | ~[]byte](dst []byte, raw T) []byte {
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
