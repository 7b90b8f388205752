package loadagent

import (
	"bufio"
	"strconv"
	"time"
)

// text is the delta payload source: printable, no JSON escaping needed.
var text = func() []byte {
	b := make([]byte, 1<<16)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}()

// writeStream writes one whole reply: 2 response frames, the message,
// n content deltas of size bytes, the message and response completed.
// Errors are the client going away; the stream then just stops.
func writeStream(w *bufio.Writer, id uint64, n, size, flushEvery int) {
	size = min(size, len(text))
	var buf [512]byte
	seq := 0
	created := strconv.FormatInt(time.Now().Unix(), 10)
	respID := strconv.AppendUint([]byte("response_bench_"), id, 10)
	msgID := strconv.AppendUint([]byte("msg_bench_"), id, 10)

	frame := func(parts ...[]byte) bool {
		b := append(buf[:0], "data: {\"sequence_number\":"...)
		b = strconv.AppendInt(b, int64(seq), 10)
		seq++
		if _, err := w.Write(b); err != nil {
			return false
		}
		for _, p := range parts {
			if _, err := w.Write(p); err != nil {
				return false
			}
		}
		_, err := w.WriteString("}\n\n")
		return err == nil
	}
	response := func(status string, done bool) bool {
		completed := "null"
		if done {
			completed = strconv.FormatInt(time.Now().Unix(), 10)
		}
		return frame([]byte(`,"object":"response","status":"`+status+`","error":null,"id":"`), respID,
			[]byte(`","created_at":`+created+`,"completed_at":`+completed+`,"output":null,"usage":null,"session_id":null`))
	}
	message := func(status string) bool {
		return frame([]byte(`,"object":"message","status":"`+status+`","error":null,"id":"`), msgID,
			[]byte(`","type":"message","role":"assistant","content":null,"code":null,"message":null,"usage":null,"metadata":null`))
	}
	if !response("created", false) || !response("in_progress", false) || !message("in_progress") {
		return
	}
	if w.Flush() != nil {
		return
	}
	deltaHead := []byte(`,"object":"content","status":"in_progress","error":null,"type":"text","index":0,"delta":true,"msg_id":"`)
	textHead := []byte(`","text":"`)
	quote := []byte(`"`)
	for i := range n {
		off := (i * 7) % (len(text) - size + 1)
		if !frame(deltaHead, msgID, textHead, text[off:off+size], quote) {
			return
		}
		if (i+1)%flushEvery == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
	// No flush here: fasthttp flushes the last frames together with the
	// chunked body's terminator, so they leave in one segment.
	_ = message("completed") && response("completed", true)
}
