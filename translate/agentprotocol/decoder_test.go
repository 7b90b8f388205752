package agentprotocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

func TestDecodeErrors(t *testing.T) {
	d := NewEventDecoder(DecoderOptions{})
	for _, bad := range []string{``, `nope`, `[1]`, `"x"`, `{"type":`} {
		if _, err := d.Decode(nil, []byte(bad)); !errors.Is(err, translate.ErrMalformed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := d.DecodeList(nil, []byte(`{"a":`)); !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("list: %v", err)
	}
	if _, err := d.DecodeList(nil, []byte(`7`)); !errors.Is(err, translate.ErrMalformed) {
		t.Errorf("list: %v", err)
	}
}

func TestDecodeTracksIDsAndSettles(t *testing.T) {
	d := newTestEventDecoder(DecoderOptions{})
	evs, err := d.DecodeList(nil, []byte(`[{"id":3,"type":"text_output","content":"a"},{"id":9,"type":"wait_for_input","request_keys":{"input":"q?"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if d.LastID() != 9 || !d.Settled() || d.Done() {
		t.Fatalf("last id %d settled %v done %v", d.LastID(), d.Settled(), d.Done())
	}
	var ir *translate.Event
	for _, ev := range evs {
		if ev.Kind == translate.KindInputRequest {
			ir = ev
		}
	}
	if ir == nil || len(ir.Parts) != 1 || ir.Parts[0].Text != "q?" {
		t.Fatalf("input request: %+v", ir)
	}
	// The continuation decodes on the same decoder.
	evs, _ = d.Decode(nil, []byte(`{"id":10,"type":"request_completed","finish_reason":"canceled"}`))
	if last := evs[len(evs)-1]; last.State != translate.StateCanceled || !d.Done() {
		t.Fatalf("after resume: %+v", last)
	}
	// Nothing after the end.
	if evs, _ := d.Decode(nil, []byte(`{"id":11,"type":"text_output","content":"x"}`)); len(evs) != 0 {
		t.Fatalf("decoded after the end: %v", evs)
	}
}

func TestDecodeToolPairing(t *testing.T) {
	d := newTestEventDecoder(DecoderOptions{})
	var evs []*translate.Event
	for _, obj := range []string{
		`{"id":1,"type":"tool_call","function_name":"a","args":{}}`,
		`{"id":2,"type":"tool_call","function_name":"b","args":"raw"}`,
		`{"id":3,"type":"tool_result","function_name":"b","text_result":"B"}`,
		`{"id":4,"type":"tool_error","content":"A failed"}`,
	} {
		evs, _ = d.Decode(evs, []byte(obj))
	}
	var calls, results []*translate.Tool
	for _, ev := range evs {
		switch ev.Kind {
		case translate.KindToolCall:
			calls = append(calls, ev.Tool)
		case translate.KindToolResult:
			results = append(results, ev.Tool)
		}
	}
	if len(calls) != 2 || len(results) != 2 {
		t.Fatalf("calls %d results %d", len(calls), len(results))
	}
	if calls[1].Arguments != "raw" || results[0].CallID != calls[1].CallID || results[1].CallID != calls[0].CallID || results[1].Name != "a" || !results[1].IsError {
		t.Errorf("pairing: calls %+v %+v results %+v %+v", calls[0], calls[1], results[0], results[1])
	}
}

func TestStreamDecoderIncomplete(t *testing.T) {
	s := newTestStreamDecoder(strings.NewReader("id: 4\ndata: {\"id\":4,\"type\":\"text_output\",\"content\":\"x\"}\n\n"), DecoderOptions{})
	evs, err := collect(s)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.State != translate.StateCanceled || last.Err == nil || last.Err.Code != translate.CodeStreamIncomplete {
		t.Fatalf("last: %+v", last)
	}
	if s.LastEventID() != "4" || s.Decoder().LastID() != 4 {
		t.Errorf("ids %q %d", s.LastEventID(), s.Decoder().LastID())
	}
}

// TestEncoderMapping covers the choices the goldens do not show one by one.
func TestEncoderMapping(t *testing.T) {
	text := func(s string, delta bool) *translate.Event {
		p := translate.TextPart(s)
		return &translate.Event{Kind: translate.KindContent, MessageID: "m", Part: &p, Delta: delta}
	}
	t.Run("snapshots send only what they add", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		var out []byte
		for i, ev := range []*translate.Event{text("ab", false), text("abc", false), text("abc", false), text("x", false)} {
			out = e.Encode(out, ev, uint64(i+1))
		}
		if e.Reply() != "abcx" {
			t.Errorf("reply %q", e.Reply())
		}
	})
	t.Run("first event starts the turn", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{Dialect: DialectRun})
		out := e.Encode(nil, text("a", true), 7)
		var types []string
		for obj := range Objects(out) {
			types = append(types, string(mustGet(obj, "type"))+"@"+string(mustGet(obj, "id")))
		}
		if strings.Join(types, ",") != "run_started@7,text_output@7" {
			t.Errorf("got %v", types)
		}
	})
	t.Run("user and reasoning text is not written", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		out := e.Encode(nil, &translate.Event{Kind: translate.KindMessageStart, MessageID: "m", Message: &translate.Message{ID: "m", Type: "reasoning", Role: translate.RoleAssistant}}, 1)
		out = e.Encode(out, text("thinking", true), 2)
		if strings.Contains(string(out), "thinking") {
			t.Errorf("reasoning written: %s", out)
		}
	})
	t.Run("rejected is an error", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		out := e.Encode(nil, &translate.Event{Kind: translate.KindState, State: translate.StateRejected, Parts: []translate.Part{translate.TextPart("no")}}, 1)
		if !strings.Contains(string(out), `"finish_reason":"error","error":{"message":"no"}`) || !e.Done() {
			t.Errorf("got %s", out)
		}
		if more := e.Encode(nil, text("late", true), 2); len(more) != 0 {
			t.Errorf("wrote after the end: %s", more)
		}
	})
	t.Run("finish after error event", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		out := e.Encode(nil, &translate.Event{Kind: translate.KindError, Err: &translate.Error{Code: "X", Message: "boom"}}, 1)
		out = e.Finish(out, nil, 2)
		if !strings.Contains(string(out), `"finish_reason":"error","error":{"code":"X","message":"boom"}`) {
			t.Errorf("got %s", out)
		}
	})
	t.Run("finish while waiting writes nothing", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		e.Encode(nil, &translate.Event{Kind: translate.KindState, State: translate.StateInputRequired}, 1)
		if out := e.Finish(nil, nil, 2); len(out) != 0 || !e.Settled() || e.Done() {
			t.Errorf("got %s", out)
		}
	})
	t.Run("timestamp", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		ev := &translate.Event{Kind: translate.KindState, State: translate.StateSubmitted}
		ev.Time = ev.Time.AddDate(2025, 2, 20)
		if out := e.Encode(nil, ev, 1); !strings.Contains(string(out), `"timestamp":"2026-03-21T00:00:00Z"`) {
			t.Errorf("got %s", out)
		}
	})
}

func TestAppendHTTPError(t *testing.T) {
	if got := string(AppendHTTPError(nil, "BAD_REQUEST", "no \"input\"")); got != `{"detail":"no \"input\"","code":"BAD_REQUEST"}` {
		t.Errorf("got %s", got)
	}
}
