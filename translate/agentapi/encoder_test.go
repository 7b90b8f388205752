package agentapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
	"github.com/tidwall/gjson"
)

func state(s translate.State) *translate.Event {
	return &translate.Event{Kind: translate.KindState, State: s}
}

func textDelta(msgID, text string) *translate.Event {
	p := translate.TextPart(text)
	return &translate.Event{Kind: translate.KindContent, MessageID: msgID, Part: &p, Delta: true}
}

// brief renders a frame as "object status [id|msg_id] [extra]" for tables.
func brief(f gjson.Result) string {
	s := f.Get("object").Str + " " + f.Get("status").Str
	switch f.Get("object").Str {
	case "message":
		s += " " + f.Get("id").Str + " " + f.Get("type").Str + " " + f.Get("role").Str
	case "content":
		s += " " + f.Get("msg_id").Str + "#" + f.Get("index").Raw + " " + f.Get("type").Str
		if f.Get("delta").Bool() {
			s += " delta"
		}
		switch f.Get("type").Str {
		case "text":
			s += " " + f.Get("text").Str
		case "data":
			s += " " + f.Get("data").Raw
		case "file":
			s += " " + f.Get("file_url").Str + " " + f.Get("filename").Str
		}
	case "response":
		if e := f.Get("error"); e.Type != gjson.Null {
			s += " " + e.Raw
		}
	}
	return s
}

func TestEncoder(t *testing.T) {
	call := func(done bool, args string) *translate.Event {
		return &translate.Event{Kind: translate.KindToolCall, Done: done,
			Tool: &translate.Tool{CallID: "c1", Name: "clock", Arguments: args}}
	}
	tests := []struct {
		name   string
		events []*translate.Event
		finish *translate.Error
		want   []string
	}{
		{
			name:   "submitted writes only created",
			events: []*translate.Event{state(translate.StateSubmitted), state(translate.StateSubmitted), state(translate.StateWorking), state(translate.StateCompleted)},
			want:   []string{"response created", "response in_progress", "response completed"},
		},
		{
			name:   "content announces its message first",
			events: []*translate.Event{textDelta("m1", "Hi"), textDelta("m1", " you"), state(translate.StateCompleted)},
			want: []string{
				"response created", "response in_progress",
				"message in_progress m1 message assistant",
				"content in_progress m1#0 text delta Hi",
				"content in_progress m1#0 text delta  you",
				"content completed m1#0 text Hi you",
				"message completed m1 message assistant",
				"response completed",
			},
		},
		{
			name:   "content without message id reuses the open assistant message",
			events: []*translate.Event{textDelta("", "a"), textDelta("", "b")},
			want: []string{
				"response created", "response in_progress",
				"message in_progress msg_gen-1 message assistant",
				"content in_progress msg_gen-1#0 text delta a",
				"content in_progress msg_gen-1#0 text delta b",
				`message incomplete msg_gen-1 message assistant`,
				"response canceled",
			},
		},
		{
			name:   "bare tool call makes a plugin_call message",
			events: []*translate.Event{call(false, ""), call(false, "{"), call(true, "{}"), state(translate.StateCompleted)},
			want: []string{
				"response created", "response in_progress",
				"message in_progress msg_gen-1 plugin_call assistant",
				`content in_progress msg_gen-1#0 data {"call_id":"c1","name":"clock","arguments":""}`,
				`content in_progress msg_gen-1#0 data {"call_id":"c1","name":"clock","arguments":"{"}`,
				`content completed msg_gen-1#0 data {"call_id":"c1","name":"clock","arguments":"{}"}`,
				"message completed msg_gen-1 plugin_call assistant",
				"response completed",
			},
		},
		{
			name: "tool result and mcp call",
			events: []*translate.Event{
				{Kind: translate.KindToolResult, Done: true, Tool: &translate.Tool{CallID: "c1", Name: "clock", Output: "12:00"}},
				{Kind: translate.KindToolCall, Done: true, MessageID: "mine", Tool: &translate.Tool{Kind: translate.ToolMCP, CallID: "c2", Name: "s", Arguments: "{}", Server: "web"}},
			},
			finish: &translate.Error{Code: "X", Message: "y"},
			want: []string{
				"response created", "response in_progress",
				"message in_progress msg_gen-1 plugin_call_output tool",
				`content completed msg_gen-1#0 data {"call_id":"c1","name":"clock","output":"12:00"}`,
				"message completed msg_gen-1 plugin_call_output tool",
				"message in_progress mine mcp_call assistant",
				`content completed mine#0 data {"call_id":"c2","name":"s","arguments":"{}","server_label":"web"}`,
				"message completed mine mcp_call assistant",
				`response failed {"code":"X","message":"y"}`,
			},
		},
		{
			name: "input request gives incomplete",
			events: []*translate.Event{
				{Kind: translate.KindInputRequest, Parts: []translate.Part{translate.TextPart("Which city?")}},
				state(translate.StateInputRequired),
			},
			want: []string{
				"response created", "response in_progress",
				"message in_progress msg_gen-1 message assistant",
				"content completed msg_gen-1#0 text Which city?",
				"message completed msg_gen-1 message assistant",
				"response incomplete",
			},
		},
		{
			name:   "Finish with error after partial output",
			events: []*translate.Event{textDelta("m1", "Hi")},
			finish: &translate.Error{Code: "UPSTREAM_TIMEOUT", Message: "too slow"},
			want: []string{
				"response created", "response in_progress",
				"message in_progress m1 message assistant",
				"content in_progress m1#0 text delta Hi",
				"message incomplete m1 message assistant",
				`response failed {"code":"UPSTREAM_TIMEOUT","message":"too slow"}`,
			},
		},
		{
			name: "KindError then Finish(nil) fails with it",
			events: []*translate.Event{
				{Kind: translate.KindHeartbeat},
				{Kind: translate.KindError, Err: &translate.Error{Code: "E", Message: "m"}},
			},
			want: []string{"response created", "response in_progress", `response failed {"code":"E","message":"m"}`},
		},
		{
			name:   "failed state without error",
			events: []*translate.Event{{Kind: translate.KindState, State: translate.StateFailed, Parts: []translate.Part{translate.TextPart("it broke")}}},
			want:   []string{"response created", "response in_progress", `response failed {"code":"UPSTREAM_ERROR","message":"it broke"}`},
		},
		{
			name:   "rejected and nothing after a terminal",
			events: []*translate.Event{state(translate.StateRejected), textDelta("m1", "late"), state(translate.StateCompleted)},
			want:   []string{"response created", "response in_progress", `response rejected {"code":"UPSTREAM_ERROR","message":"request rejected"}`},
		},
		{
			name: "artifact is a completed file message",
			events: []*translate.Event{
				{Kind: translate.KindArtifact, Artifact: &translate.Artifact{Name: "report.pdf", Parts: []translate.Part{{Kind: translate.PartFile, URI: "https://x/r.pdf"}}}},
				state(translate.StateAwaitingCompletion),
			},
			want: []string{
				"response created", "response in_progress",
				"message in_progress msg_gen-1 message assistant",
				"content completed msg_gen-1#0 file https://x/r.pdf report.pdf",
				"message completed msg_gen-1 message assistant",
				"response completed",
			},
		},
		{
			name: "message end with the full message",
			events: []*translate.Event{
				{Kind: translate.KindMessageStart, Message: &translate.Message{ID: "m1", Role: translate.RoleAssistant, Type: "reasoning"}},
				textDelta("m1", "draft"),
				{Kind: translate.KindMessageEnd, Message: &translate.Message{ID: "m1", Parts: []translate.Part{translate.TextPart("final")}}},
				{Kind: translate.KindMessageEnd, Message: &translate.Message{ID: "m2", Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("only")}}},
			},
			want: []string{
				"response created", "response in_progress",
				"message in_progress m1 reasoning assistant",
				"content in_progress m1#0 text delta draft",
				"content completed m1#0 text final",
				"message completed m1 reasoning assistant",
				"message in_progress m2 message user",
				"message completed m2 message user",
				"response canceled",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEncoder(EncoderOptions{SessionID: "s"})
			var out []byte
			for _, ev := range tt.events {
				out = e.Encode(out, ev)
			}
			out = e.Finish(out, tt.finish)
			if !e.Done() {
				t.Fatal("not Done after Finish")
			}
			n := len(out)
			if out = e.Finish(out, &translate.Error{Code: "again"}); len(out) != n {
				t.Fatal("Finish after a terminal response wrote more")
			}
			if out = e.Encode(out, state(translate.StateCompleted)); len(out) != n {
				t.Fatal("Encode after a terminal response wrote more")
			}
			fs := checkStreamShape(t, out)
			var got []string
			for _, f := range fs {
				got = append(got, brief(f))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("frames:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEncoderFinalResponse(t *testing.T) {
	e := newTestEncoder(EncoderOptions{ResponseID: "req-1", SessionID: "s1", CreatedAt: 42})
	var out []byte
	for _, ev := range []*translate.Event{
		state(translate.StateWorking),
		textDelta("m1", "Hello"),
		{Kind: translate.KindMessageEnd, MessageID: "m1"},
		{Kind: translate.KindUsage, Data: []byte(`{"input_tokens": 3}`)},
		{Kind: translate.KindState, State: translate.StateCompleted, Ext: translate.Ext{Proto: "agentapi", Raw: []byte(`{"id":"dup","trace":"t1"}`)}},
	} {
		out = e.Encode(out, ev)
	}
	fs := checkStreamShape(t, out)
	final := fs[len(fs)-1]
	want := `{"sequence_number":6,"object":"response","status":"completed","error":null,"id":"req-1","created_at":42,"completed_at":1795301019,` +
		`"output":[{"sequence_number":5,"object":"message","status":"completed","error":null,"id":"m1","type":"message","role":"assistant",` +
		`"content":[{"sequence_number":null,"object":"content","status":"completed","error":null,"type":"text","index":0,"delta":false,"msg_id":"m1","text":"Hello"}],` +
		`"code":null,"message":null,"usage":null,"metadata":null}],"usage":{"input_tokens":3},"session_id":"s1","trace":"t1"}`
	if final.Raw != want {
		t.Errorf("final response:\n got %s\nwant %s", final.Raw, want)
	}
}

func TestEncoderEscaping(t *testing.T) {
	e := newTestEncoder(EncoderOptions{})
	text := "line1\nline2\t\"q\" \\ <b>&</b> 你好 \u2028 \x01 \xff"
	out := e.Encode(nil, textDelta("m1", text))
	fs := checkStreamShape(t, e.Finish(out, nil))
	c := fs[3]
	if strings.Contains(c.Raw, `\u003c`) || !strings.Contains(c.Raw, "你好") || !strings.Contains(c.Raw, "<b>&</b>") {
		t.Errorf("want raw UTF-8 and no HTML escaping: %s", c.Raw)
	}
	var v struct{ Text string }
	if err := json.Unmarshal([]byte(c.Raw), &v); err != nil {
		t.Fatal(err)
	}
	if want := strings.ToValidUTF8(text, "\ufffd"); v.Text != want {
		t.Errorf("text round trip: got %q, want %q", v.Text, want)
	}
}

func TestEncoderExtNeverDuplicatesKeys(t *testing.T) {
	e := newTestEncoder(EncoderOptions{})
	mext := translate.Ext{Proto: "agentapi", Raw: []byte(`{"id":"dup","content":"dup","status":"dup","metadata":{"m":1},"extra":[1, 2]}`)}
	cext := translate.Ext{Proto: "agentapi", Raw: []byte(`{"text":"dup","msg_id":"dup","index":"dup","extra":[1, 2]}`)}
	p := translate.TextPart("x")
	var out []byte
	out = e.Encode(out, &translate.Event{Kind: translate.KindMessageStart, Message: &translate.Message{ID: "m1", Ext: mext}})
	out = e.Encode(out, &translate.Event{Kind: translate.KindContent, MessageID: "m1", Part: &p, Done: true, Ext: cext})
	out = e.Encode(out, &translate.Event{Kind: translate.KindMessageStart, Message: &translate.Message{ID: "m2", Ext: translate.Ext{Proto: "aip", Raw: []byte(`{"zzz":1}`)}}})
	out = e.Encode(out, &translate.Event{Kind: translate.KindMessageStart, Message: &translate.Message{ID: "m3", Ext: translate.Ext{Proto: "agentapi", Raw: []byte(`{"broken`)}}})
	out = e.Finish(out, nil)
	for _, f := range checkStreamShape(t, out) {
		keys := map[string]bool{}
		f.ForEach(func(k, _ gjson.Result) bool {
			if keys[k.Str] {
				t.Errorf("key %q twice in %s", k.Str, f.Raw)
			}
			keys[k.Str] = true
			return true
		})
		if strings.Contains(f.Raw, "dup") || strings.Contains(f.Raw, "zzz") {
			t.Errorf("ext leaked: %s", f.Raw)
		}
		if (f.Get("id").Str == "m1" && f.Get("metadata").Raw != `{"m":1}`) || (f.Get("id").Str == "m1" || f.Get("msg_id").Str == "m1") && f.Get("extra").Raw != `[1,2]` {
			t.Errorf("ext not carried: %s", f.Raw)
		}
	}
}

func TestEncoderMessageIDs(t *testing.T) {
	e := NewEncoder(EncoderOptions{})
	if !strings.HasPrefix(e.respID, "response_") || len(e.respID) != len("response_")+36 {
		t.Errorf("response id %q", e.respID)
	}
	fs := frames(t, e.Encode(nil, textDelta("", "x")))
	id := fs[2].Get("id").Str
	if !strings.HasPrefix(id, "msg_") || len(id) != 40 || id[4+14] != '4' {
		t.Errorf("message id %q is not msg_<uuid4>", id)
	}
}
