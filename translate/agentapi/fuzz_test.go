package agentapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

// seedFiles adds every testdata file matching the patterns to f's corpus.
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
	seedFiles(f, "testdata/samples/*.json")
	f.Add([]byte(`{"input":[{"role":"user","content":[{"type":"image","image_url":"data:image/png;base64,AA=="}]}],"x":{"y":[1]}}`))
	f.Add([]byte(`{"input":[{"type":"function_call","content":[{"type":"data","data":{"a":"\u2028"}}],"meta":null}],"stream":"yes"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			return
		}
		out := EncodeRequest(nil, req)
		if !json.Valid(out) {
			t.Fatalf("EncodeRequest wrote invalid JSON %q for %q", out, body)
		}
		again, err := DecodeRequest(out)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
		if len(again.Input) != len(req.Input) || again.Session != req.Session || again.ID != req.ID {
			t.Fatalf("round trip changed the request: %s", out)
		}
	})
}

func FuzzDecodeStream(f *testing.F) {
	seedFiles(f, "testdata/samples/*.sse", "testdata/samples/*.txt", "testdata/streams/*.sse", "testdata/golden/*.sse")
	f.Add([]byte("data:{\"object\":\"content\",\"msg_id\":null,\"index\":-3,\"type\":\"text\",\"text\":\"\\ud800\"}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		evs, err := decodeAll(t, string(stream))
		if err != nil {
			return // only a read error, such as an event over the size bound
		}
		out := encodeAll(newTestEncoder(EncoderOptions{}), evs)
		checkStreamShape(t, out)
		again, err := decodeAll(t, string(out))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(again) == 0 {
			t.Fatal("re-decoded stream is empty")
		}
		if last := again[len(again)-1]; last.Kind != translate.KindState || !last.State.Settled() {
			t.Fatalf("re-decoded stream does not end settled: %+v", last)
		}
	})
}
