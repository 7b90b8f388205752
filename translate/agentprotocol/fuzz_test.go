package agentprotocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

func seedFiles(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	seedFiles(f, "testdata/requests/*.json")
	f.Add([]byte(`{"request_keys":{"request_id":"x"},"run_id":1e400}`))
	f.Add([]byte(`{"input":"\ud800","request_metadata":{"user_id":7},"x":[1,{"y":null}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range []Dialect{DialectProcess, DialectRun, DialectAgentic} {
			req, err := DecodeRequest(body, d)
			if err != nil {
				continue
			}
			out, err := EncodeRequest(nil, req, d)
			if err != nil {
				continue // agentic has no cancel
			}
			if !json.Valid(out) {
				t.Fatalf("EncodeRequest wrote invalid JSON %q for %q", out, body)
			}
			again, err := DecodeRequest(out, d)
			if err != nil {
				t.Fatalf("re-decode of %s: %v", out, err)
			}
			if d == DialectAgentic && req.Command == translate.CommandStart {
				again.ID = req.ID // the agentic server names the request itself
			}
			if again.Command != req.Command || again.ID != req.ID || again.Session != req.Session {
				t.Fatalf("%v: round trip changed %+v into %+v via %s", d, req, again, out)
			}
		}
	})
}

func FuzzDecodeEvents(f *testing.F) {
	seedFiles(f, "testdata/samples/*", "testdata/golden/encode/*.sse", "testdata/golden/encode/*.json")
	f.Add([]byte("data: {\"id\":1,\"type\":\"tool_result\",\"tool_call_id\":\"\",\"args\":null}\n\ndata: {\"type\":\"turn_end\",\"depth\":0,\"payload\":{\"messages\":[{}]}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		// As an SSE stream.
		evs, err := collect(newTestStreamDecoder(bytes.NewReader(stream), DecoderOptions{}))
		if err != nil {
			return // only a read error, such as an event over the size bound
		}
		if len(evs) == 0 {
			t.Fatal("a stream decodes to at least its end")
		}
		if last := evs[len(evs)-1]; last.Kind != translate.KindState || !last.State.Settled() {
			t.Fatalf("stream does not end settled: %+v", last)
		}
		// Whatever was decoded re-encodes to valid events in every dialect.
		for _, d := range []Dialect{DialectProcess, DialectRun, DialectAgentic} {
			e := NewEncoder(EncoderOptions{Dialect: d})
			var out []byte
			for i, ev := range evs {
				out = e.Encode(out, ev, uint64(i+1))
			}
			out = e.Finish(out, nil, uint64(len(evs)+1))
			checkLines(t, out, d)
			if !json.Valid(AppendArray(nil, out)) {
				t.Fatalf("invalid array: %s", out)
			}
		}
		// As a getevents list or a single event: no panic, errors typed.
		d := newTestEventDecoder(DecoderOptions{})
		if _, err := d.DecodeList(nil, stream); err != nil && !isMalformed(err) {
			t.Fatalf("untyped error %v", err)
		}
		_ = DetectDialect(stream)
	})
}

func isMalformed(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte(translate.ErrMalformed.Error()))
}
