package translate

import (
	"encoding/json"
	"testing"
)

func TestCloneSharesNothing(t *testing.T) {
	p := Part{Kind: PartData, Data: json.RawMessage(`{"a":1}`)}
	ev := &Event{Kind: KindContent, Part: &p, Parts: []Part{TextPart("x")},
		Message: &Message{ID: "m", Parts: []Part{{Kind: PartData, Data: []byte(`{}`)}}, Ext: Ext{Proto: "p", Raw: []byte(`{"k":1}`)}},
		Tool:    &Tool{Name: "t"}, Artifact: &Artifact{Parts: []Part{TextPart("a")}}, Err: &Error{Code: "c"},
		Data: []byte(`{"u":1}`), Ext: Ext{Proto: "p", Raw: []byte(`{"z":1}`)}}
	c := ev.Clone()
	c.Part.Data[2] = 'X'
	c.Parts[0].Text = "changed"
	c.Message.Parts[0].Data[0] = '['
	c.Message.Ext.Raw[0] = '['
	c.Tool.Name = "other"
	c.Artifact.Parts[0].Text = "other"
	c.Err.Code = "other"
	c.Data[0] = '['
	c.Ext.Raw[0] = '['
	if string(p.Data) != `{"a":1}` || ev.Parts[0].Text != "x" || string(ev.Message.Parts[0].Data) != `{}` ||
		string(ev.Message.Ext.Raw) != `{"k":1}` || ev.Tool.Name != "t" || ev.Artifact.Parts[0].Text != "a" ||
		ev.Err.Code != "c" || string(ev.Data) != `{"u":1}` || string(ev.Ext.Raw) != `{"z":1}` {
		t.Fatalf("clone shares memory with the original: %+v", ev)
	}
}

func TestStates(t *testing.T) {
	terminal := map[State]bool{StateCompleted: true, StateFailed: true, StateCanceled: true, StateRejected: true}
	for _, s := range []State{StateSubmitted, StateWorking, StateInputRequired, StateAwaitingCompletion,
		StateCompleted, StateFailed, StateCanceled, StateRejected} {
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		settled := terminal[s] || s == StateInputRequired || s == StateAwaitingCompletion
		if s.Settled() != settled {
			t.Errorf("%s.Settled() = %v", s, s.Settled())
		}
	}
}

func TestKindAndCommandNames(t *testing.T) {
	for k := KindState; k <= KindError; k++ {
		if k.String() == "invalid" || ParseKind(k.String()) != k {
			t.Errorf("kind %d: %q", k, k)
		}
	}
	if Kind(0).String() != "invalid" || ParseKind("nope") != 0 || Kind(200).String() != "invalid" {
		t.Error("invalid kinds")
	}
	for c := CommandStart; c <= CommandResume; c++ {
		if c.String() == "invalid" {
			t.Errorf("command %d has no name", c)
		}
	}
}

func TestPartsText(t *testing.T) {
	ps := []Part{TextPart("a"), {Kind: PartData, Data: []byte(`{}`)}, TextPart("b")}
	if got := PartsText(ps); got != "ab" {
		t.Fatalf("%q", got)
	}
	if PartsText(nil) != "" || PartsText(ps[1:2]) != "" {
		t.Fatal("non-text parts gave text")
	}
	m := Message{Parts: ps[:1]}
	if m.Text() != "a" {
		t.Fatal(m.Text())
	}
}

func TestCollectClonesAndStops(t *testing.T) {
	p := TextPart("x")
	s := NewSliceStream(&Event{Kind: KindContent, Part: &p}, &Event{Kind: KindState, State: StateCompleted})
	evs, err := Collect(s)
	if err != nil || len(evs) != 2 || !evs[1].Terminal() || evs[0].Part == &p {
		t.Fatalf("%v %v", evs, err)
	}
}
