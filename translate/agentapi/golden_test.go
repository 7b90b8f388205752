package agentapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// streamFiles lists the SSE transcripts: the upstream samples and the
// hand-made streams.
func streamFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"testdata/samples", "testdata/streams"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.sse"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no stream samples in testdata")
	}
	return files
}

// encoderFor names the re-encoded response as the sample's first response
// frame does, so a passthrough keeps the ids.
func encoderFor(stream []byte) *Encoder {
	var opts EncoderOptions
	for _, line := range strings.Split(string(stream), "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		if r := gjson.Parse(line); r.Get("object").Str == "response" {
			opts = EncoderOptions{
				ResponseID: r.Get("id").Str,
				SessionID:  r.Get("session_id").Str,
				CreatedAt:  r.Get("created_at").Int(),
			}
			break
		}
	}
	return newTestEncoder(opts)
}

func TestGolden(t *testing.T) {
	for _, path := range streamFiles(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".sse")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := decodeAll(t, string(in))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			gotEvents := eventLines(t, evs)
			gotSSE := encodeAll(encoderFor(in), evs)
			checkStreamShape(t, gotSSE)
			compareGolden(t, filepath.Join("testdata/golden", name+".events"), gotEvents)
			compareGolden(t, filepath.Join("testdata/golden", name+".sse"), gotSSE)
		})
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
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
	g, w := lines(got), lines(want)
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

// stripSeq removes every sequence_number from a JSON value, which nested
// objects carry with whatever value they had.
func stripSeq(t *testing.T, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "sequence_number")
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return v
}

// summary is what a client takes away from a stream.
type summary struct {
	msgIDs   []string // in order of first appearance
	texts    map[string]string
	final    gjson.Result
	errCode  string
	errMsg   string
	statuses []string
}

func summarize(t *testing.T, fs []gjson.Result) summary {
	s := summary{texts: map[string]string{}}
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			s.msgIDs = append(s.msgIDs, id)
		}
	}
	for _, f := range fs {
		switch f.Get("object").Str {
		case "message":
			add(f.Get("id").Str)
			if f.Get("status").Str == "completed" {
				var b strings.Builder
				for _, c := range f.Get("content").Array() {
					b.WriteString(c.Get("text").Str)
				}
				s.texts[f.Get("id").Str] = b.String()
			}
		case "content":
			add(f.Get("msg_id").Str)
		case "response":
			s.statuses = append(s.statuses, f.Get("status").Str)
			s.final = f
			s.errCode = f.Get("error.code").Str
			s.errMsg = f.Get("error.message").Str
		}
	}
	return s
}

// TestPassthrough checks that an Agent API stream decoded and encoded again
// says the same to a client: message ids, texts, final output, errors.
func TestPassthrough(t *testing.T) {
	for _, name := range []string{"generated_text_runner_success", "generated_text_runner_inband_failure"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata/samples", name+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			orig := frames(t, in)
			evs, err := decodeAll(t, string(in))
			if err != nil {
				t.Fatal(err)
			}
			out := checkStreamShape(t, encodeAll(encoderFor(in), evs))
			a, b := summarize(t, orig), summarize(t, out)
			if !reflect.DeepEqual(a.msgIDs, b.msgIDs) {
				t.Errorf("message ids: got %v, want %v", b.msgIDs, a.msgIDs)
			}
			for id, text := range a.texts {
				if b.texts[id] != text {
					t.Errorf("message %s text: got %q, want %q", id, b.texts[id], text)
				}
			}
			if a.final.Get("status").Str != b.final.Get("status").Str {
				t.Errorf("final status: got %s, want %s", b.final.Get("status"), a.final.Get("status"))
			}
			if got, want := stripSeq(t, b.final.Get("output").Raw), stripSeq(t, a.final.Get("output").Raw); !reflect.DeepEqual(got, want) {
				t.Errorf("final output:\n got %s\nwant %s", b.final.Get("output").Raw, a.final.Get("output").Raw)
			}
			for _, k := range []string{"id", "session_id", "created_at", "usage", "error"} {
				if got, want := b.final.Get(k).Raw, a.final.Get(k).Raw; got != want {
					t.Errorf("final %s: got %s, want %s", k, got, want)
				}
			}
			if a.errCode != b.errCode || a.errMsg != b.errMsg {
				t.Errorf("error: got %s/%q, want %s/%q", b.errCode, b.errMsg, a.errCode, a.errMsg)
			}
		})
	}
}
