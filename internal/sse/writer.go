package sse

import (
	"bytes"
	"strconv"
)

// AppendData appends one event with the given payload to dst: an optional
// "id:" line when id > 0, then "data: <payload>\n\n". A payload holding
// newlines is split over several data lines, as the SSE grammar requires.
func AppendData(dst []byte, id uint64, payload []byte) []byte {
	if id > 0 {
		dst = append(dst, "id: "...)
		dst = strconv.AppendUint(dst, id, 10)
		dst = append(dst, '\n')
	}
	for {
		i := bytes.IndexByte(payload, '\n')
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, bytes.TrimSuffix(payload[:i], []byte{'\r'})...)
		dst = append(dst, '\n')
		payload = payload[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, payload...)
	return append(dst, '\n', '\n')
}

// AppendNamed is AppendData with an "event:" line naming the event type.
func AppendNamed(dst []byte, id uint64, event string, payload []byte) []byte {
	if event != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, event...)
		dst = append(dst, '\n')
	}
	return AppendData(dst, id, payload)
}

// KeepAlive is the comment line sent to keep an idle stream open.
var KeepAlive = []byte(": keep-alive\n\n")
