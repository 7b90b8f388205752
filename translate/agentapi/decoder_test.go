package agentapi

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentbridge/bridge/internal/sse"
	"github.com/agentbridge/bridge/translate"
)

// Short wire objects for building streams inline.
const (
	respCreated    = `{"sequence_number":0,"object":"response","status":"created","id":"r1"}`
	respInProgress = `{"sequence_number":1,"object":"response","status":"in_progress","id":"r1"}`
	respCompleted  = `{"sequence_number":9,"object":"response","status":"completed","id":"r1","output":null,"usage":null}`
)

func sseOf(objs ...string) string {
	var b strings.Builder
	for _, o := range objs {
		b.WriteString("data: ")
		b.WriteString(o)
		b.WriteString("\n\n")
	}
	return b.String()
}

func msgFrame(id, typ, role, status string) string {
	return fmt.Sprintf(`{"object":"message","status":%q,"id":%q,"type":%q,"role":%q,"content":null}`, status, id, typ, role)
}

func textFrame(msgID string, index int, status string, delta bool, text string) string {
	return fmt.Sprintf(`{"object":"content","status":%q,"type":"text","index":%d,"delta":%t,"msg_id":%q,"text":%q}`,
		status, index, delta, msgID, text)
}

func dataFrame(msgID, status, data string) string {
	return fmt.Sprintf(`{"object":"content","status":%q,"type":"data","index":0,"delta":false,"msg_id":%q,"data":%s}`,
		status, msgID, data)
}

// describe renders an event in one short line for table tests.
func describe(ev *translate.Event) string {
	var s string
	switch ev.Kind {
	case translate.KindState:
		s = "state " + string(ev.State)
		if ev.Err != nil {
			s += " err=" + ev.Err.Code + ":" + ev.Err.Message
		}
	case translate.KindMessageStart:
		s = fmt.Sprintf("start %s %s %s", ev.Message.ID, ev.Message.Role, ev.Message.Type)
	case translate.KindMessageEnd:
		s = fmt.Sprintf("end %s %s parts=%d", ev.Message.ID, ev.Message.Type, len(ev.Message.Parts))
		if t := ev.Message.Text(); t != "" {
			s += " text=" + t
		}
	case translate.KindContent:
		s = fmt.Sprintf("content %s#%d %s=%s%s", ev.MessageID, ev.Index, ev.Part.Kind, ev.Part.Text, ev.Part.Data)
	case translate.KindToolCall, translate.KindToolResult:
		t := ev.Tool
		s = fmt.Sprintf("%s %s %s %s %s args=%s out=%s", ev.Kind, ev.MessageID, t.Kind, t.CallID, t.Name, t.Arguments, t.Output)
		if t.Server != "" {
			s += " server=" + t.Server
		}
	case translate.KindArtifact:
		s = fmt.Sprintf("artifact %s#%d %s %s", ev.MessageID, ev.Index, ev.Artifact.Name, ev.Artifact.Parts[0].URI)
		if ev.Artifact.Last {
			s += " last"
		}
	case translate.KindInputRequest:
		s = fmt.Sprintf("ask %s %s", ev.MessageID, translate.PartsText(ev.Parts))
	case translate.KindUsage:
		s = "usage " + string(ev.Data)
	case translate.KindError:
		s = "error " + ev.Err.Code + ":" + ev.Err.Message
	default:
		s = ev.Kind.String()
	}
	if ev.Delta {
		s += " delta"
	}
	if ev.Done {
		s += " done"
	}
	if !ev.Ext.IsZero() {
		s += " ext=" + string(ev.Ext.Raw)
	}
	return s
}

const eofCanceled = "state canceled err=STREAM_INCOMPLETE:stream ended before a terminal response"

func TestDecoderQuirks(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "no space after data:",
			in:   "data:" + respCreated + "\n\ndata:" + respInProgress + "\n\ndata:" + respCompleted + "\n\n",
			want: []string{"state submitted", "state working", "state completed"},
		},
		{
			name: "[DONE] lines are ignored",
			in:   sseOf(respCreated, "[DONE]", respInProgress, respCompleted, "[DONE]"),
			want: []string{"state submitted", "state working", "state completed"},
		},
		{
			name: "CRLF line ends",
			in:   strings.ReplaceAll(sseOf(respCreated, textFrame("m1", 0, "in_progress", true, "Hi"), respCompleted), "\n", "\r\n"),
			want: []string{"state submitted", "start m1 assistant message", "content m1#0 text=Hi delta", "state completed"},
		},
		{
			name: "comments and blank lines",
			in:   ": keep-alive\n\n\n\n" + sseOf(respCreated) + ": hi\n" + sseOf(respCompleted),
			want: []string{"state submitted", "state completed"},
		},
		{
			name: "error frame without object",
			in:   sseOf(`{"error": "Task None:None is already in RUNNING state."}`, respCreated),
			want: []string{
				"error UPSTREAM_ERROR:Task None:None is already in RUNNING state.",
				"state failed err=UPSTREAM_ERROR:Task None:None is already in RUNNING state.",
			},
		},
		{
			name: "error frame of a custom endpoint",
			in:   sseOf(`{"error":"boom","error_type":"ValueError","message":"Error in streaming generator"}`),
			want: []string{"error ValueError:boom", "state failed err=ValueError:boom"},
		},
		{
			name: "EOF without terminal",
			in:   sseOf(respCreated, respInProgress, textFrame("m1", 0, "in_progress", true, "Hi")),
			want: []string{"state submitted", "state working", "start m1 assistant message", "content m1#0 text=Hi delta", eofCanceled},
		},
		{
			name: "empty stream",
			in:   "",
			want: []string{eofCanceled},
		},
		{
			name: "null msg_id on completed content",
			in: sseOf(msgFrame("m1", "message", "assistant", "in_progress"),
				textFrame("m1", 0, "in_progress", true, "Hel"),
				`{"object":"content","status":"completed","type":"text","index":null,"delta":null,"msg_id":null,"text":"Hello"}`,
				respCompleted),
			want: []string{"start m1 assistant message", "content m1#0 text=Hel delta", "content m1#0 text=Hello done", "state completed"},
		},
		{
			name: "unannounced msg_id",
			in: sseOf(textFrame("m9", 0, "in_progress", true, "Hi"),
				`{"object":"message","status":"completed","id":"m9","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}]}`,
				respCompleted),
			want: []string{"start m9 assistant message", "content m9#0 text=Hi delta", "end m9 message parts=1 text=Hi", "state completed"},
		},
		{
			name: "content with no msg_id and no message",
			in:   sseOf(`{"object":"content","status":"in_progress","type":"text","text":"x","delta":true}`),
			want: []string{"start msg_dec-1 assistant message", "content msg_dec-1#0 text=x delta", eofCanceled},
		},
		{
			name: "interleaved tool calls",
			in: sseOf(msgFrame("p1", "plugin_call", "assistant", "in_progress"),
				msgFrame("p2", "mcp_call", "assistant", "in_progress"),
				dataFrame("p2", "in_progress", `{"call_id":"c2","name":"b","arguments":"","server_label":"srv"}`),
				dataFrame("p1", "in_progress", `{"call_id":"c1","name":"a","arguments":""}`),
				dataFrame("p1", "completed", `{"call_id":"c1","name":"a","arguments":"{}"}`),
				dataFrame("p2", "completed", `{"call_id":"c2","name":"b","arguments":"{\"x\":1}","server_label":"srv"}`),
				respCompleted),
			want: []string{
				"start p1 assistant plugin_call",
				"start p2 assistant mcp_call",
				"tool_call p2 mcp c2 b args= out= server=srv",
				"tool_call p1 plugin c1 a args= out=",
				"tool_call p1 plugin c1 a args={} out= done",
				`tool_call p2 mcp c2 b args={"x":1} out= server=srv done`,
				"state completed",
			},
		},
		{
			name: "completed-only plugin_call_output with unmatched call_id",
			in: sseOf(`{"object":"message","status":"completed","id":"o1","type":"plugin_call_output","role":"tool","content":[{"object":"content","status":"completed","type":"data","data":{"call_id":"nobody","name":"t","output":"42"}}]}`,
				respCompleted),
			want: []string{
				"start o1 tool plugin_call_output",
				"tool_result o1 plugin nobody t args= out=42 done",
				"end o1 plugin_call_output parts=1",
				"state completed",
			},
		},
		{
			name: "function call arguments as an object",
			in: sseOf(msgFrame("f1", "function_call", "assistant", "in_progress"),
				dataFrame("f1", "completed", `{"call_id":"c","name":"n","arguments":{"a": 1}}`)),
			want: []string{"start f1 assistant function_call", `tool_call f1 function c n args={"a":1} out= done`, eofCanceled},
		},
		{
			name: "index gaps",
			in: sseOf(msgFrame("m1", "message", "assistant", "in_progress"),
				textFrame("m1", 0, "in_progress", true, "think"),
				textFrame("m1", 2, "in_progress", true, "say"),
				textFrame("m1", 2, "completed", false, "say it"),
				respCompleted),
			want: []string{
				"start m1 assistant message",
				"content m1#0 text=think delta",
				"content m1#2 text=say delta",
				"content m1#2 text=say it done",
				"state completed",
			},
		},
		{
			name: "duplicate in_progress snapshots",
			in: sseOf(msgFrame("p1", "plugin_call", "assistant", "in_progress"),
				msgFrame("p1", "plugin_call", "assistant", "in_progress"),
				dataFrame("p1", "in_progress", `{"call_id":"c1","name":"a","arguments":"{}"}`),
				dataFrame("p1", "in_progress", `{"call_id":"c1","name":"a","arguments":"{}"}`),
				dataFrame("p1", "completed", `{"call_id":"c1","name":"a","arguments":"{}"}`),
				`{"object":"message","status":"completed","id":"p1","type":"plugin_call","role":"assistant","content":[{"type":"data","data":{"call_id":"c1","name":"a","arguments":"{}"}}]}`,
				respCompleted),
			want: []string{
				"start p1 assistant plugin_call",
				"tool_call p1 plugin c1 a args={} out=",
				"tool_call p1 plugin c1 a args={} out= done",
				"end p1 plugin_call parts=1",
				"state completed",
			},
		},
		{
			name: "unknown message type passes through",
			in: sseOf(`{"object":"message","status":"in_progress","id":"a1","type":"a2ui_response","role":"assistant","content":null,"metadata":{"k":1},"surprise":true}`,
				dataFrame("a1", "completed", `{"x":1}`),
				`{"object":"message","status":"completed","id":"a1","type":"a2ui_response","role":"assistant","content":[{"type":"data","data":{"x":1}}]}`),
			want: []string{
				`start a1 assistant a2ui_response ext={"metadata":{"k":1},"surprise":true}`,
				`content a1#0 data={"x":1} done`,
				"end a1 a2ui_response parts=1",
				eofCanceled,
			},
		},
		{
			name: "non-JSON lines",
			in:   sseOf(respCreated, "not json", "{broken", `"a string"`, `[1,2]`, `{"no":"object"}`, respCompleted),
			want: []string{"state submitted", "state completed"},
		},
		{
			name: "unknown object and content type",
			in:   sseOf(`{"object":"thing"}`, `{"object":"content","type":"hologram","msg_id":"m"}`, respCompleted),
			want: []string{"state completed"},
		},
		{
			name: "content after its message completed",
			in: sseOf(msgFrame("m1", "message", "assistant", "in_progress"),
				`{"object":"message","status":"completed","id":"m1","type":"message","role":"assistant","content":[]}`,
				textFrame("m1", 0, "completed", false, "late")),
			want: []string{"start m1 assistant message", "end m1 message parts=0", "content m1#0 text=late done", eofCanceled},
		},
		{
			name: "failed response",
			in:   sseOf(respCreated, `{"object":"response","status":"failed","error":{"code":"AGENT_UNKNOWN_ERROR","message":"bad"}}`),
			want: []string{"state submitted", "state failed err=AGENT_UNKNOWN_ERROR:bad"},
		},
		{
			name: "canceled, rejected, queued, unknown",
			in: sseOf(`{"object":"response","status":"queued"}`, `{"object":"response","status":"unknown"}`,
				`{"object":"response","status":"rejected","error":null}`, `{"object":"response","status":"canceled"}`),
			want: []string{"state rejected err=UPSTREAM_ERROR:request rejected"},
		},
		{
			name: "canceled response",
			in:   sseOf(`{"object":"response","status":"canceled"}`),
			want: []string{"state canceled"},
		},
		{
			name: "incomplete asks the last assistant text",
			in: sseOf(respInProgress, respInProgress, msgFrame("m1", "message", "assistant", "in_progress"),
				textFrame("m1", 0, "in_progress", true, "Which "),
				textFrame("m1", 0, "in_progress", true, "city?"),
				`{"object":"response","status":"incomplete","output":null}`),
			want: []string{
				"state working", "start m1 assistant message", "content m1#0 text=Which  delta", "content m1#0 text=city? delta",
				"ask m1 Which city?", "state input-required",
			},
		},
		{
			name: "incomplete with output and usage",
			in:   sseOf(`{"object":"response","status":"incomplete","usage":{"t":1},"output":[{"object":"message","status":"completed","id":"q1","type":"message","role":"assistant","content":[{"type":"text","text":"Sure?"}]}]}`),
			want: []string{"start q1 assistant message", "end q1 message parts=1 text=Sure?", `usage {"t":1}`, "ask q1 Sure?", "state input-required"},
		},
		{
			name: "final output delivers messages the stream did not complete",
			in: sseOf(msgFrame("m1", "message", "assistant", "in_progress"),
				`{"object":"response","status":"completed","output":[{"object":"message","id":"m1","type":"message","role":"assistant","content":[{"type":"text","text":"A"}]},{"object":"message","id":"m2","role":"assistant","content":[{"type":"text","text":"B"}]}],"usage":{"n": 2}}`),
			want: []string{
				"start m1 assistant message",
				"end m1 message parts=1 text=A",
				"start m2 assistant message",
				"end m2 message parts=1 text=B",
				`usage {"n":2}`,
				"state completed",
			},
		},
		{
			name: "heartbeat message",
			in:   sseOf(`{"object":"message","type":"heartbeat","id":"h","status":"completed"}`, respCompleted),
			want: []string{"heartbeat", "state completed"},
		},
		{
			name: "file content is an artifact",
			in: sseOf(msgFrame("m1", "message", "assistant", "in_progress"),
				`{"object":"content","status":"completed","type":"file","index":1,"msg_id":"m1","file_url":"u","filename":"f.txt","extra":1}`),
			want: []string{"start m1 assistant message", `artifact m1#1 f.txt u last ext={"extra":1}`, eofCanceled},
		},
		{
			name: "frames after the terminal response are not read",
			in:   sseOf(respCompleted, textFrame("m1", 0, "in_progress", true, "late")),
			want: []string{"state completed"},
		},
		{
			name: "docs example without types and ids",
			in: sseOf(`{"status":"created","id":"msg_x","object":"message","type":"assistant"}`,
				`{"status":"in_progress","index":0,"delta":true,"text":"Hello","object":"content"}`),
			want: []string{"start msg_x  assistant", "content msg_x#0 text=Hello delta", eofCanceled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := decodeAll(t, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				got = append(got, describe(ev))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDecoderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(sseOf(respCreated)), iotest.ErrReader(boom))
	d := NewDecoder(r, DecoderOptions{})
	if ev, err := d.Next(); err != nil || ev.State != translate.StateSubmitted {
		t.Fatalf("first: %v %v", ev, err)
	}
	for range 2 {
		if _, err := d.Next(); !errors.Is(err, boom) {
			t.Fatalf("got %v, want wrapped boom", err)
		}
	}
}

func TestDecoderMaxEventSize(t *testing.T) {
	big := textFrame("m1", 0, "in_progress", true, strings.Repeat("x", 200))
	d := NewDecoder(strings.NewReader(sseOf(big)), DecoderOptions{MaxEventSize: 64})
	if _, err := d.Next(); !errors.Is(err, sse.ErrEventTooLarge) {
		t.Fatalf("got %v, want ErrEventTooLarge", err)
	}
}

// TestDecoderEventReuse documents that an event is only valid until the
// next call to Next, and that Clone keeps it.
func TestDecoderEventReuse(t *testing.T) {
	d := NewDecoder(strings.NewReader(sseOf(textFrame("m1", 0, "in_progress", true, "a"), textFrame("m1", 0, "in_progress", true, "b"))), DecoderOptions{})
	var kept []*translate.Event
	for {
		ev, err := d.Next()
		if err != nil {
			break
		}
		kept = append(kept, ev.Clone())
	}
	if kept[1].Part.Text != "a" || kept[2].Part.Text != "b" {
		t.Fatalf("clones changed: %q %q", kept[1].Part.Text, kept[2].Part.Text)
	}
}
