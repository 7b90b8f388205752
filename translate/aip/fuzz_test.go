package aip

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

func seedFiles(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, _ := filepath.Glob(filepath.Join("testdata", p))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	seedFiles(f, "samples/*.json")
	f.Add([]byte(`{"jsonrpc":"2.0","method":"stream","id":1,"params":{"message":{"command":"re-stream","taskId":"t","commandParams":{"lastEventSeq":1e3}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notification/set","id":"x","params":{"url":"http://[::1]:80/","taskId":"t"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := ParseRequest(body)
		if req == nil {
			t.Fatal("nil request")
		}
		if e != nil {
			resp := AppendErrorResponse(nil, req.ResponseID(), e)
			if !json.Valid(resp) {
				t.Fatalf("error response is not JSON: %s", resp)
			}
			return
		}
		// A parsed request re-encodes to JSON that parses to the same request.
		if req.Message != nil || req.Notification != nil || req.NotificationID != nil {
			req.Params = nil
		}
		out := req.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("re-encoding is not JSON: %s\nfrom %s", out, body)
		}
		again, e := ParseRequest(out)
		if e != nil {
			t.Fatalf("re-encoding does not parse: %v\n%s\nfrom %s", e, out, body)
		}
		if out2 := again.AppendJSON(nil); !bytes.Equal(out, out2) && again.Params == nil {
			t.Fatalf("encoding not stable:\n%s\n%s", out, out2)
		}
		if req.Message != nil {
			if _, err := RequestFromMessage(req.Method, req.Message); err != nil {
				t.Fatalf("RequestFromMessage of a valid request: %v", err)
			}
		}
	})
}

func FuzzDecodeStream(f *testing.F) {
	seedFiles(f, "samples/*.sse", "samples/*.txt", "golden/*.wire.sse")
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,\"message\":\"x\"}}\n\n"))
	f.Fuzz(func(t *testing.T, wire []byte) {
		d := NewStreamDecoder(bytes.NewReader(wire), nil, 1<<16)
		evs, _ := translate.Collect(d)
		// Every event the decoder emits must be encodable by a Partner.
		enc := NewStreamEncoder(json.RawMessage(`1`), "t", "s")
		enc.Builder().Now = func() time.Time { return t0 }
		var out []byte
		for i, ev := range evs {
			if ev.Kind == 0 {
				t.Fatalf("event without kind: %+v", ev)
			}
			out = enc.AppendEvent(out, ev, uint64(i+1))
		}
		if !json.Valid(enc.Builder().Task().AppendJSON(nil)) {
			t.Fatal("builder task is not JSON")
		}
		// What the encoder wrote decodes again.
		if _, err := translate.Collect(NewStreamDecoder(bytes.NewReader(out), nil, 0)); err != nil {
			t.Fatalf("re-encoded stream does not decode: %v\n%s", err, out)
		}
	})
}
