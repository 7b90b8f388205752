package aip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

func TestParseRequestErrors(t *testing.T) {
	msg := func(fields string) string {
		return `{"jsonrpc":"2.0","method":"rpc","id":"7","params":{"message":{"type":"message","id":"m","sentAt":"2025-09-01T12:00:00+08:00","senderRole":"leader","senderId":"l"` + fields + `}}}`
	}
	tests := []struct {
		name, body string
		code       int
		id         string // the id the error response must echo
	}{
		{"empty body", ``, CodeParseError, "null"},
		{"not JSON", `{"jsonrpc":"2.0",`, CodeParseError, "null"},
		{"trailing garbage", `{"jsonrpc":"2.0","method":"rpc","id":1} x`, CodeParseError, "null"},
		{"array", `[{"jsonrpc":"2.0","method":"rpc","id":1}]`, CodeInvalidRequest, "null"},
		{"string", `"rpc"`, CodeInvalidRequest, "null"},
		{"no jsonrpc", `{"method":"rpc","id":3,"params":{}}`, CodeInvalidRequest, "3"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","method":"rpc","id":"a","params":{}}`, CodeInvalidRequest, `"a"`},
		{"method not string", `{"jsonrpc":"2.0","method":5,"id":4}`, CodeInvalidRequest, "4"},
		{"no method", `{"jsonrpc":"2.0","id":4}`, CodeInvalidRequest, "4"},
		{"id object", `{"jsonrpc":"2.0","method":"rpc","id":{"x":1}}`, CodeInvalidRequest, "null"},
		{"unknown method", `{"jsonrpc":"2.0","method":"message/send","id":12.50,"params":{}}`, CodeMethodNotFound, "12.50"},
		{"method case", `{"jsonrpc":"2.0","method":"RPC","id":1,"params":{}}`, CodeMethodNotFound, "1"},
		{"no params", `{"jsonrpc":"2.0","method":"rpc","id":"7"}`, CodeInvalidParams, `"7"`},
		{"params array", `{"jsonrpc":"2.0","method":"rpc","id":"7","params":[1]}`, CodeInvalidParams, `"7"`},
		{"no message", `{"jsonrpc":"2.0","method":"stream","id":"7","params":{}}`, CodeInvalidParams, `"7"`},
		{"start without taskId", msg(`,"command":"start","dataItems":[]`), CodeInvalidParams, `"7"`},
		{"no command", msg(`,"taskId":"t","dataItems":[]`), CodeInvalidParams, `"7"`},
		{"unknown command", msg(`,"command":"pause","taskId":"t","dataItems":[]`), CodeInvalidParams, `"7"`},
		{"re-stream over rpc", msg(`,"command":"re-stream","taskId":"t","dataItems":[]`), CodeInvalidParams, `"7"`},
		{"wrong type", msg(`,"command":"start","taskId":"t","dataItems":[],"type":"task-command"`), CodeInvalidParams, `"7"`},
		{"bad dataItems", msg(`,"command":"start","taskId":"t","dataItems":{}`), CodeInvalidParams, `"7"`},
		{"bad sentAt", `{"jsonrpc":"2.0","method":"rpc","id":"7","params":{"message":{"type":"message","id":"m","sentAt":"yesterday","senderRole":"leader","senderId":"l","command":"start","taskId":"t","dataItems":[]}}}`, CodeInvalidParams, `"7"`},
		{"negative timeout", msg(`,"command":"start","taskId":"t","dataItems":[],"commandParams":{"responseTimeout":-1}`), CodeInvalidParams, `"7"`},
		{"bad lastEventSeq", strings.Replace(msg(`,"command":"re-stream","taskId":"t","dataItems":[],"commandParams":{"lastEventSeq":"2"}`), `"rpc"`, `"stream"`, 1), CodeInvalidParams, `"7"`},
		{"cancel over stream", strings.Replace(msg(`,"command":"cancel","taskId":"t","dataItems":[]`), `"rpc"`, `"stream"`, 1), CodeInvalidParams, `"7"`},
		{"notification/start without config", strings.Replace(msg(`,"command":"start","taskId":"t","dataItems":[]`), `"rpc"`, `"notification/start"`, 1), CodeInvalidParams, `"7"`},
		{"v02 command", `{"jsonrpc":"2.0","method":"rpc","id":"9","params":{"command":{"type":"task-command","command":"start"}}}`, CodeInvalidParams, `"9"`},
		{"notification url ftp", `{"jsonrpc":"2.0","method":"notification/set","id":1,"params":{"url":"ftp://x/n","token":"t","taskId":"t"}}`, CodeInvalidParams, "1"},
		{"notification url relative", `{"jsonrpc":"2.0","method":"notification/set","id":1,"params":{"url":"/notify","token":"t","taskId":"t"}}`, CodeInvalidParams, "1"},
		{"notification no taskId", `{"jsonrpc":"2.0","method":"notification/set","id":1,"params":{"url":"https://x/n","token":"t"}}`, CodeInvalidParams, "1"},
		{"notification url number", `{"jsonrpc":"2.0","method":"notification/set","id":1,"params":{"url":5,"taskId":"t"}}`, CodeInvalidParams, "1"},
		{"notification/get no taskId", `{"jsonrpc":"2.0","method":"notification/get","id":null,"params":{}}`, CodeInvalidParams, "null"},
		{"group params missing", `{"jsonrpc":"2.0","method":"group","id":1}`, CodeInvalidParams, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, e := ParseRequest([]byte(tt.body))
			if e == nil {
				t.Fatalf("no error, want %d", tt.code)
			}
			if e.Code != tt.code {
				t.Fatalf("code %d (%v), want %d", e.Code, e, tt.code)
			}
			if req == nil {
				t.Fatal("nil request with error")
			}
			resp := AppendErrorResponse(nil, req.ResponseID(), e)
			var got struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(resp, &got); err != nil {
				t.Fatalf("error response is not JSON: %s", resp)
			}
			if string(got.ID) != tt.id || got.Error.Code != tt.code || got.Error.Message != ErrorMessage(tt.code) {
				t.Errorf("response %s, want id %s code %d", resp, tt.id, tt.code)
			}
		})
	}
}

func TestParseRequestOK(t *testing.T) {
	m := `{"type":"message","id":"m","sentAt":"2025-09-01T12:00:00Z","senderRole":"leader","senderId":"l","command":"%s","taskId":"t","sessionId":"s","dataItems":[{"type":"text","text":"hi"}]%s}`
	tests := []struct {
		name, method, id, command, extra string
	}{
		{"number id", "rpc", `42`, "start", `,"commandParams":{"responseTimeout":30000,"timeout":5}`},
		{"string id", "rpc", `"abc"`, "get", `,"commandParams":{"lastMessageSentAt":null,"lastStateChangedAt":"2025-09-01T12:00:00.123456+00:00"}`},
		{"null id", "rpc", `null`, "cancel", ``},
		{"float id echoed as sent", "rpc", `1.50`, "complete", ``},
		{"stream start", "stream", `"1"`, "start", ``},
		{"stream continue", "stream", `"1"`, "continue", ``},
		{"re-stream no seq", "stream", `"1"`, "re-stream", `,"commandParams":{"lastEventSeq":null}`},
		{"notification/start", "notification/start", `4`, "start", `,"commandParams":{"notificationConfigId":"n-1","notifyOnStates":["working"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","method":"` + tt.method + `","id":` + tt.id + `,"params":{"message":` + fmt.Sprintf(m, tt.command, tt.extra) + `}}`
			req, e := ParseRequest([]byte(body))
			if e != nil {
				t.Fatalf("error %v", e)
			}
			if string(req.ResponseID()) != tt.id {
				t.Errorf("id %s, want %s", req.ResponseID(), tt.id)
			}
			if req.Message == nil || string(req.Message.Command) != tt.command || req.Message.TaskID != "t" {
				t.Fatalf("message %+v", req.Message)
			}
		})
	}
	// A request without id is a notification: the response id is null.
	req, e := ParseRequest([]byte(`{"jsonrpc":"2.0","method":"notification/get","params":{"taskId":"t"}}`))
	if e != nil || req.NotificationID.TaskID != "t" || string(req.ResponseID()) != "null" {
		t.Errorf("notification/get: %v %+v", e, req)
	}
	req, e = ParseRequest([]byte(`{"jsonrpc":"2.0","method":"notification/set","id":1,"params":{"url":"http://leader:8080/n","taskId":"t"}}`))
	if e != nil || req.Notification.URL != "http://leader:8080/n" {
		t.Errorf("notification/set without token: %v", e)
	}
}

func TestCommandParams(t *testing.T) {
	m := &Message{CommandParams: json.RawMessage(`{"responseTimeout":1000,"awaitingInputTimeout":2000,"awaitingCompletionTimeout":3000,"maxProductsBytes":4096,"timeout":60,"other":true}`)}
	sp, err := m.StartParams()
	if err != nil || sp != (StartParams{1000, 2000, 3000, 4096, 60}) {
		t.Errorf("StartParams %+v %v", sp, err)
	}
	m.CommandParams = sp.AppendJSON(nil)
	if sp2, _ := m.StartParams(); sp2 != sp {
		t.Errorf("StartParams round trip %+v", sp2)
	}
	m.CommandParams = json.RawMessage(`{"lastMessageSentAt":"2025-09-01T10:00:00+08:00","lastStateChangedAt":null}`)
	gp, err := m.GetParams()
	if err != nil || gp.LastMessageSentAt.Time().Unix() != 1756692000 || !gp.LastStateChangedAt.IsZero() {
		t.Errorf("GetParams %+v %v", gp, err)
	}
	if got := string(gp.AppendJSON(nil)); got != `{"lastMessageSentAt":"2025-09-01T10:00:00+08:00","lastStateChangedAt":null}` {
		t.Errorf("GetParams JSON %s", got)
	}
	m.CommandParams = nil
	if rp, err := m.ReStreamParams(); err != nil || rp.LastEventSeq != 0 {
		t.Errorf("ReStreamParams of nothing %+v %v", rp, err)
	}
	np := NotificationStartParams{NotificationConfigID: "n", NotifyOnStates: []TaskState{StateWorking}}
	m.CommandParams = np.AppendJSON(nil)
	if got, err := m.NotificationStartParams(); err != nil || got.NotificationConfigID != "n" || got.NotifyOnStates[0] != StateWorking {
		t.Errorf("NotificationStartParams %+v %v", got, err)
	}
}

func TestTimestamps(t *testing.T) {
	utc := time.Date(2025, 10, 11, 6, 20, 0, 123456000, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2025-10-11T06:20:00.123456+00:00", utc},
		{"2025-10-11T14:20:00.123456+08:00", utc},
		{"2025-10-11T06:20:00.123456Z", utc},
		{"2025-10-11T06:20:00.123456z", utc},
		{"2025-10-11 06:20:00.123456+00:00", utc},
		{"2025-10-11T14:20:00.123456+0800", utc},
		{"2025-10-11T01:20:00.123456-05:00", utc},
		{"2025-10-11T06:20:00.123Z", utc.Truncate(time.Millisecond)},
		{"2025-10-11T06:20:00Z", utc.Truncate(time.Second)},
		{"2025-10-11T14:20:00+08:00", utc.Truncate(time.Second)},
		{"2025-10-11T14:20:00", utc.Truncate(time.Second)}, // no offset: Beijing
		{"2025-10-11T14:20+08:00", utc.Truncate(time.Minute)},
		{"2025-10-11T06:20:00.123456789+00:00", utc.Add(789)},
	}
	for _, tt := range tests {
		ts, err := ParseTimestamp(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !ts.Time().Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.in, ts.Time(), tt.want)
		}
		if ts.String() != tt.in {
			t.Errorf("%s: re-encodes as %s", tt.in, ts)
		}
	}
	for _, bad := range []string{"", "yesterday", "2025-10-11", "2025-13-11T06:20:00Z", "2025-10-11T06:20:00+25:00", "2025-10-11T06:20:00+08:0x", "2025-10-11T06:20:00.Z"} {
		if _, err := ParseTimestamp(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// Encoding: milliseconds and a numeric offset, never Z.
	for _, tt := range []struct {
		t    time.Time
		want string
	}{
		{utc, "2025-10-11T06:20:00.123+00:00"},
		{utc.In(Beijing), "2025-10-11T14:20:00.123+08:00"},
		{utc.Truncate(time.Second).In(Beijing), "2025-10-11T14:20:00.000+08:00"},
	} {
		if got := At(tt.t).String(); got != tt.want {
			t.Errorf("At(%v) = %s, want %s", tt.t, got, tt.want)
		}
	}
	// Instants compare across offsets and precisions.
	a, _ := ParseTimestamp("2025-09-01T12:00:00+08:00")
	b, _ := ParseTimestamp("2025-09-01T04:00:00.000001+00:00")
	if !a.Before(b) || !b.After(a) || a.Equal(b) {
		t.Error("instant comparison")
	}
	var ts Timestamp
	if err := json.Unmarshal([]byte(`null`), &ts); err != nil || !ts.IsZero() {
		t.Error("null timestamp")
	}
	if err := json.Unmarshal([]byte(`"2025-09-01T12:00:00+08:00"`), &ts); err != nil || ts.Time().Unix() != 1756699200 {
		t.Errorf("json timestamp %v %v", ts, err)
	}
}

func TestStateMapping(t *testing.T) {
	pairs := []struct {
		aip TaskState
		c   translate.State
	}{
		{StateAccepted, translate.StateSubmitted},
		{StateWorking, translate.StateWorking},
		{StateAwaitingInput, translate.StateInputRequired},
		{StateAwaitingCompletion, translate.StateAwaitingCompletion},
		{StateCompleted, translate.StateCompleted},
		{StateCanceled, translate.StateCanceled},
		{StateFailed, translate.StateFailed},
		{StateRejected, translate.StateRejected},
	}
	for _, p := range pairs {
		if c, ok := StateToCanonical(p.aip); !ok || c != p.c {
			t.Errorf("StateToCanonical(%s) = %s", p.aip, c)
		}
		if a, ok := StateFromCanonical(p.c); !ok || a != p.aip {
			t.Errorf("StateFromCanonical(%s) = %s", p.c, a)
		}
		if p.aip.Terminal() != p.c.Terminal() || !p.aip.Valid() {
			t.Errorf("%s: terminal or valid disagrees", p.aip)
		}
	}
	if _, ok := StateToCanonical("submitted"); ok {
		t.Error("canonical name accepted as AIP state")
	}
	if _, ok := StateFromCanonical("accepted"); ok {
		t.Error("AIP name accepted as canonical state")
	}
}

func TestCommandMapping(t *testing.T) {
	pairs := []struct {
		aip Command
		c   translate.Command
	}{
		{CommandStart, translate.CommandStart},
		{CommandContinue, translate.CommandContinue},
		{CommandCancel, translate.CommandCancel},
		{CommandComplete, translate.CommandComplete},
		{CommandGet, translate.CommandGet},
		{CommandReStream, translate.CommandResume},
	}
	for _, p := range pairs {
		if c, ok := CommandToCanonical(p.aip); !ok || c != p.c {
			t.Errorf("CommandToCanonical(%s) = %v", p.aip, c)
		}
		if a, ok := CommandFromCanonical(p.c); !ok || a != p.aip {
			t.Errorf("CommandFromCanonical(%v) = %s", p.c, a)
		}
	}
	if _, ok := CommandToCanonical("resume"); ok {
		t.Error("resume accepted")
	}
	if _, ok := CommandFromCanonical(0); ok {
		t.Error("zero command accepted")
	}
}

func TestPartMapping(t *testing.T) {
	items := []DataItem{
		{Type: ItemText, Text: "hi", Metadata: json.RawMessage(`{"lang":"en"}`)},
		{Type: ItemFile, Name: "a.pdf", MimeType: "application/pdf", URI: "https://x/a.pdf"},
		{Type: ItemFile, Name: "b.bin", Bytes: "AAEC"},
		{Type: ItemData, Data: json.RawMessage(`{"k":1}`)},
	}
	parts := PartsFromItems(items)
	want := []translate.Part{
		{Kind: translate.PartText, Text: "hi", Meta: json.RawMessage(`{"lang":"en"}`)},
		{Kind: translate.PartFile, Name: "a.pdf", MIME: "application/pdf", URI: "https://x/a.pdf"},
		{Kind: translate.PartFile, Name: "b.bin", Bytes: "AAEC"},
		{Kind: translate.PartData, Data: json.RawMessage(`{"k":1}`)},
	}
	gotJSON, _ := json.Marshal(parts)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("parts %s\nwant %s", gotJSON, wantJSON)
	}
	back := ItemsFromParts(parts)
	for i := range items {
		if string(back[i].AppendJSON(nil)) != string(items[i].AppendJSON(nil)) {
			t.Errorf("item %d: %s, want %s", i, back[i].AppendJSON(nil), items[i].AppendJSON(nil))
		}
	}
	if _, ok := PartFromItem(&DataItem{Type: "video"}); ok {
		t.Error("unknown item type mapped")
	}
	img := ItemFromPart(&translate.Part{Kind: translate.PartImage, URI: "https://x/i.png", MIME: "image/png"})
	if img.Type != ItemFile || img.URI != "https://x/i.png" {
		t.Errorf("image → %+v", img)
	}
	au := ItemFromPart(&translate.Part{Kind: translate.PartAudio, Bytes: "UklG", Format: "wav"})
	if au.Type != ItemFile || au.MimeType != "audio/wav" {
		t.Errorf("audio → %+v", au)
	}
	// Tool items round-trip.
	call := &translate.Tool{CallID: "c1", Name: "get_weather", Kind: translate.ToolPlugin, Arguments: `{ "city": "Beijing" }`}
	it := ToolItem(call, false)
	if got := string(it.AppendJSON(nil)); got != `{"type":"data","data":{"toolCall":{"id":"c1","name":"get_weather","kind":"plugin","arguments":{"city":"Beijing"}}}}` {
		t.Errorf("tool call item %s", got)
	}
	tool, result, ok := ToolFromItem(&it)
	if !ok || result || tool.Arguments != `{"city":"Beijing"}` || tool.Name != "get_weather" || tool.CallID != "c1" {
		t.Errorf("ToolFromItem %+v %v %v", tool, result, ok)
	}
	res := ToolItem(&translate.Tool{CallID: "c1", Output: "sunny", IsError: true}, true)
	tool, result, ok = ToolFromItem(&res)
	if !ok || !result || tool.Output != "sunny" || !tool.IsError {
		t.Errorf("ToolFromItem result %+v", tool)
	}
	bad := ToolItem(&translate.Tool{Arguments: `{"city":`}, false)
	if tool, _, _ := ToolFromItem(&bad); tool.Arguments != `{"city":` {
		t.Errorf("invalid arguments kept as string: %+v", tool)
	}
}

func TestRequestFromMessage(t *testing.T) {
	b, err := os.ReadFile("testdata/samples/v1-spec-rpc-start-request.json")
	if err != nil {
		t.Fatal(err)
	}
	req, e := ParseRequest(b)
	if e != nil {
		t.Fatal(e)
	}
	r, err := RequestFromMessage(req.Method, req.Message)
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != translate.CommandStart || r.ID != "task-1234" || r.Session != "session-91011" || r.Stream || len(r.Input) != 1 {
		t.Fatalf("request %+v", r)
	}
	in := r.Input[0]
	if in.Role != translate.RoleUser || in.ID != "msg-5678" || in.Text() != "请帮我做一个3天北京文化主体游的行程安排。" {
		t.Errorf("input %+v", in)
	}
	if !strings.Contains(string(in.Ext.For(translate.ProtoAIP)), `"senderId":"agent-leader-aic"`) {
		t.Errorf("ext %s", in.Ext.Raw)
	}
	if _, err := RequestFromMessage(MethodRPC, &Message{Command: CommandStart}); !errors.Is(err, translate.ErrBadRequest) {
		t.Errorf("no taskId: %v", err)
	}
	if _, err := RequestFromMessage(MethodRPC, &Message{Command: "x", TaskID: "t"}); !errors.Is(err, translate.ErrBadRequest) {
		t.Errorf("bad command: %v", err)
	}
	r, _ = RequestFromMessage(MethodRPC, &Message{Command: CommandCancel, TaskID: "t"})
	if r.Command != translate.CommandCancel || len(r.Input) != 0 {
		t.Errorf("cancel %+v", r)
	}
}

func TestMessageFromRequest(t *testing.T) {
	// AIP in, AIP out: the AIP-only fields come back through Ext.
	src := &Message{ID: "msg-1", SentAt: At(time.Now()), SenderRole: RoleLeader, SenderID: "downstream-leader",
		Mentions: []string{"p1"}, Command: CommandStart, CommandParams: json.RawMessage(`{"responseTimeout":5000}`),
		DataItems: []DataItem{TextItem("hello")}, TaskID: "task-1", SessionID: "s-1", GroupID: "g",
		Extra: json.RawMessage(`{"x-trace":"abc"}`)}
	r, err := RequestFromMessage(MethodRPC, src)
	if err != nil {
		t.Fatal(err)
	}
	m, err := MessageFromRequest(r, "bridge-aic")
	if err != nil {
		t.Fatal(err)
	}
	if m.Command != CommandStart || m.TaskID != "task-1" || m.SessionID != "s-1" || m.SenderRole != RoleLeader || m.SenderID != "bridge-aic" {
		t.Errorf("message %+v", m)
	}
	if m.ID == "msg-1" || !strings.HasPrefix(m.ID, "msg-") || m.SentAt.IsZero() {
		t.Errorf("id %s sentAt %v: want new ones", m.ID, m.SentAt)
	}
	if len(m.Mentions) != 1 || m.GroupID != "g" || string(m.CommandParams) != `{"responseTimeout":5000}` || string(m.Extra) != `{"x-trace":"abc"}` {
		t.Errorf("carried fields %+v", m)
	}
	if len(m.DataItems) != 1 || m.DataItems[0].Text != "hello" {
		t.Errorf("items %+v", m.DataItems)
	}
	// Resume: re-stream with lastEventSeq.
	m, err = MessageFromRequest(&translate.Request{Command: translate.CommandResume, ID: "task-1", Session: "s", After: 7}, "bridge")
	if err != nil || m.Command != CommandReStream || string(m.CommandParams) != `{"lastEventSeq":7}` || m.DataItems == nil {
		t.Errorf("resume %+v %v", m, err)
	}
	// A start without ids gets new ones.
	m, err = MessageFromRequest(&translate.Request{Command: translate.CommandStart, Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("x")}}}}, "b")
	if err != nil || !strings.HasPrefix(m.TaskID, "task-") || !strings.HasPrefix(m.SessionID, "session-") {
		t.Errorf("start without ids %+v %v", m, err)
	}
	if _, err := MessageFromRequest(&translate.Request{Command: translate.CommandGet}, "b"); !errors.Is(err, translate.ErrBadRequest) {
		t.Errorf("get without task id: %v", err)
	}
	// The encoded message is a valid v01.00 request.
	m, _ = MessageFromRequest(&translate.Request{Command: translate.CommandContinue, ID: "t", Session: "s", Input: []translate.Message{{Parts: []translate.Part{translate.TextPart("more")}}}}, "b")
	body := AppendMessageRequest(nil, MethodRPC, json.RawMessage(`"r1"`), m)
	if req, e := ParseRequest(body); e != nil || req.Message.DataItems[0].Text != "more" {
		t.Errorf("round trip through ParseRequest: %v %s", e, body)
	}
}

// scenario is a canonical event sequence an agent might produce.
type scenario struct {
	name   string
	events []*translate.Event
	// continueAt inserts a Leader continue message before this event index.
	continueAt int
}

var t0 = time.Date(2025, 9, 1, 12, 0, 0, 0, Beijing)

func scenarios() []scenario {
	st := func(s translate.State) *translate.Event { return &translate.Event{Kind: translate.KindState, State: s} }
	start := func(id string) *translate.Event {
		return &translate.Event{Kind: translate.KindMessageStart, MessageID: id, Message: &translate.Message{ID: id, Role: translate.RoleAssistant}}
	}
	delta := func(id, s string) *translate.Event {
		p := translate.TextPart(s)
		return &translate.Event{Kind: translate.KindContent, MessageID: id, Part: &p, Delta: true}
	}
	end := func(id string) *translate.Event {
		return &translate.Event{Kind: translate.KindMessageEnd, MessageID: id}
	}
	text := func(id string, chunks ...string) []*translate.Event {
		evs := []*translate.Event{start(id)}
		for _, c := range chunks {
			evs = append(evs, delta(id, c))
		}
		return append(evs, end(id))
	}
	cat := func(parts ...any) []*translate.Event {
		var out []*translate.Event
		for _, p := range parts {
			switch p := p.(type) {
			case *translate.Event:
				out = append(out, p)
			case []*translate.Event:
				out = append(out, p...)
			}
		}
		return out
	}
	return []scenario{
		{name: "text-reply", events: cat(st(translate.StateSubmitted), st(translate.StateWorking),
			text("m1", "echo: ", "hel", "lo"), st(translate.StateAwaitingCompletion))},
		{name: "tool-call", events: cat(st(translate.StateWorking),
			&translate.Event{Kind: translate.KindToolCall, MessageID: "c1", Done: true, Tool: &translate.Tool{CallID: "call-1", Name: "get_weather", Kind: translate.ToolPlugin, Arguments: `{"city":"Beijing"}`}},
			&translate.Event{Kind: translate.KindToolResult, MessageID: "c2", Done: true, Tool: &translate.Tool{CallID: "call-1", Name: "get_weather", Kind: translate.ToolPlugin, Output: "sunny"}},
			text("m3", "echo: ", "[tool] weather"), st(translate.StateCompleted))},
		{name: "file-artifact", events: cat(st(translate.StateWorking),
			text("m1", "echo: [file]"),
			&translate.Event{Kind: translate.KindArtifact, Artifact: &translate.Artifact{ID: "report", Name: "report.txt", Last: true,
				Parts: []translate.Part{{Kind: translate.PartFile, Name: "report.txt", MIME: "text/plain", URI: "https://example.com/report.txt"}}}},
			st(translate.StateAwaitingCompletion))},
		{name: "input-request", continueAt: 6, events: cat(st(translate.StateWorking),
			text("m1", "need more ", "input"),
			&translate.Event{Kind: translate.KindInputRequest},
			// continue "more" arrives here
			st(translate.StateWorking), text("m2", "echo: more"), st(translate.StateAwaitingCompletion))},
		{name: "failure", events: cat(st(translate.StateWorking),
			&translate.Event{Kind: translate.KindError, Err: &translate.Error{Code: "AGENT_FAILED", Message: "failed on request"}},
			&translate.Event{Kind: translate.KindState, State: translate.StateFailed, Err: &translate.Error{Code: "AGENT_FAILED", Message: "failed on request"}})},
	}
}

func leaderMessage(cmd Command, id, text string, at time.Time) *Message {
	return &Message{ID: id, SentAt: At(at), SenderRole: RoleLeader, SenderID: "leader-aic", Command: cmd,
		DataItems: []DataItem{TextItem(text)}, TaskID: "task-1", SessionID: "session-1"}
}

// stamp gives each event a time one second after the previous.
func stamp(evs []*translate.Event) {
	for i, ev := range evs {
		ev.Time = t0.Add(time.Duration(i+1) * time.Second)
	}
}

func TestTaskBuilder(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			stamp(sc.events)
			b := NewTaskBuilder("task-1", "session-1")
			b.SenderID = "partner-aic"
			b.AddMessage(leaderMessage(CommandStart, "lm-1", "hello", t0))
			for i, ev := range sc.events {
				if sc.continueAt > 0 && i == sc.continueAt {
					b.AddMessage(leaderMessage(CommandContinue, "lm-2", "more", ev.Time))
				}
				b.Apply(ev)
			}
			task := b.Task()
			var buf bytes.Buffer
			_ = json.Indent(&buf, task.AppendJSON(nil), "", "  ")
			buf.WriteByte('\n')
			checkGolden(t, "builder-"+sc.name+".task.json", buf.Bytes())
			checkTask(t, sc.name, task)
		})
	}
}

// checkTask asserts the essentials of each scenario independently of the
// golden file.
func checkTask(t *testing.T, name string, task *Task) {
	t.Helper()
	partnerText := func() []string {
		var out []string
		for _, m := range task.MessageHistory {
			if m.SenderRole == RolePartner {
				for _, it := range m.DataItems {
					if it.Type == ItemText {
						out = append(out, it.Text)
					}
				}
			}
		}
		return out
	}
	states := func() string {
		var s []string
		for _, st := range task.StatusHistory {
			s = append(s, string(st.State))
		}
		return strings.Join(s, ",")
	}
	switch name {
	case "text-reply":
		if states() != "accepted,working,awaiting-completion" || strings.Join(partnerText(), "|") != "echo: hello" {
			t.Errorf("states %s text %q", states(), partnerText())
		}
		if len(task.Products) != 1 || task.Products[0].ID != "reply-m1" || task.Products[0].DataItems[0].Text != "echo: hello" {
			t.Errorf("products %+v", task.Products)
		}
	case "tool-call":
		if task.Status.State != StateCompleted || len(task.MessageHistory) != 4 {
			t.Fatalf("state %s, %d messages", task.Status.State, len(task.MessageHistory))
		}
		if tool, res, ok := ToolFromItem(&task.MessageHistory[1].DataItems[0]); !ok || res || tool.Name != "get_weather" {
			t.Errorf("tool call item %+v", task.MessageHistory[1].DataItems)
		}
		if tool, res, ok := ToolFromItem(&task.MessageHistory[2].DataItems[0]); !ok || !res || tool.Output != "sunny" {
			t.Errorf("tool result item %+v", task.MessageHistory[2].DataItems)
		}
	case "file-artifact":
		if len(task.Products) != 1 || task.Products[0].ID != "report" || task.Products[0].DataItems[0].URI != "https://example.com/report.txt" {
			t.Errorf("products %+v", task.Products)
		}
	case "input-request":
		if states() != "working,awaiting-input,working,awaiting-completion" {
			t.Errorf("states %s", states())
		}
		q := task.StatusHistory[1].DataItems
		if len(q) != 1 || q[0].Text != "need more input" {
			t.Errorf("question %+v", q)
		}
		if len(task.Products) != 1 || task.Products[0].DataItems[0].Text != "echo: more" {
			t.Errorf("reply product %+v", task.Products)
		}
	case "failure":
		if states() != "working,failed" {
			t.Errorf("states %s", states())
		}
		it := task.Status.DataItems
		if len(it) != 1 || it[0].Text != "failed on request" || string(it[0].Metadata) != `{"code":"AGENT_FAILED"}` {
			t.Errorf("failure items %+v", it)
		}
	}
}

// TestStreamRoundTrip encodes each scenario as an AIP stream, then decodes
// it as a Leader would: the frames and the events are goldens, and the
// essentials are checked.
func TestStreamRoundTrip(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			stamp(sc.events)
			enc := NewStreamEncoder(json.RawMessage(`"req-1"`), "task-1", "session-1")
			enc.Builder().SenderID = "partner-aic"
			enc.Builder().AddMessage(leaderMessage(CommandStart, "lm-1", "hello", t0))
			var wire []byte
			for i, ev := range sc.events {
				if sc.continueAt > 0 && i == sc.continueAt {
					enc.Builder().AddMessage(leaderMessage(CommandContinue, "lm-2", "more", ev.Time))
				}
				wire = enc.AppendEvent(wire, ev, uint64(i+1))
			}
			checkGolden(t, "stream-"+sc.name+".wire.sse", wire)
			for _, line := range bytes.Split(bytes.TrimSpace(wire), []byte("\n\n")) {
				if !bytes.HasPrefix(line, []byte("data: {")) || bytes.Count(line, []byte("\n")) != 0 || !json.Valid(line[6:]) {
					t.Errorf("frame not one compact data line: %q", line)
				}
			}
			evs, err := translate.Collect(NewStreamDecoder(bytes.NewReader(wire), nil, 0))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "stream-"+sc.name+".events.jsonl", eventLines(t, evs))
			var text strings.Builder
			var last translate.State
			var tools, artifacts int
			var prevSeq uint64
			for _, ev := range evs {
				if ev.Seq < prevSeq {
					t.Errorf("seq went back: %d after %d", ev.Seq, prevSeq)
				}
				prevSeq = ev.Seq
				switch ev.Kind {
				case translate.KindContent:
					text.WriteString(ev.Part.Text)
				case translate.KindState:
					last = ev.State
				case translate.KindToolCall, translate.KindToolResult:
					tools++
				case translate.KindArtifact:
					artifacts++
				}
			}
			want := map[string]struct {
				state     translate.State
				text      string
				tools     int
				artifacts int
			}{
				"text-reply":    {translate.StateAwaitingCompletion, "echo: hello", 0, 0},
				"tool-call":     {translate.StateCompleted, "echo: [tool] weather", 2, 0},
				"file-artifact": {translate.StateAwaitingCompletion, "echo: [file]", 0, 1},
				"input-request": {translate.StateAwaitingCompletion, "need more inputecho: more", 0, 0},
				"failure":       {translate.StateFailed, "", 0, 0},
			}[sc.name]
			if last != want.state || text.String() != want.text || tools != want.tools || artifacts != want.artifacts {
				t.Errorf("decoded state %s text %q tools %d artifacts %d; want %+v", last, text.String(), tools, artifacts, want)
			}
		})
	}
}

func TestStreamReplay(t *testing.T) {
	sc := scenarios()[0]
	stamp(sc.events)
	full := NewStreamEncoder(json.RawMessage(`1`), "task-1", "session-1")
	var all []byte
	for i, ev := range sc.events {
		all = full.AppendEvent(all, ev, uint64(i+1))
	}
	// Replaying the log after seq 2 gives exactly the frames after seq 2,
	// with the re-stream request's id.
	re := NewStreamEncoder(json.RawMessage(`"re"`), "task-1", "session-1")
	re.After = 2
	var tail []byte
	for i, ev := range sc.events {
		tail = re.AppendEvent(tail, ev, uint64(i+1))
	}
	frames := bytes.Split(bytes.TrimSpace(all), []byte("\n\n"))
	want := bytes.ReplaceAll(bytes.Join(frames[2:], []byte("\n\n")), []byte(`"id":1,`), []byte(`"id":"re",`))
	if !bytes.Equal(bytes.TrimSpace(tail), want) {
		t.Errorf("replay\n%s\nwant\n%s", tail, want)
	}
}

func TestStreamDecodeSamples(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "samples", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Start stream: Task(working), two chunks of one product, status.
	d := NewStreamDecoder(bytes.NewReader(read("v1-derived-stream-start-events.wire.sse")), nil, 0)
	evs, err := translate.Collect(d)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(evs []*translate.Event) string {
		var s []string
		for _, ev := range evs {
			s = append(s, fmt.Sprintf("%s@%d", ev.Kind, ev.Seq))
		}
		return strings.Join(s, " ")
	}
	if got := kinds(evs); got != "state@1 artifact@2 artifact@3 state@4" {
		t.Fatalf("events %s", got)
	}
	if d.LastSeq() != 4 || !evs[2].Artifact.Append || !evs[2].Artifact.Last || evs[1].Artifact.Append {
		t.Errorf("lastSeq %d, chunks %+v %+v", d.LastSeq(), evs[1].Artifact, evs[2].Artifact)
	}
	// Re-stream after 2 with the same tracker: only seq 3 and 4, and a
	// repeated frame is dropped.
	tr := NewTracker()
	first := NewStreamDecoder(bytes.NewReader(bytes.SplitAfter(read("v1-derived-stream-start-events.wire.sse"), []byte("\n\n"))[0]), tr, 0)
	if _, err := translate.Collect(first); err != nil {
		t.Fatal(err)
	}
	restream := append(read("v1-derived-stream-restream-events.wire.sse"), read("v1-derived-stream-restream-events.wire.sse")...)
	d = NewStreamDecoder(bytes.NewReader(restream), tr, 0)
	d.SetLastSeq(2)
	evs, err = translate.Collect(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(evs); got != "artifact@3 state@4" {
		t.Errorf("re-stream events %s", got)
	}
	// The spec's pretty-printed "SSE" is not valid framing: an error, no panic.
	_, err = translate.Collect(NewStreamDecoder(bytes.NewReader(read("v1-spec-stream-start-events.sse-as-printed-in-spec.txt")), nil, 0))
	if !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("printed spec stream: %v", err)
	}
	// An in-stream error frame is a KindError; unknown event types are skipped.
	wire := string(AppendErrorFrame(nil, json.RawMessage(`"2"`), &Error{Code: CodeTaskNotCancelable, Message: "Cannot re-stream: buffer overflow, please restart"}))
	wire = "data: {\"jsonrpc\":\"2.0\",\"id\":\"2\",\"result\":{\"eventSeq\":1,\"eventData\":{\"type\":\"task-status-update\"}}}\r\n\r\n: comment\n\n" + wire
	evs, err = translate.Collect(NewStreamDecoder(strings.NewReader(wire), nil, 0))
	if err != nil || len(evs) != 1 || evs[0].Kind != translate.KindError || evs[0].Err.Code != "-32002" {
		t.Errorf("error frame: %v %s", err, eventLines(t, evs))
	}
	// Garbage ends the stream with ErrMalformed; a cut stream is io.EOF.
	if _, err := translate.Collect(NewStreamDecoder(strings.NewReader("data: [DONE]\n\n"), nil, 0)); !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("garbage: %v", err)
	}
	d = NewStreamDecoder(strings.NewReader(""), nil, 0)
	if _, err := d.Next(); err != io.EOF {
		t.Errorf("empty stream: %v", err)
	}
}

func TestDecodeRPCResponse(t *testing.T) {
	tr := NewTracker()
	task := &Task{ID: "t", SessionID: "s", Status: TaskStatus{State: StateAccepted, StateChangedAt: At(t0)},
		StatusHistory: []TaskStatus{{State: StateAccepted, StateChangedAt: At(t0)}}}
	body := func() []byte { return AppendObjectResponse(nil, json.RawMessage(`"1"`), task) }
	evs, err := DecodeRPCResponse(200, body(), tr)
	if err != nil || len(evs) != 1 || evs[0].State != translate.StateSubmitted {
		t.Fatalf("first poll %v %s", err, eventLines(t, evs))
	}
	// The same snapshot again: nothing new.
	if evs, _ := DecodeRPCResponse(200, body(), tr); len(evs) != 0 {
		t.Errorf("second poll %s", eventLines(t, evs))
	}
	// Progress: two states, a partner message, a product; the get filter
	// may have trimmed the old history, which must not matter.
	w := TaskStatus{State: StateWorking, StateChangedAt: At(t0.Add(time.Second))}
	ac := TaskStatus{State: StateAwaitingCompletion, StateChangedAt: At(t0.Add(3 * time.Second))}
	task.Status = ac
	task.StatusHistory = []TaskStatus{w, ac}
	task.MessageHistory = []Message{
		{ID: "lm", SenderRole: RoleLeader, DataItems: []DataItem{TextItem("hi")}},
		{ID: "pm", SenderRole: RolePartner, SentAt: At(t0.Add(2 * time.Second)), DataItems: []DataItem{TextItem("echo: hi")}},
	}
	task.Products = []Product{{ID: "p", DataItems: []DataItem{TextItem("part 1")}}}
	evs, _ = DecodeRPCResponse(200, body(), tr)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Kind.String())
	}
	if strings.Join(got, " ") != "state message_start content message_end artifact state" {
		t.Errorf("progress events %v", got)
	}
	// The product grows: an Append chunk with only the new item.
	task.Products[0].DataItems = append(task.Products[0].DataItems, TextItem("part 2"))
	evs, _ = DecodeRPCResponse(200, body(), tr)
	if len(evs) != 1 || !evs[0].Artifact.Append || len(evs[0].Artifact.Parts) != 1 || evs[0].Artifact.Parts[0].Text != "part 2" || !evs[0].Artifact.Last {
		t.Errorf("grown product %s", eventLines(t, evs))
	}
	// Errors in every shape the peers send.
	errs := []struct {
		status int
		body   string
		code   string
		retry  bool
	}{
		{200, `{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"Task not found"},"result":null}`, "-32001", false},
		{404, `{"detail":{"code":-32001,"message":"Stream not found: t"}}`, "-32001", false},
		{200, `{"detail":{"code":-32602,"message":"bad"}}`, "-32602", false},
		{422, `{"detail":[{"loc":["body","params"],"msg":"Field required","type":"missing"}]}`, translate.CodeBadRequest, false},
		{500, `Internal Server Error`, translate.CodeUpstreamError, true},
		{503, ``, translate.CodeUpstreamError, true},
		{500, `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`, "-32603", true},
	}
	for _, e := range errs {
		evs, err := DecodeRPCResponse(e.status, []byte(e.body), NewTracker())
		if err != nil || len(evs) != 1 || evs[0].Kind != translate.KindError || evs[0].Err.Code != e.code || evs[0].Err.Retryable != e.retry || evs[0].Err.Message == "" {
			t.Errorf("%d %s: %v %s", e.status, e.body, err, eventLines(t, evs))
		}
	}
	if _, err := DecodeRPCResponse(200, []byte(`{"jsonrpc":"2.0","id":"1","result":{"success":true}}`), tr); !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("non-task result: %v", err)
	}
	if _, err := DecodeRPCResponse(200, []byte(`<html>`), tr); !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("html: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	e := ErrorFromCanonical(&translate.Error{Code: translate.CodeUpstreamUnavailable, Message: "breaker open"})
	if e.Code != CodeInternalError || string(e.Data) != `{"code":"UPSTREAM_UNAVAILABLE","details":"breaker open"}` {
		t.Errorf("%+v %s", e, e.Data)
	}
	e = ErrorFromCanonical(&translate.Error{Code: "-32001"})
	if e.Code != CodeTaskNotFound || e.Message != "Task not found" {
		t.Errorf("%+v", e)
	}
	if c := ErrorToCanonical(NewError(CodeTaskNotFound, "task-x")); c.Code != "-32001" || c.Message != "Task not found: task-x" {
		t.Errorf("%+v", c)
	}
	for _, code := range []int{CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams, CodeInternalError,
		CodeTaskNotFound, CodeTaskNotCancelable, CodeNotificationNotSupported, CodeUnsupportedOperation,
		CodeContentTypeNotSupported, CodeInvalidAgentResponse, CodeGroupNotSupported, CodeAuthenticationRequired,
		CodeAuthorizationFailed, CodeAccessTokenInvalid} {
		if ErrorName(code) == "" || strings.HasSuffix(ErrorMessage(code), "error") && code > -32600 && code != CodeInternalError {
			t.Errorf("code %d: %q %q", code, ErrorName(code), ErrorMessage(code))
		}
	}
}

func TestFilterHistory(t *testing.T) {
	b, _ := os.ReadFile("testdata/samples/v1-spec-rpc-get-response-failed-with-histories.json")
	r, err := DecodeResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	task, err := DecodeTask(r.Result)
	if err != nil {
		t.Fatal(err)
	}
	// 04:00 UTC is 12:00 Beijing: newer are msg-6789 (12:02) and msg-9012 (12:06).
	since, _ := ParseTimestamp("2025-09-01T04:00:00.000Z")
	f := FilterHistory(task, GetParams{LastMessageSentAt: since, LastStateChangedAt: since})
	if len(f.MessageHistory) != 2 || f.MessageHistory[0].ID != "msg-6789" {
		t.Errorf("messages %d", len(f.MessageHistory))
	}
	if len(f.StatusHistory) != 2 || f.StatusHistory[0].State != StateAwaitingCompletion {
		t.Errorf("statuses %+v", f.StatusHistory)
	}
	if len(task.MessageHistory) != 3 {
		t.Error("FilterHistory changed its input")
	}
}

func TestDetectVersion(t *testing.T) {
	for body, want := range map[string]string{
		`{"params":{"message":{"type":"message"}}}`:      "01.00",
		`{"params":{"message":{"type":"task-command"}}}`: "02",
		`{"params":{"command":{"type":"task-command"}}}`: "02",
		`{"params":{"message":{}}}`:                      "01.00",
		`{"params":{}}`:                                  "",
	} {
		if got := DetectVersion([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

func TestUnknownFieldsSurvive(t *testing.T) {
	in := `{"type":"task","id":"t","x-a":{"b":[1,2]},"status":{"state":"working","stateChangedAt":"2025-09-01T12:00:00+08:00","x-s":1},"products":[{"id":"p","dataItems":[{"type":"file","uri":"u","x-i":true,"metadata":{"m":1}}],"x-p":"p"}],"sessionId":"s"}`
	obj, err := DecodeObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out := obj.AppendJSON(nil)
	if !bytes.Contains(out, []byte(`"x-a":{"b":[1,2]}`)) || !bytes.Contains(out, []byte(`"x-s":1`)) || !bytes.Contains(out, []byte(`"x-i":true`)) || !bytes.Contains(out, []byte(`"x-p":"p"`)) {
		t.Errorf("lost unknown members: %s", out)
	}
	assertSameJSON(t, []byte(in), out)
}

func TestFailedStatusCodeAfterAReasonText(t *testing.T) {
	st := &TaskStatus{State: StateFailed, DataItems: []DataItem{
		TextItem("failed on request"),
		ErrorItem(&translate.Error{Code: "AGENT_FAILED", Message: "failed on request"}),
	}}
	evs := NewTracker().StatusEvents(st)
	if len(evs) != 1 || evs[0].Err == nil || evs[0].Err.Code != "AGENT_FAILED" || evs[0].Err.Message != "failed on request" {
		t.Fatalf("%+v", evs)
	}
	plain := NewTracker().StatusEvents(&TaskStatus{State: StateFailed, DataItems: []DataItem{TextItem("boom")}})
	if plain[0].Err.Code != CodeTaskFailed || plain[0].Err.Message != "boom" {
		t.Fatalf("%+v", plain[0].Err)
	}
}

// BenchmarkTaskBuilderDeltas: a reply of many text deltas folds in linear
// time (it was quadratic string concatenation).
func BenchmarkTaskBuilderDeltas(b *testing.B) {
	chunk := translate.TextPart(strings.Repeat("x", 64))
	b.ReportAllocs()
	for b.Loop() {
		tb := NewTaskBuilder("t", "s")
		tb.Apply(&translate.Event{Kind: translate.KindMessageStart, MessageID: "m", Message: &translate.Message{ID: "m", Role: translate.RoleAssistant}})
		for i := 0; i < 1000; i++ {
			tb.Apply(&translate.Event{Kind: translate.KindContent, MessageID: "m", Part: &chunk, Delta: true})
		}
		if n := len(tb.Task().MessageHistory[0].DataItems[0].Text); n != 64000 {
			b.Fatalf("text of %d bytes", n)
		}
	}
}

func TestTaskBuilderDeltasAccumulate(t *testing.T) {
	tb := NewTaskBuilder("t", "s")
	tb.Apply(&translate.Event{Kind: translate.KindMessageStart, MessageID: "m", Message: &translate.Message{ID: "m", Role: translate.RoleAssistant}})
	var want strings.Builder
	var seen []string
	for i := 0; i < 50; i++ {
		p := translate.TextPart(fmt.Sprint(i, ","))
		want.WriteString(p.Text)
		tb.Apply(&translate.Event{Kind: translate.KindContent, MessageID: "m", Part: &p, Delta: true})
		seen = append(seen, tb.Task().MessageHistory[0].DataItems[0].Text)
	}
	if got := tb.Task().MessageHistory[0].DataItems[0].Text; got != want.String() {
		t.Fatalf("%q", got)
	}
	// Earlier snapshots keep their value: the bytes behind them never change.
	if seen[0] != "0," || seen[9] != "0,1,2,3,4,5,6,7,8,9," {
		t.Fatalf("an earlier snapshot changed: %q %q", seen[0], seen[9])
	}
	// A full value replaces what the deltas built, and deltas start anew.
	full := translate.TextPart("whole")
	tb.Apply(&translate.Event{Kind: translate.KindContent, MessageID: "m", Part: &full, Done: true})
	more := translate.TextPart("+")
	tb.Apply(&translate.Event{Kind: translate.KindContent, MessageID: "m", Part: &more, Delta: true})
	if got := tb.Task().MessageHistory[0].DataItems[0].Text; got != "whole+" {
		t.Fatalf("after a full value: %q", got)
	}
}
