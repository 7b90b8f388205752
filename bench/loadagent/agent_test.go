package loadagent

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

func TestParseMarker(t *testing.T) {
	for _, c := range []struct {
		body    string
		n, size int
	}{
		{`{"text":"` + Marker(1000, 64) + ` xxxx"}`, 1000, 64},
		{`{"text":"[bench events=7]"}`, 7, 0},
		{`{"text":"hello"}`, 0, 0},
	} {
		n, size := parseMarker([]byte(c.body))
		if n != c.n || size != c.size {
			t.Errorf("parseMarker(%s) = %d, %d; want %d, %d", c.body, n, size, c.n, c.size)
		}
	}
}

func TestCanonical(t *testing.T) {
	a := NewCanonical(Options{})
	req := &translate.Request{Input: []translate.Message{{Role: translate.RoleUser,
		Parts: []translate.Part{translate.TextPart(Marker(3, 5) + " pad")}}}}
	s, err := a.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := translate.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var text strings.Builder
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind.String())
		if ev.Kind == translate.KindContent {
			if !ev.Delta || len(ev.Part.Text) != 5 {
				t.Errorf("content event %+v", ev)
			}
			text.WriteString(ev.Part.Text)
		}
	}
	if got := strings.Join(kinds, " "); got != "state message_start content content content message_end state" {
		t.Errorf("kinds %s", got)
	}
	if evs[0].State != translate.StateWorking || evs[len(evs)-1].State != translate.StateCompleted || text.Len() != 15 {
		t.Errorf("states %s…%s, text %q", evs[0].State, evs[len(evs)-1].State, text.String())
	}
	if a.Requests() != 1 {
		t.Errorf("requests %d", a.Requests())
	}
}
