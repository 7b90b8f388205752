package downstream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate"
)

func newTestServer() *Server {
	return New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
}

func textRequest(session, text string) *translate.Request {
	return &translate.Request{Command: translate.CommandStart, Session: session,
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(text)}}}}
}

func TestDetachedTurnLogsEveryEventAndFollowersSeeThem(t *testing.T) {
	s := newTestServer()
	a := refagent.New()
	a.Delay = 5 * time.Millisecond
	route := &Route{Name: "r", Proto: translate.ProtoAgentAPI, Agent: a}
	x := &store.Exchange{}
	if err := s.store.Create(x); err != nil {
		t.Fatal(err)
	}
	var hooked []uint64
	if err := s.runTurn(x.ID, route, textRequest("s", "hi [slow]"), nil, time.Minute, func(ev *translate.Event) {
		hooked = append(hooked, ev.Seq)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.runTurn(x.ID, route, textRequest("s", "again"), nil, 0, nil); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("second turn: %v", err)
	}
	// A follower that joins mid-way, and one that resumes after seq 3.
	var all, tail []*translate.Event
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.follow(ctx, x.ID, 0, nil, func(ev *translate.Event) error { all = append(all, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.follow(ctx, x.ID, 3, nil, func(ev *translate.Event) error { tail = append(tail, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if last := all[len(all)-1]; last.State != translate.StateCompleted {
		t.Fatalf("last event %v %s", last.Kind, last.State)
	}
	for i, ev := range all {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	if len(tail) != len(all)-3 || tail[0].Seq != 4 {
		t.Fatalf("resume after 3 gave %d events from %d; log has %d", len(tail), tail[0].Seq, len(all))
	}
	for deadline := time.Now().Add(time.Second); s.turnRunning(x.ID); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("turn still running")
		}
	}
	if len(hooked) != len(all) {
		t.Fatalf("hook saw %d events, log has %d", len(hooked), len(all))
	}
}

func TestCancelTurnEndsItCanceled(t *testing.T) {
	s := newTestServer()
	a := refagent.New()
	a.Delay = time.Second
	route := &Route{Name: "r", Proto: translate.ProtoAgentAPI, Agent: a}
	x := &store.Exchange{}
	_ = s.store.Create(x)
	if err := s.runTurn(x.ID, route, textRequest("s", "hi [slow]"), nil, 0, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	if !s.cancelTurn(x.ID) {
		t.Fatal("no turn was running")
	}
	if time.Since(start) > 500*time.Millisecond {
		t.Fatalf("cancel took %v", time.Since(start))
	}
	evs, _ := s.store.Events(x.ID, 0)
	last := evs[len(evs)-1]
	if last.State != translate.StateFailed || last.Err == nil || last.Err.Code != "CANCELED" {
		t.Fatalf("last event after cancel: %+v", last)
	}
}

func TestUpstreamThatEndsWithoutStateFailsTheTurn(t *testing.T) {
	s := newTestServer()
	agent := translate.AgentFunc(func(context.Context, *translate.Request) (translate.Stream, error) {
		p := translate.TextPart("partial")
		return translate.NewSliceStream(&translate.Event{Kind: translate.KindContent, Part: &p, Delta: true}), nil
	})
	x := &store.Exchange{}
	_ = s.store.Create(x)
	_ = s.runTurn(x.ID, &Route{Agent: agent}, textRequest("s", "x"), nil, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var last *translate.Event
	if err := s.follow(ctx, x.ID, 0, nil, func(ev *translate.Event) error { last = ev; return nil }); err != nil {
		t.Fatal(err)
	}
	if last.State != translate.StateFailed || last.Err.Code != translate.CodeStreamIncomplete {
		t.Fatalf("%+v", last)
	}
}
