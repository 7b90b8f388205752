package agentapi

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

func TestDecodeRequestSamples(t *testing.T) {
	t.Run("history with function call and output", func(t *testing.T) {
		req := decodeFile(t, "testdata/samples/request_history_with_function_call_and_output.json")
		if req.Command != translate.CommandStart || req.Session != "Test Session" || !req.Stream || len(req.Input) != 3 {
			t.Fatalf("request: %+v", req)
		}
		if m := req.Input[0]; m.Role != translate.RoleUser || m.Type != "message" || m.Text() != "杭州的天气怎么样？" {
			t.Errorf("input 0: %+v", m)
		}
		call := req.Input[1]
		if call.Type != "function_call" || call.Role != "" || len(call.Parts) != 1 || call.Parts[0].Kind != translate.PartData {
			t.Fatalf("input 1: %+v", call)
		}
		if got := gjson.GetBytes(call.Parts[0].Data, "arguments").Str; got != `{"location": "杭州"}` {
			t.Errorf("arguments %q", got)
		}
		if out := req.Input[2]; out.Type != "function_call_output" || gjson.GetBytes(out.Parts[0].Data, "call_id").Str != "call_eb113ba709d54ab6a4dcbf" {
			t.Errorf("input 2: %+v", out)
		}
		if !req.Ext.IsZero() {
			t.Errorf("unexpected ext %s", req.Ext.Raw)
		}
	})
	t.Run("openapi multiturn", func(t *testing.T) {
		req := decodeFile(t, "testdata/samples/request_openapi_example_multiturn.json")
		if req.Session != "1764056632961" || len(req.Input) != 3 {
			t.Fatalf("request: %+v", req)
		}
		if m := req.Input[1]; m.Role != translate.RoleAssistant || m.Text() != "Hello! How can I assist you today?" {
			t.Errorf("input 1: %+v", m)
		}
		if req.LastInput().Text() != "What is the capital of France?" {
			t.Errorf("last input %+v", req.LastInput())
		}
	})
}

func decodeFile(t *testing.T, path string) *translate.Request {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestDecodeRequestErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"not JSON", `{"input":`, "body is not valid JSON"},
		{"JSON array", `[{"input":[]}]`, "body must be a JSON object"},
		{"missing input", `{"session_id":"s"}`, "input: field required"},
		{"input not a list", `{"input":{"role":"user"}}`, "input: must be a list"},
		{"empty input", `{"input":[]}`, "input: must not be empty"},
		{"message not an object", `{"input":["hi"]}`, "input.0: must be an object"},
		{"uppercase role", `{"input":[{"role":"USER","content":[]}]}`, `input.0.role: "USER" is not one of assistant, user, system, tool`},
		{"unknown content type", `{"input":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"hologram"}]}]}`, `input.0.content.1.type: "hologram" is not one of text, data, image, audio, file, refusal, video`},
		{"content without type", `{"input":[{"role":"user","content":[{"x":1}]}]}`, "input.0.content.0.type: missing"},
		{"content not a list", `{"input":[{"role":"user","content":"hi"}]}`, "input.0.content: must be a list"},
		{"session_id not a string", `{"input":[{"role":"user"}],"session_id":5}`, "session_id: must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.body))
			if !errors.Is(err, translate.ErrBadRequest) {
				t.Fatalf("got %v, want ErrBadRequest", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestRequestExtForwarded(t *testing.T) {
	body := `{"input":[{"role":"user","content":[{"type":"text","text":"hi"}],"metadata":{"a":1}}],
		"session_id":"s","user_id":"u","id":"req-9","stream":false,
		"biz_params":{"x": [1, 2]},"model":"qwen","temperature":0.5}`
	req, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.Stream || req.ID != "req-9" || req.User != "u" {
		t.Errorf("request %+v", req)
	}
	if got := string(req.Ext.Raw); req.Ext.Proto != "agentapi" || got != `{"biz_params":{"x":[1,2]},"model":"qwen","temperature":0.5}` {
		t.Errorf("ext %q %s", req.Ext.Proto, got)
	}
	if got := string(req.Input[0].Ext.Raw); got != `{"metadata":{"a":1}}` {
		t.Errorf("message ext %s", got)
	}
	out := EncodeRequest(nil, req)
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	want := `{"input":[{"role":"user","type":"message","content":[{"type":"text","text":"hi"}],"metadata":{"a":1}}],` +
		`"session_id":"s","user_id":"u","stream":true,"id":"req-9","biz_params":{"x":[1,2]},"model":"qwen","temperature":0.5}`
	if string(out) != want {
		t.Errorf("encoded:\n got %s\nwant %s", out, want)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	req := &translate.Request{
		Command: translate.CommandStart,
		ID:      "r1",
		Session: "s1",
		User:    "u1",
		Stream:  true,
		Input: []translate.Message{
			{ID: "m0", Role: translate.RoleSystem, Type: "message", Parts: []translate.Part{translate.TextPart("be brief\n\"ok\"")}},
			{Role: translate.RoleUser, Type: "message", Parts: []translate.Part{
				translate.TextPart("look"),
				{Kind: translate.PartImage, URI: "https://x/i.png"},
				{Kind: translate.PartFile, URI: "https://x/f", FileID: "f1", Name: "f.txt", Bytes: "aGk="},
				{Kind: translate.PartAudio, Bytes: "UklG", Format: "wav"},
				{Kind: translate.PartVideo, URI: "https://x/v.mp4"},
				{Kind: translate.PartData, Data: json.RawMessage(`{"k":[1,{"z":null}]}`)},
			}},
			{Role: translate.RoleAssistant, Type: "message", Parts: []translate.Part{{Kind: translate.PartRefusal, Text: "no"}}},
			{Type: "function_call", Parts: []translate.Part{{Kind: translate.PartData, Data: json.RawMessage(`{"call_id":"c","name":"n","arguments":"{}"}`)}}},
			{Role: translate.RoleTool, Type: "function_call_output", Parts: []translate.Part{{Kind: translate.PartData, Data: json.RawMessage(`{"call_id":"c","output":"1"}`)}}},
			{Role: translate.RoleUser, Type: "message"},
		},
		Ext: translate.Ext{Proto: "agentapi", Raw: json.RawMessage(`{"biz_params":{"a":"b"}}`)},
	}
	got, err := DecodeRequest(EncodeRequest(nil, req))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, req) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(req)
		t.Errorf("round trip:\n got %s\nwant %s", a, b)
	}
}

func TestEncodeRequestIgnoresOtherExt(t *testing.T) {
	req := &translate.Request{Input: []translate.Message{{Role: "user", Parts: []translate.Part{translate.TextPart("x")}}},
		Ext: translate.Ext{Proto: "aip", Raw: json.RawMessage(`{"taskId":"t"}`)}}
	if got := string(EncodeRequest(nil, req)); got != `{"input":[{"role":"user","type":"message","content":[{"type":"text","text":"x"}]}],"stream":true}` {
		t.Errorf("got %s", got)
	}
}

func TestAppendHTTPError(t *testing.T) {
	got := string(AppendHTTPError([]byte("x"), "BAD_REQUEST", `input.0.role: "USER" <bad>`))
	if want := `x{"error":{"code":"BAD_REQUEST","message":"input.0.role: \"USER\" <bad>"}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
