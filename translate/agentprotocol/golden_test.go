package agentprotocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// loadCanonical reads a canonical event sequence, one JSON event per line.
func loadCanonical(t testing.TB, path string) []*translate.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*translate.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev translate.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, &ev)
	}
	return evs
}

// eventLines renders canonical events one JSON object per line, Time zeroed.
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

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s", path, i+1, gl, wl)
		}
	}
	t.Fatalf("%s differs", path)
}

func testEncoderOpts(d Dialect) EncoderOptions {
	o := EncoderOptions{Dialect: d, Agent: "echo", Turn: "req-1", Session: "run-1", Prompt: "hello"}
	if d == DialectRun {
		o.Turn, o.Session = "run-1", "thread-1"
	}
	return o
}

// encodeCase encodes evs with event ids 1..n, in the lines form and the
// SSE form, and finishes the stream.
func encodeCase(evs []*translate.Event, d Dialect) (lines, sseOut []byte) {
	e1, e2 := NewEncoder(testEncoderOpts(d)), NewEncoder(testEncoderOpts(d))
	var id uint64
	for i, ev := range evs {
		id = uint64(i + 1)
		lines = e1.Encode(lines, ev, id)
		sseOut = e2.EncodeSSE(sseOut, ev, id)
	}
	lines = e1.Finish(lines, nil, id+1)
	sseOut = AppendSSE(sseOut, e2.Finish(nil, nil, id+1), id+1, d)
	return lines, sseOut
}

// TestGoldenEncode encodes each canonical sequence in every dialect and
// output form: .ndjson is one WebSocket frame per line, .json the
// getevents list, .sse the stream.
func TestGoldenEncode(t *testing.T) {
	files, _ := filepath.Glob("testdata/canonical/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no canonical sequences")
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		for _, d := range []Dialect{DialectProcess, DialectRun, DialectAgentic} {
			t.Run(name+"/"+d.String(), func(t *testing.T) {
				evs := loadCanonical(t, path)
				lines, sseOut := encodeCase(evs, d)
				checkLines(t, lines, d)
				base := filepath.Join("testdata/golden/encode", name+"."+d.String())
				compareGolden(t, base+".ndjson", lines)
				compareGolden(t, base+".sse", sseOut)
				if d == DialectProcess {
					compareGolden(t, base+".json", append(AppendArray(nil, lines), '\n'))
				}
				// What the encoder writes, the decoder reads back to the same reply.
				checkRoundTrip(t, evs, lines, sseOut, d)
			})
		}
	}
}

// checkLines asserts the invariants of every encoded stream: one valid
// object per line, ids given, one start first and at most one end last.
func checkLines(t testing.TB, lines []byte, d Dialect) {
	t.Helper()
	var objs [][]byte
	for obj := range Objects(lines) {
		if !json.Valid(obj) || !isObject(obj) {
			t.Fatalf("not a JSON object: %q", obj)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return
	}
	start, end := TypeRequestStarted, TypeRequestCompleted
	switch d {
	case DialectRun:
		start, end = TypeRunStarted, TypeRunCompleted
	case DialectAgentic:
		start, end = AgenticPromptStarted, AgenticTurnEnd
	}
	var last uint64
	for i, obj := range objs {
		typ := string(mustGet(obj, "type"))
		if (i == 0) != (typ == start) {
			t.Fatalf("object %d is %s", i, obj)
		}
		if (typ == end || typ == AgenticTurnCancelled) && i != len(objs)-1 {
			t.Fatalf("end event is not last: %s", obj)
		}
		if d != DialectAgentic {
			id := EventID(obj)
			if id == 0 || id < last {
				t.Fatalf("event ids do not increase: %s after %d", obj, last)
			}
			last = id
		}
	}
}

func mustGet(obj []byte, key string) []byte {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(obj, &m)
	var s string
	if json.Unmarshal(m[key], &s) == nil {
		return []byte(s)
	}
	return m[key]
}

// replyText is the assistant text of canonical events, deltas and
// snapshots folded, and the final state.
func replyText(evs []*translate.Event) (string, translate.State) {
	var reply []byte
	var state translate.State
	sent := map[string]int{}
	for _, ev := range evs {
		switch ev.Kind {
		case translate.KindContent:
			if ev.Part == nil || ev.Part.Kind != translate.PartText {
				continue
			}
			k := fmt.Sprint(ev.MessageID, "/", ev.Index)
			if ev.Delta {
				reply = append(reply, ev.Part.Text...)
				sent[k] += len(ev.Part.Text)
			} else if len(ev.Part.Text) > sent[k] {
				reply = append(reply, ev.Part.Text[sent[k]:]...)
				sent[k] = len(ev.Part.Text)
			}
		case translate.KindMessageEnd:
			if ev.Message != nil && ev.Message.Role == translate.RoleAssistant {
				txt := ev.Message.Text()
				k := fmt.Sprint(ev.Message.ID, "/0")
				if len(txt) > sent[k] {
					reply = append(reply, txt[sent[k]:]...)
					sent[k] = len(txt)
				}
			}
		case translate.KindState:
			state = ev.State
		}
	}
	return string(reply), state
}

func checkRoundTrip(t *testing.T, evs []*translate.Event, lines, sseOut []byte, d Dialect) {
	t.Helper()
	wantText, wantState := replyText(evs)
	if wantState == translate.StateRejected {
		wantState = translate.StateFailed
	}
	dec := NewEventDecoder(DecoderOptions{})
	var got []*translate.Event
	for obj := range Objects(lines) {
		var err error
		if got, err = dec.Decode(got, obj); err != nil {
			t.Fatal(err)
		}
	}
	if dec.Dialect() != d {
		t.Errorf("detected dialect %v, want %v", dec.Dialect(), d)
	}
	gotText, gotState := replyText(got)
	if gotText != wantText || gotState != wantState {
		t.Errorf("round trip: got %q %s, want %q %s", gotText, gotState, wantText, wantState)
	}
	// The SSE form decodes to the same events up to the first settled one.
	sd := newTestStreamDecoder(bytes.NewReader(sseOut), DecoderOptions{Dialect: d})
	fromSSE, err := collect(sd)
	if err != nil {
		t.Fatal(err)
	}
	if s, st := replyText(fromSSE); st != translate.StateInputRequired && (s != wantText || st != wantState) {
		t.Errorf("SSE round trip: got %q %s, want %q %s", s, st, wantText, wantState)
	}
}

func newTestEventDecoder(opts DecoderOptions) *EventDecoder {
	d := NewEventDecoder(opts)
	n := 0
	d.newID = func(prefix string) string { n++; return fmt.Sprintf("%sgen-%d", prefix, n) }
	return d
}

func newTestStreamDecoder(r io.Reader, opts DecoderOptions) *StreamDecoder {
	s := NewStreamDecoder(r, opts)
	s.d = newTestEventDecoder(opts)
	return s
}

func collect(s *StreamDecoder) ([]*translate.Event, error) {
	var out []*translate.Event
	for i := 0; ; i++ {
		ev, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if i > 100000 {
			return out, fmt.Errorf("decoder does not end")
		}
		out = append(out, ev)
	}
}

// TestGoldenDecode decodes the samples (agentic documentation examples and
// hand-made streams of each dialect) into canonical events.
func TestGoldenDecode(t *testing.T) {
	files, _ := filepath.Glob("testdata/samples/*")
	n := 0
	for _, path := range files {
		name := filepath.Base(path)
		var evs []*translate.Event
		var err error
		in, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		switch {
		case strings.HasSuffix(name, ".sse"), strings.HasSuffix(name, ".txt"):
			evs, err = collect(newTestStreamDecoder(bytes.NewReader(in), DecoderOptions{}))
		case strings.Contains(name, "getevents") || strings.Contains(name, ".handmade.json"):
			d := newTestEventDecoder(DecoderOptions{})
			evs, err = d.DecodeList(nil, in)
		default:
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata/golden/decode", name+".events"), eventLines(t, evs))
		})
	}
	if n == 0 {
		t.Fatal("no samples")
	}
}
