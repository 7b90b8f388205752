package agentapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

const testNow = 1795301019

// newTestEncoder returns an Encoder whose clock and message ids are fixed.
func newTestEncoder(opts EncoderOptions) *Encoder {
	if opts.ResponseID == "" {
		opts.ResponseID = "response_test"
	}
	if opts.CreatedAt == 0 {
		opts.CreatedAt = testNow
	}
	e := NewEncoder(opts)
	e.now = func() int64 { return testNow }
	n := 0
	e.newID = func() string { n++; return fmt.Sprintf("msg_gen-%d", n) }
	return e
}

func newTestDecoder(r io.Reader) *Decoder {
	d := NewDecoder(r, DecoderOptions{})
	n := 0
	d.newID = func() string { n++; return fmt.Sprintf("msg_dec-%d", n) }
	return d
}

// decodeAll decodes a whole stream into cloned events.
func decodeAll(t testing.TB, stream string) ([]*translate.Event, error) {
	t.Helper()
	d := newTestDecoder(strings.NewReader(stream))
	var out []*translate.Event
	for i := 0; ; i++ {
		ev, err := d.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if i > 10000 {
			t.Fatal("decoder does not end")
		}
		out = append(out, ev.Clone())
	}
}

// encodeAll encodes events with e and finishes the stream.
func encodeAll(e *Encoder, evs []*translate.Event) []byte {
	var out []byte
	for _, ev := range evs {
		out = e.Encode(out, ev)
	}
	return e.Finish(out, nil)
}

// frames splits an encoder's output into the JSON of its frames, failing
// unless every frame is exactly "data: <one line>\n\n".
func frames(t testing.TB, b []byte) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			t.Fatalf("frame without blank line: %q", b)
		}
		f := b[:i]
		b = b[i+2:]
		if !bytes.HasPrefix(f, []byte("data: ")) {
			t.Fatalf("frame does not start with %q: %q", "data: ", f)
		}
		line := f[len("data: "):]
		if bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("frame spans lines: %q", f)
		}
		if !json.Valid(line) {
			t.Fatalf("frame is not valid JSON: %s", line)
		}
		r := gjson.ParseBytes(line)
		if !r.Get("object").Exists() {
			t.Fatalf("frame without object: %s", line)
		}
		out = append(out, r)
	}
	return out
}

// eventLines renders events one JSON object per line, with Time zeroed.
func eventLines(t testing.TB, evs []*translate.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		c := ev.Clone()
		c.Time = time.Time{}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// checkStreamShape asserts the invariants every encoded stream keeps.
func checkStreamShape(t testing.TB, out []byte) []gjson.Result {
	t.Helper()
	fs := frames(t, out)
	for i, f := range fs {
		if got := f.Get("sequence_number").Int(); got != int64(i) {
			t.Fatalf("frame %d has sequence_number %d", i, got)
		}
	}
	if len(fs) > 0 {
		if f := fs[0]; f.Get("object").Str != "response" || f.Get("status").Str != "created" {
			t.Fatalf("first frame is not response created: %s", f.Raw)
		}
	}
	seen := map[string]bool{}
	terminal := 0
	for _, f := range fs {
		switch f.Get("object").Str {
		case "message":
			seen[f.Get("id").Str] = true
		case "content":
			if id := f.Get("msg_id").Str; !seen[id] {
				t.Fatalf("content for unannounced message %q: %s", id, f.Raw)
			}
		case "response":
			switch f.Get("status").Str {
			case "completed", "failed", "canceled", "rejected", "incomplete":
				terminal++
			}
		}
	}
	if len(fs) > 0 && terminal != 1 {
		t.Fatalf("stream has %d terminal responses", terminal)
	}
	return fs
}

// lines reads b line by line, for readable diffs.
func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
