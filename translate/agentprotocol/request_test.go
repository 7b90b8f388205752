package agentprotocol

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

func TestParseRequestKinds(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		kind    RequestKind
		dialect Dialect
	}{
		{"chat", `{"input":"hi"}`, KindChat, DialectUnknown},
		{"chat with request id", `{"input":"hi","request_id":"r"}`, KindChat, DialectProcess},
		{"chat run dialect", `{"input":"hi","thread_id":"t"}`, KindChat, DialectRun},
		{"agentic prompt", `{"prompt":"hi"}`, KindChat, DialectAgentic},
		{"agentic debug", `{"input":"hi","debug":"x"}`, KindChat, DialectAgentic},
		{"null ids ignored", `{"input":"hi","run_id":null}`, KindChat, DialectUnknown},
		{"resume", `{"request_keys":{"a":"b"},"request_id":"r"}`, KindResume, DialectProcess},
		{"agentic resume", `{"continue_result":{"a":"b"}}`, KindResume, DialectAgentic},
		{"cancel", `{"request_id":"r"}`, KindCancel, DialectProcess},
		{"cancel by run id", `{"run_id":"r"}`, KindCancel, DialectUnknown},
		{"cancel numeric id", `{"run_id":7}`, KindCancel, DialectUnknown},
		{"cancel with metadata", `{"request_id":"r","logging_level":"info","request_metadata":{}}`, KindCancel, DialectProcess},
		{"configure", `{"args":{"x":1}}`, KindConfigure, DialectUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tt.kind || p.Dialect != tt.dialect {
				t.Errorf("got %v %v, want %v %v", p.Kind, p.Dialect, tt.kind, tt.dialect)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"empty", ``, "not valid JSON"},
		{"garbage", `{"input":`, "not valid JSON"},
		{"array", `[{"input":"x"}]`, "must be a JSON object"},
		{"string", `"hi"`, "must be a JSON object"},
		{"no type", `{}`, "no known request type"},
		{"only metadata", `{"logging_level":"debug","request_metadata":{"a":1}}`, "no known request type"},
		{"input not string", `{"input":["x"]}`, "input: must be a string"},
		{"keys not object", `{"request_keys":"x"}`, "request_keys: must be an object"},
		{"args not object", `{"args":[1]}`, "args: must be an object"},
		{"id not string", `{"request_id":{"a":1}}`, "request_id: must be a string"},
		{"two kinds", `{"input":"x","request_keys":{}}`, "ambiguous request"},
		{"input and prompt", `{"input":"x","prompt":"y"}`, "both input and prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tt.body))
			if !errors.Is(err, translate.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrBadRequest containing %q", err, tt.want)
			}
		})
	}
}

func TestDecodeRequestMapping(t *testing.T) {
	tests := []struct {
		file    string
		d       Dialect
		cmd     translate.Command
		id, ses string
		user    string
		text    string
	}{
		{"chat-process.json", DialectUnknown, translate.CommandStart, "req-123", "", "", "Hello, agent!"},
		{"chat-process-session.json", DialectProcess, translate.CommandStart, "req-124", "run-789", "u1", "Hello"},
		{"chat-run.json", DialectUnknown, translate.CommandStart, "", "7f3e", "", "Hello"},
		{"agentic-process.json", DialectUnknown, translate.CommandStart, "", "", "", "What is the weather in New York?"},
		{"agentic-resume.json", DialectAgentic, translate.CommandContinue, "550e8400-e29b-41d4-a716-446655440000", "abc123", "", "Paris"},
		{"resume.json", DialectProcess, translate.CommandContinue, "req-123", "run-789", "", "Paris"},
		{"resume-run-multi.json", DialectRun, translate.CommandContinue, "0b6d", "7f3e", "", "Paris\nC"},
		{"cancel.json", DialectUnknown, translate.CommandCancel, "req-123", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/requests/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			req, err := DecodeRequest(body, tt.d)
			if err != nil {
				t.Fatal(err)
			}
			var text string
			if m := req.LastInput(); m != nil {
				text = m.Text()
			}
			if req.Command != tt.cmd || req.ID != tt.id || req.Session != tt.ses || req.User != tt.user || text != tt.text {
				t.Errorf("got %v id=%q session=%q user=%q text=%q", req.Command, req.ID, req.Session, req.User, text)
			}
		})
	}
}

func TestDecodeRequestConfigure(t *testing.T) {
	_, err := DecodeRequest([]byte(`{"args":{"model":"x"}}`), DialectUnknown)
	if !errors.Is(err, translate.ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
}

// TestRequestRoundTrip: what EncodeRequest writes for a decoded request,
// DecodeRequest reads back to the same command, ids and text.
func TestRequestRoundTrip(t *testing.T) {
	for _, file := range []string{"chat-process.json", "chat-process-session.json", "chat-run.json", "agentic-process.json", "agentic-resume.json", "resume.json", "resume-run-multi.json", "cancel.json"} {
		body, _ := os.ReadFile("testdata/requests/" + file)
		p, err := ParseRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Dialect.orDefault()
		req, err := p.Canonical(d)
		if err != nil {
			t.Fatal(err)
		}
		out, err := EncodeRequest(nil, req, d)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		again, err := DecodeRequest(out, d)
		if err != nil {
			t.Fatalf("%s: %s: %v", file, out, err)
		}
		if again.Command != req.Command || again.ID != req.ID || again.Session != req.Session || again.User != req.User {
			t.Errorf("%s: %s decodes to %+v, want %+v", file, out, again, req)
		}
		if req.LastInput() != nil && again.LastInput().Text() != req.LastInput().Text() {
			t.Errorf("%s: text %q, want %q", file, again.LastInput().Text(), req.LastInput().Text())
		}
	}
}

func TestEncodeRequest(t *testing.T) {
	start := &translate.Request{Command: translate.CommandStart, ID: "r1", Session: "s1",
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("hi")}}}}
	cont := &translate.Request{Command: translate.CommandContinue, ID: "r1", Session: "s1",
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("Paris")}}}}
	cancel := &translate.Request{Command: translate.CommandCancel, ID: "r1"}
	tests := []struct {
		req  *translate.Request
		d    Dialect
		want string
	}{
		{start, DialectProcess, `{"input":"hi","request_id":"r1","run_id":"s1"}`},
		{start, DialectRun, `{"input":"hi","run_id":"r1","thread_id":"s1"}`},
		{start, DialectAgentic, `{"prompt":"hi","thread_id":"s1"}`},
		{cont, DialectProcess, `{"request_keys":{"input":"Paris"},"request_id":"r1","run_id":"s1"}`},
		{cont, DialectAgentic, `{"continue_result":{"input":"Paris","request_id":"r1"},"thread_id":"s1"}`},
		{cancel, DialectRun, `{"run_id":"r1"}`},
	}
	for _, tt := range tests {
		got, err := EncodeRequest(nil, tt.req, tt.d)
		if err != nil || string(got) != tt.want {
			t.Errorf("%v %v: got %s %v, want %s", tt.req.Command, tt.d, got, err, tt.want)
		}
	}
	if _, err := EncodeRequest(nil, cancel, DialectAgentic); !errors.Is(err, translate.ErrUnsupported) {
		t.Errorf("agentic cancel: %v", err)
	}
	if _, err := EncodeRequest(nil, &translate.Request{Command: translate.CommandGet}, DialectProcess); !errors.Is(err, translate.ErrUnsupported) {
		t.Errorf("get: %v", err)
	}
}

func TestDetectDialect(t *testing.T) {
	tests := []struct {
		name, body string
		want       Dialect
	}{
		{"agentic event", `{"type":"chat_output","agent":"a","depth":0,"payload":"x"}`, DialectAgentic},
		{"agentic list", `[{"type":"turn_end","agent":"a","depth":0,"payload":"x"}]`, DialectAgentic},
		{"discovery", `["/weather_agent"]`, DialectAgentic},
		{"readme agent list", `[["Weather","/weather"]]`, DialectUnknown},
		{"request_started", `{"id":1,"type":"request_started","run_id":"r","agent":"a","request_id":"q"}`, DialectProcess},
		{"run_started", `{"id":1,"type":"run_started","run_id":"r","agent":"a"}`, DialectRun},
		{"operation_complete", `{"id":1,"type":"operation_complete","run_id":"r","agent":"a","finish_reason":"success"}`, DialectProcess},
		{"text with thread", `{"id":2,"type":"text_output","run_id":"r","thread_id":"t","content":"x"}`, DialectRun},
		{"text alone", `{"id":2,"type":"text_output","run_id":"r","content":"x"}`, DialectUnknown},
		{"event list", `[{"id":2,"type":"text_output","content":"x"},{"id":3,"type":"run_completed","finish_reason":"success"}]`, DialectRun},
		{"agentic start response", `{"request_id":"550e","thread_id":"abc"}`, DialectAgentic},
		{"agentic describe", `{"name":"W","purpose":"p","tools":[],"endpoints":["/process"],"operations":["chat"]}`, DialectAgentic},
		{"run describe", `{"name":"W","purpose":"p","endpoints":["/describe","/run"],"operations":[{"name":"chat","description":"d"}]}`, DialectRun},
		{"process describe", `{"name":"W","purpose":"p","endpoints":["/describe","/process"],"operations":[{"name":"chat","description":"d"}]}`, DialectProcess},
		{"agentic request", `{"prompt":"x"}`, DialectAgentic},
		{"garbage", `{`, DialectUnknown},
		{"number", `7`, DialectUnknown},
	}
	for _, tt := range tests {
		if got := DetectDialect([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, f := range []string{"agentic-describe.example.json", "agentic-process-response.example.json", "agentic-getevents-nonstream.example.json"} {
		b, _ := os.ReadFile("testdata/samples/" + f)
		if got := DetectDialect(b); got != DialectAgentic {
			t.Errorf("%s: got %v", f, got)
		}
	}
}

func TestDecodeSubmitResponse(t *testing.T) {
	b, _ := os.ReadFile("testdata/samples/agentic-process-response.example.json")
	r, err := DecodeSubmitResponse(b)
	if err != nil || r.Dialect != DialectAgentic || r.Turn != "550e8400-e29b-41d4-a716-446655440000" || r.Session != "abc123" {
		t.Errorf("agentic: %+v %v", r, err)
	}
	r, err = DecodeSubmitResponse([]byte(`{"id":1,"type":"run_started","run_id":"r1","thread_id":"t1","agent":"a"}`))
	if err != nil || r.Dialect != DialectRun || r.Turn != "r1" || r.Session != "t1" {
		t.Errorf("run: %+v %v", r, err)
	}
	r, err = DecodeSubmitResponse([]byte(`{"id":1,"type":"request_started","run_id":"s","request_id":"q","agent":"a"}`))
	if err != nil || r.Dialect != DialectProcess || r.Turn != "q" || r.Session != "s" {
		t.Errorf("process: %+v %v", r, err)
	}
	if r, err := DecodeSubmitResponse(nil); err != nil || r.Turn != "" {
		t.Errorf("empty: %+v %v", r, err)
	}
	for _, bad := range []string{`[1]`, `{"x":1}`, `nope`} {
		if _, err := DecodeSubmitResponse([]byte(bad)); !errors.Is(err, translate.ErrMalformed) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestPaths(t *testing.T) {
	tests := []struct{ got, want string }{
		{DialectProcess.EventsPath("/echo", "req 1", true, 5), "/echo/getevents/req%201?stream=true&since=5"},
		{DialectRun.EventsPath("/echo/", "r1", false, 0), "/echo/get_events/r1?stream=false"},
		{DialectAgentic.EventsPath("/echo", "a&b", true, 9), "/echo/getevents?request_id=a%26b&stream=true"},
		{DialectAgentic.DiscoveryPath(), "/_discovery"},
		{DialectRun.DiscoveryPath(), "/"},
		{DialectRun.DescribePath("/echo"), "/echo/describe"},
		{AgentPath("Weather Agent!"), "/weather_agent_"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %s, want %s", tt.got, tt.want)
		}
	}
	for _, c := range []struct {
		d    Dialect
		cmd  translate.Command
		want string
	}{
		{DialectProcess, translate.CommandCancel, "/a/process"},
		{DialectRun, translate.CommandContinue, "/a/run"},
		{DialectAgentic, translate.CommandStart, "/a/process"},
		{DialectAgentic, translate.CommandContinue, "/a/resume"},
	} {
		if got, err := c.d.SubmitPath("/a", c.cmd); err != nil || got != c.want {
			t.Errorf("%v %v: %s %v", c.d, c.cmd, got, err)
		}
	}
	if _, err := DialectAgentic.SubmitPath("/a", translate.CommandCancel); !errors.Is(err, translate.ErrUnsupported) {
		t.Errorf("agentic cancel: %v", err)
	}
}

func TestDescriptorAndAgentList(t *testing.T) {
	desc := NewDescriptor("Echo", "echoes", nil, nil, DialectProcess)
	b, err := AppendDescriptor(nil, desc, DialectProcess)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"Echo","purpose":"echoes","endpoints":["/describe","/process","/getevents","/stream_request"],"operations":[{"name":"chat","description":"send a chat request","input_schema":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]},"output_schema":{"type":"object","properties":{"output":{"type":"string"}}}}],"tools":[]}`
	if string(b) != want {
		t.Errorf("descriptor:\n got %s\nwant %s", b, want)
	}
	b, _ = AppendDescriptor(nil, NewDescriptor("Echo", "echoes", nil, nil, DialectAgentic), DialectAgentic)
	if got := string(b); !strings.Contains(got, `"operations":["chat"]`) || !strings.Contains(got, `"prompts":{}`) {
		t.Errorf("agentic descriptor: %s", got)
	}
	sample, _ := os.ReadFile("testdata/samples/agentic-describe.example.json")
	d, err := DecodeDescriptor(sample)
	if err != nil || d.Name != "Weather Agent" || len(d.Operations) != 1 || d.Operations[0].Name != "chat" || d.Prompts["help"] == "" {
		t.Errorf("decode agentic descriptor: %+v %v", d, err)
	}
	agents := []AgentRef{{Name: "Echo", Path: "/echo"}, {Name: "W", Path: "/w"}}
	if got := string(AppendAgentList(nil, agents, DialectProcess)); got != `[["Echo","/echo"],["W","/w"]]` {
		t.Errorf("list: %s", got)
	}
	if got := string(AppendAgentList(nil, agents, DialectAgentic)); got != `["/echo","/w"]` {
		t.Errorf("agentic list: %s", got)
	}
	for _, body := range []string{`[["Echo","/echo"]]`, `[{"name":"Echo","path":"/echo"}]`, `["/echo"]`} {
		got, err := DecodeAgentList([]byte(body))
		if err != nil || len(got) != 1 || got[0].Path != "/echo" || !strings.EqualFold(got[0].Name, "echo") {
			t.Errorf("%s: %+v %v", body, got, err)
		}
	}
	if _, err := DecodeAgentList([]byte(`[1]`)); !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("bad list: %v", err)
	}
}
