package aip

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

var update = flag.Bool("update", false, "rewrite the derived goldens under testdata/golden")

// notAIP lists sample files that are not v01.00 direct-mode AIP objects, with
// the reason they are not round-tripped.
var notAIP = map[string]string{
	"v1-impl-acs-beijing-urban-partner.json":        "ACS capability document, not an AIP message",
	"v1-impl-acs-tour-assistant-leader.json":        "ACS capability document, not an AIP message",
	"v1-spec-group-mq-leader-mgmt-leave-group.json": "group-mgmt-message: group mode is out of scope",
	"v1-spec-group-mq-partner1-mgmt-left.json":      "group-mgmt-message: group mode is out of scope",
}

func samples(t testing.TB, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "samples", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples %s: %v", pattern, err)
	}
	return files
}

// semantic parses JSON into a value with nulls removed from objects, the
// one normalisation the codec applies (null is read as absent).
func semantic(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	return dropNulls(v)
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			x[k] = dropNulls(e)
		}
	case []any:
		for i := range x {
			x[i] = dropNulls(x[i])
		}
	}
	return v
}

func assertSameJSON(t *testing.T, want, got []byte) {
	t.Helper()
	if !reflect.DeepEqual(semantic(t, want), semantic(t, got)) {
		t.Errorf("JSON differs\nwant: %s\n got: %s", compact(want), got)
	}
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// reencode decodes a sample the way its kind calls for and encodes it again.
func reencode(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	switch {
	case strings.Contains(string(b), `"method"`):
		req, e := ParseRequest(b)
		if e != nil {
			t.Fatalf("ParseRequest: %v", e)
		}
		if req.Message != nil || req.Notification != nil || req.NotificationID != nil {
			req.Params = nil // encode from the decoded params
		}
		return req.AppendJSON(nil)
	case strings.Contains(string(b), `"jsonrpc"`):
		r, err := DecodeResponse(b)
		if err != nil {
			t.Fatalf("DecodeResponse: %v", err)
		}
		if len(r.Result) > 0 && r.Result[0] == '{' && strings.Contains(string(r.Result), `"type"`) {
			obj, err := DecodeObject(r.Result)
			if err != nil {
				t.Fatalf("DecodeObject(result): %v", err)
			}
			r.Result = obj.AppendJSON(nil)
		}
		return r.AppendJSON(nil)
	default:
		obj, err := DecodeObject(b)
		if err != nil {
			t.Fatalf("DecodeObject: %v", err)
		}
		return obj.AppendJSON(nil)
	}
}

func TestGoldenRoundTrip(t *testing.T) {
	n := 0
	for _, f := range samples(t, "v1-*.json") {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			if why, skip := notAIP[name]; skip {
				t.Skip(why)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := reencode(t, name, b)
			if !json.Valid(got) {
				t.Fatalf("re-encoding is not JSON: %s", got)
			}
			assertSameJSON(t, b, got)
			// Through encoding/json as well.
			if obj, err := DecodeObject(b); err == nil {
				via, err := json.Marshal(obj)
				if err != nil {
					t.Fatalf("json.Marshal: %v", err)
				}
				assertSameJSON(t, b, via)
			}
			n++
		})
	}
	if n < 30 {
		t.Errorf("only %d samples round-tripped", n)
	}
}

// eventLines renders canonical events as JSON lines, the golden format.
func eventLines(t *testing.T, evs []*translate.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		b, err := json.Marshal(readable(t, ev))
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// readable returns v as a generic JSON value with numeric event kinds and
// commands replaced by their names.
func readable(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				if n, ok := e.(float64); ok && k == "kind" {
					x[k] = translate.Kind(n).String()
				} else if n, ok := e.(float64); ok && k == "command" {
					x[k] = translate.Command(n).String()
				} else {
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(g)
	return g
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
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
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from golden:\nwant:\n%s\ngot:\n%s", name, want, got)
	}
}

// TestGoldenStreamEvents decodes the wire-correct sample streams into
// canonical events (testdata/golden/<sample>.events.jsonl).
func TestGoldenStreamEvents(t *testing.T) {
	for _, f := range samples(t, "v1-derived-*.wire.sse") {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := translate.Collect(NewStreamDecoder(bytes.NewReader(b), nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(name, ".wire.sse")+".events.jsonl", eventLines(t, evs))
		})
	}
}

// TestGoldenCanonical maps every request and response sample to the
// canonical model (testdata/golden/<sample>.canonical.json).
func TestGoldenCanonical(t *testing.T) {
	for _, f := range samples(t, "v1-*.json") {
		name := filepath.Base(f)
		if _, skip := notAIP[name]; skip {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if req, e := ParseRequest(b); e == nil && req.Message != nil {
			cr, err := RequestFromMessage(req.Method, req.Message)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out = cr
		} else if e == nil {
			continue
		} else if r, err := DecodeResponse(b); err == nil {
			evs, err := DecodeRPCResponse(200, b, NewTracker())
			if err != nil {
				if r.Error == nil && !strings.Contains(string(r.Result), `"type"`) {
					continue // notification results, group join: not events
				}
				t.Fatalf("%s: %v", name, err)
			}
			out = evs
		} else if obj, err := DecodeObject(b); err == nil {
			out = NewTracker().ObjectEvents(obj)
		} else {
			continue
		}
		got, err := json.MarshalIndent(readable(t, out), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			checkGolden(t, strings.TrimSuffix(name, ".json")+".canonical.json", append(got, '\n'))
		})
	}
}
