package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentbridge/bridge/translate"
)

// clock is a settable clock for the age bound.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t testing.TB, lim Limits) (*Memory, *clock) {
	t.Helper()
	c := newClock()
	m := NewMemory(lim, c.Now)
	t.Cleanup(func() { m.Close() })
	return m, c
}

func mustCreate(t testing.TB, m Store, x *Exchange) *Exchange {
	t.Helper()
	if err := m.Create(x); err != nil {
		t.Fatalf("Create(%q): %v", x.ID, err)
	}
	return x
}

func textEvent(s string) *translate.Event {
	p := translate.TextPart(s)
	return &translate.Event{Kind: translate.KindContent, MessageID: "m1", Part: &p, Delta: true}
}

func stateEvent(s translate.State) *translate.Event {
	return &translate.Event{Kind: translate.KindState, State: s}
}

func mustAppend(t testing.TB, m Store, id string, ev *translate.Event) uint64 {
	t.Helper()
	seq, err := m.Append(id, ev)
	if err != nil {
		t.Fatalf("Append(%q): %v", id, err)
	}
	return seq
}

func TestCreateGetDuplicate(t *testing.T) {
	m, c := newStore(t, Limits{})
	x := &Exchange{
		ID: "x_1", Downstream: translate.ProtoAIP, Upstream: translate.ProtoAgentAPI,
		ClientID: "task-1", Session: "s1", State: translate.StateSubmitted,
		Request: &translate.Request{Command: translate.CommandStart, Input: []translate.Message{
			{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart("hi")}},
		}},
		Meta:    map[string]string{"k": "v"},
		LastSeq: 42, // ignored: the log starts empty
	}
	mustCreate(t, m, x)
	if !x.Created.Equal(c.Now()) || !x.Updated.Equal(c.Now()) || x.LastSeq != 0 {
		t.Errorf("Create wrote back Created=%v Updated=%v LastSeq=%d", x.Created, x.Updated, x.LastSeq)
	}
	got, err := m.Get("x_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ClientID != "task-1" || got.Session != "s1" || got.State != translate.StateSubmitted ||
		got.Request.LastInput().Text() != "hi" || got.Meta["k"] != "v" || got.LastSeq != 0 {
		t.Errorf("Get = %+v", got)
	}
	if err := m.Create(&Exchange{ID: "x_1"}); err != ErrExists {
		t.Errorf("duplicate Create = %v, want ErrExists", err)
	}
	if _, err := m.Get("x_nope"); err != ErrNotFound {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	if n := m.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
}

func TestCreateAssignsID(t *testing.T) {
	m, _ := newStore(t, Limits{})
	x := mustCreate(t, m, &Exchange{})
	if len(x.ID) != 18 || x.ID[:2] != "x_" {
		t.Fatalf("assigned id %q", x.ID)
	}
	if _, err := m.Get(x.ID); err != nil {
		t.Fatal(err)
	}
	if a, b := NewID(), NewID(); a == b {
		t.Errorf("NewID repeated %q", a)
	}
}

func TestAliasFind(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_a", ClientID: "task-a"})
	mustCreate(t, m, &Exchange{ID: "x_b", ClientID: "task-b"})
	if err := m.Alias("x_a", "aip:task:task-a"); err != nil {
		t.Fatal(err)
	}
	if err := m.Alias("x_a", "agentapi:session:s"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"aip:task:task-a", "agentapi:session:s"} {
		x, err := m.Find(key)
		if err != nil || x.ID != "x_a" {
			t.Errorf("Find(%q) = %v, %v; want x_a", key, x, err)
		}
	}
	// A key points at one exchange: aliasing it again moves it.
	if err := m.Alias("x_b", "agentapi:session:s"); err != nil {
		t.Fatal(err)
	}
	if x, err := m.Find("agentapi:session:s"); err != nil || x.ID != "x_b" {
		t.Errorf("moved alias finds %v, %v; want x_b", x, err)
	}
	if _, err := m.Find("aip:task:nope"); err != ErrNotFound {
		t.Errorf("Find(unknown) = %v, want ErrNotFound", err)
	}
	if err := m.Alias("x_nope", "k"); err != ErrNotFound {
		t.Errorf("Alias(missing id) = %v, want ErrNotFound", err)
	}
	if err := m.Alias("x_a", ""); err == nil {
		t.Error("Alias with an empty key succeeded")
	}
	// An id is not an alias.
	if _, err := m.Find("x_a"); err != ErrNotFound {
		t.Errorf("Find(id) = %v, want ErrNotFound", err)
	}
}

func TestUpdateAtomic(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1", Meta: map[string]string{"n": "0"}})
	const workers, each = 16, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				err := m.Update("x_1", func(x *Exchange) error {
					n, err := strconv.Atoi(x.Meta["n"])
					if err != nil {
						return err
					}
					x.Meta["n"] = strconv.Itoa(n + 1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	x, err := m.Get("x_1")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * each); x.Meta["n"] != want {
		t.Errorf("counter = %s, want %s (lost updates)", x.Meta["n"], want)
	}
}

func TestUpdate(t *testing.T) {
	m, c := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1", State: translate.StateWorking})
	mustAppend(t, m, "x_1", textEvent("a"))

	boom := errors.New("boom")
	err := m.Update("x_1", func(x *Exchange) error {
		x.State = translate.StateFailed
		return boom
	})
	if err != boom {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	if x, _ := m.Get("x_1"); x.State != translate.StateWorking {
		t.Errorf("failed Update stored State %q", x.State)
	}

	c.Advance(time.Second)
	var kept *Exchange
	err = m.Update("x_1", func(x *Exchange) error {
		x.State = translate.StateCompleted
		x.ID = "x_other" // ignored
		x.LastSeq = 99   // ignored
		x.History = append(x.History, translate.Message{Role: translate.RoleAssistant})
		kept = x
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kept.State = translate.StateRejected // fn's copy is not the store's
	x, _ := m.Get("x_1")
	if x.ID != "x_1" || x.LastSeq != 1 || x.State != translate.StateCompleted ||
		len(x.History) != 1 || !x.Updated.Equal(c.Now()) {
		t.Errorf("after Update: %+v", x)
	}
	if err := m.Update("x_nope", func(*Exchange) error { return nil }); err != ErrNotFound {
		t.Errorf("Update(missing) = %v, want ErrNotFound", err)
	}
}

func TestAppendSeqConcurrent(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1"})
	const appenders, each = 8, 500
	var wg sync.WaitGroup
	for w := range appenders {
		wg.Go(func() {
			var last uint64
			for i := range each {
				ev := textEvent(fmt.Sprintf("%d/%d", w, i))
				seq, err := m.Append("x_1", ev)
				if err != nil {
					t.Error(err)
					return
				}
				if seq <= last || ev.Seq != seq || ev.Exchange != "x_1" {
					t.Errorf("appender %d: seq %d after %d, ev.Seq %d", w, seq, last, ev.Seq)
					return
				}
				last = seq
			}
		})
	}
	wg.Wait()
	evs, err := m.Events("x_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != appenders*each {
		t.Fatalf("%d events, want %d", len(evs), appenders*each)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || ev.Exchange != "x_1" {
			t.Fatalf("event %d has seq %d exchange %q", i, ev.Seq, ev.Exchange)
		}
	}
	if x, _ := m.Get("x_1"); x.LastSeq != appenders*each {
		t.Errorf("LastSeq = %d", x.LastSeq)
	}
}

func TestAppendState(t *testing.T) {
	m, c := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1", State: translate.StateSubmitted})
	c.Advance(time.Minute)
	ev := stateEvent(translate.StateWorking)
	mustAppend(t, m, "x_1", ev)
	if !ev.Time.Equal(c.Now()) {
		t.Errorf("zero ev.Time not filled in: %v", ev.Time)
	}
	mustAppend(t, m, "x_1", textEvent("a")) // not a state: State stays
	x, _ := m.Get("x_1")
	if x.State != translate.StateWorking || !x.Updated.Equal(c.Now()) || x.LastSeq != 2 {
		t.Errorf("after Append: State %q Updated %v LastSeq %d", x.State, x.Updated, x.LastSeq)
	}
	stamped := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	ev = &translate.Event{Kind: translate.KindHeartbeat, Time: stamped}
	mustAppend(t, m, "x_1", ev)
	if evs, _ := m.Events("x_1", 2); len(evs) != 1 || !evs[0].Time.Equal(stamped) {
		t.Errorf("event time not kept: %v", evs)
	}
	if _, err := m.Append("x_nope", textEvent("a")); err != ErrNotFound {
		t.Errorf("Append(missing) = %v, want ErrNotFound", err)
	}
}

func TestEventsAfter(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1"})
	if evs, err := m.Events("x_1", 0); err != nil || evs != nil {
		t.Errorf("Events of an empty log = %v, %v", evs, err)
	}
	for i := range 10 {
		mustAppend(t, m, "x_1", textEvent(strconv.Itoa(i+1)))
	}
	for _, after := range []uint64{0, 1, 3, 9, 10, 11, 100} {
		evs, err := m.Events("x_1", after)
		if err != nil {
			t.Fatalf("Events(after %d): %v", after, err)
		}
		want := 0
		if after < 10 {
			want = int(10 - after)
		}
		if len(evs) != want {
			t.Fatalf("Events(after %d) gave %d events, want %d", after, len(evs), want)
		}
		for i, ev := range evs {
			if seq := after + uint64(i) + 1; ev.Seq != seq || ev.Part.Text != strconv.Itoa(int(seq)) {
				t.Errorf("Events(after %d)[%d] = seq %d %q", after, i, ev.Seq, ev.Part.Text)
			}
		}
	}
	if _, err := m.Events("x_nope", 0); err != ErrNotFound {
		t.Errorf("Events(missing) = %v, want ErrNotFound", err)
	}
}

func TestEventsBound(t *testing.T) {
	m, _ := newStore(t, Limits{MaxEventsPerExchange: 5})
	mustCreate(t, m, &Exchange{ID: "x_1"})
	for i := range 12 {
		mustAppend(t, m, "x_1", textEvent(strconv.Itoa(i+1)))
	}
	// Retained: 8..12.
	evs, err := m.Events("x_1", 7)
	if err != nil {
		t.Fatalf("Events(after 7): %v", err)
	}
	if len(evs) != 5 || evs[0].Seq != 8 || evs[4].Seq != 12 || evs[0].Part.Text != "8" {
		t.Errorf("Events(after 7) = %d events from %d", len(evs), evs[0].Seq)
	}
	if evs, err := m.Events("x_1", 10); err != nil || len(evs) != 2 || evs[0].Seq != 11 {
		t.Errorf("Events(after 10) = %v, %v", evs, err)
	}
	for _, after := range []uint64{0, 1, 6} {
		if _, err := m.Events("x_1", after); err != ErrExpired {
			t.Errorf("Events(after %d) = %v, want ErrExpired", after, err)
		}
	}
	if evs, err := m.Events("x_1", 12); err != nil || evs != nil {
		t.Errorf("Events(after last) = %v, %v", evs, err)
	}
}

func TestHistoryBound(t *testing.T) {
	m, _ := newStore(t, Limits{MaxEventsPerExchange: 3})
	var h []translate.Message
	for i := range 5 {
		h = append(h, translate.Message{ID: strconv.Itoa(i)})
	}
	mustCreate(t, m, &Exchange{ID: "x_1", History: h})
	x, _ := m.Get("x_1")
	if len(x.History) != 3 || x.History[0].ID != "2" {
		t.Errorf("History after Create = %v", x.History)
	}
	m.Update("x_1", func(x *Exchange) error {
		x.History = append(x.History, translate.Message{ID: "5"})
		return nil
	})
	x, _ = m.Get("x_1")
	if len(x.History) != 3 || x.History[0].ID != "3" || x.History[2].ID != "5" {
		t.Errorf("History after Update = %v", x.History)
	}
}

func TestCountEviction(t *testing.T) {
	m, _ := newStore(t, Limits{MaxExchanges: 3})
	for _, id := range []string{"x_a", "x_b", "x_c"} {
		mustCreate(t, m, &Exchange{ID: id})
	}
	m.Alias("x_b", "k:b")
	mustAppend(t, m, "x_a", textEvent("a")) // x_a is now newer than x_b and x_c
	m.Update("x_c", func(*Exchange) error { return nil })
	if _, err := m.Get("x_b"); err != nil { // reads do not count as updates
		t.Fatal(err)
	}

	mustCreate(t, m, &Exchange{ID: "x_d"}) // evicts x_b, the least recently updated
	if _, err := m.Get("x_b"); err != ErrNotFound {
		t.Errorf("Get(evicted) = %v, want ErrNotFound", err)
	}
	if _, err := m.Find("k:b"); err != ErrNotFound {
		t.Errorf("alias of an evicted exchange: %v, want ErrNotFound", err)
	}
	mustCreate(t, m, &Exchange{ID: "x_e"}) // evicts x_a (x_c was updated after it)
	for id, want := range map[string]error{"x_a": ErrNotFound, "x_c": nil, "x_d": nil, "x_e": nil} {
		if _, err := m.Get(id); err != want {
			t.Errorf("Get(%s) = %v, want %v", id, err, want)
		}
	}
	if n := m.Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
	// The id of an evicted exchange may be used again.
	mustCreate(t, m, &Exchange{ID: "x_b"})
}

func TestCountEvictionConcurrent(t *testing.T) {
	const max = 50
	m, _ := newStore(t, Limits{MaxExchanges: max})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("x_%d_%d", w, i)
				if err := m.Create(&Exchange{ID: id}); err != nil {
					t.Error(err)
					return
				}
				m.Alias(id, "k:"+id)
				m.Append(id, textEvent("a"))
				m.Append(fmt.Sprintf("x_%d_%d", w, i/2), textEvent("b"))
			}
		})
	}
	wg.Wait()
	if n := m.Len(); n != max {
		t.Errorf("Len = %d, want %d", n, max)
	}
	m.mu.RLock()
	aliases := len(m.aliases)
	m.mu.RUnlock()
	if aliases != max {
		t.Errorf("%d aliases left for %d exchanges", aliases, max)
	}
}

// TestMixedConcurrent runs every operation at once against a small store, for
// the race detector and for the invariants that must hold throughout.
func TestMixedConcurrent(t *testing.T) {
	const max = 20
	m, c := newStore(t, Limits{MaxExchanges: max, MaxAge: time.Minute, MaxEventsPerExchange: 50})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	id := func(i int) string { return "x_" + strconv.Itoa(i%40) }
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i++ {
				switch i % 8 {
				case 0:
					m.Create(&Exchange{ID: id(i)})
					m.Alias(id(i), "k:"+id(i))
				case 1, 2:
					m.Append(id(i), textEvent("a"))
				case 3:
					evs, err := m.Events(id(i), 0)
					for j := 1; err == nil && j < len(evs); j++ {
						if evs[j].Seq != evs[j-1].Seq+1 {
							t.Errorf("gap in log: %d then %d", evs[j-1].Seq, evs[j].Seq)
						}
					}
				case 4:
					wctx, wcancel := context.WithTimeout(ctx, time.Millisecond)
					m.Wait(wctx, id(i), 3)
					wcancel()
				case 5:
					m.Update(id(i), func(x *Exchange) error { x.Route = "r"; return nil })
				case 6:
					m.Find("k:" + id(i))
					if n := len(m.List(5)); n > 5 {
						t.Errorf("List(5) gave %d", n)
					}
				case 7:
					if n := m.Len(); n > max {
						t.Errorf("Len = %d > %d", n, max)
					}
					if i%64 == 7 {
						c.Advance(5 * time.Second)
					}
				}
			}
		})
	}
	wg.Wait()

	m.mu.RLock()
	defer m.mu.RUnlock()
	listed := 0
	for e := m.lru.next; e != &m.lru; e = e.next {
		listed++
		if v, ok := m.index.Load(e.id); !ok || v.(*entry) != e || e.removed {
			t.Errorf("%s listed but not indexed", e.id)
		}
	}
	if listed != m.n || m.n > max {
		t.Errorf("%d listed, n = %d", listed, m.n)
	}
	for k, e := range m.aliases {
		if e.removed {
			t.Errorf("alias %s points at a removed exchange", k)
		}
	}
}

func TestAgeExpiry(t *testing.T) {
	m, c := newStore(t, Limits{MaxAge: time.Minute})
	mustCreate(t, m, &Exchange{ID: "x_old"})
	m.Alias("x_old", "k:old")
	c.Advance(40 * time.Second)
	mustCreate(t, m, &Exchange{ID: "x_new"})
	c.Advance(20 * time.Second) // x_old exactly MaxAge old: still there
	if _, err := m.Get("x_old"); err != nil {
		t.Fatalf("Get at exactly MaxAge: %v", err)
	}
	c.Advance(time.Second)
	if _, err := m.Get("x_old"); err != ErrNotFound {
		t.Errorf("Get(expired) = %v, want ErrNotFound", err)
	}
	if _, err := m.Find("k:old"); err != ErrNotFound {
		t.Errorf("Find(alias of expired) = %v, want ErrNotFound", err)
	}
	if _, err := m.Get("x_new"); err != nil {
		t.Errorf("Get(live) = %v", err)
	}
	// Appending keeps an exchange alive.
	for range 5 {
		c.Advance(30 * time.Second)
		mustAppend(t, m, "x_new", textEvent("a"))
	}
	if _, err := m.Get("x_new"); err != nil {
		t.Errorf("exchange kept alive by Append: %v", err)
	}
	// Create sweeps exchanges nobody touches any more, and frees their ids.
	m.Alias("x_new", "k:new")
	c.Advance(2 * time.Minute)
	mustCreate(t, m, &Exchange{ID: "x_other"})
	m.mu.RLock()
	n, aliases := m.n, len(m.aliases)
	m.mu.RUnlock()
	if n != 1 || aliases != 0 {
		t.Errorf("after sweep: %d exchanges, %d aliases; want 1, 0", n, aliases)
	}
	mustCreate(t, m, &Exchange{ID: "x_new"})
	for _, op := range []func() error{
		func() error { _, err := m.Append("x_other", textEvent("a")); return err },
		func() error { _, err := m.Events("x_other", 0); return err },
		func() error { return m.Wait(context.Background(), "x_other", 0) },
	} {
		c.Advance(2 * time.Minute)
		mustCreate(t, m, &Exchange{ID: "x_other"}) // fresh, then expired on access
		c.Advance(2 * time.Minute)
		if err := op(); err != ErrNotFound {
			t.Errorf("op on an expired exchange = %v, want ErrNotFound", err)
		}
	}
}

// waitResult runs Wait in a goroutine and returns the channel of its result.
func waitResult(ctx context.Context, m Store, id string, after uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- m.Wait(ctx, id, after) }()
	return ch
}

// blocked fails the test if ch delivers within a short while.
func blocked(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Wait returned early: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
}

func returns(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

func TestWaitAppend(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1", State: translate.StateWorking})
	ctx := context.Background()
	ch := waitResult(ctx, m, "x_1", 0)
	blocked(t, ch)
	mustAppend(t, m, "x_1", textEvent("a"))
	if err := returns(t, ch); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	// Something newer is there already: no blocking.
	if err := m.Wait(ctx, "x_1", 0); err != nil {
		t.Fatal(err)
	}
	// Many waiters, one Append.
	var chs []<-chan error
	for range 10 {
		chs = append(chs, waitResult(ctx, m, "x_1", 1))
	}
	blocked(t, chs[0])
	mustAppend(t, m, "x_1", textEvent("b"))
	for _, ch := range chs {
		if err := returns(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Wait(ctx, "x_nope", 0); err != ErrNotFound {
		t.Errorf("Wait(missing) = %v, want ErrNotFound", err)
	}
}

func TestWaitTerminal(t *testing.T) {
	m, _ := newStore(t, Limits{})
	ctx := context.Background()

	// Terminal by Update, with nothing newer.
	mustCreate(t, m, &Exchange{ID: "x_1", State: translate.StateWorking})
	mustAppend(t, m, "x_1", textEvent("a"))
	ch := waitResult(ctx, m, "x_1", 1)
	blocked(t, ch)
	m.Update("x_1", func(x *Exchange) error { x.State = translate.StateCanceled; return nil })
	if err := returns(t, ch); err != nil {
		t.Fatal(err)
	}
	// Already terminal: returns at once although nothing is newer.
	if err := m.Wait(ctx, "x_1", 1); err != nil {
		t.Fatal(err)
	}

	// Terminal by a state event.
	mustCreate(t, m, &Exchange{ID: "x_2", State: translate.StateWorking})
	ch = waitResult(ctx, m, "x_2", 0)
	blocked(t, ch)
	mustAppend(t, m, "x_2", stateEvent(translate.StateCompleted))
	if err := returns(t, ch); err != nil {
		t.Fatal(err)
	}
	if x, _ := m.Get("x_2"); x.State != translate.StateCompleted {
		t.Errorf("State = %q", x.State)
	}

	// A settled but not terminal state does not end the wait.
	mustCreate(t, m, &Exchange{ID: "x_3", State: translate.StateWorking})
	m.Update("x_3", func(x *Exchange) error { x.State = translate.StateInputRequired; return nil })
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := m.Wait(cctx, "x_3", 0); err != context.DeadlineExceeded {
		t.Errorf("Wait on input-required = %v, want DeadlineExceeded", err)
	}
}

func TestWaitGone(t *testing.T) {
	m, _ := newStore(t, Limits{MaxExchanges: 1})
	mustCreate(t, m, &Exchange{ID: "x_1"})
	ch := waitResult(context.Background(), m, "x_1", 0)
	blocked(t, ch)
	mustCreate(t, m, &Exchange{ID: "x_2"}) // evicts x_1
	if err := returns(t, ch); err != ErrNotFound {
		t.Errorf("Wait on an evicted exchange = %v, want ErrNotFound", err)
	}

	ch = waitResult(context.Background(), m, "x_2", 0)
	blocked(t, ch)
	m.Close()
	if err := returns(t, ch); err != ErrClosed {
		t.Errorf("Wait across Close = %v, want ErrClosed", err)
	}
}

func TestWaitCancelNoLeak(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1"})
	before := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	var chs []<-chan error
	for range 50 {
		chs = append(chs, waitResult(ctx, m, "x_1", 0))
	}
	blocked(t, chs[0])
	cancel()
	for _, ch := range chs {
		if err := returns(t, ch); err != context.Canceled {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
	}
	// Waits that time out leave nothing behind either.
	for range 20 {
		tctx, tcancel := context.WithTimeout(context.Background(), time.Millisecond)
		if err := m.Wait(tctx, "x_1", 0); err != context.DeadlineExceeded {
			t.Fatalf("Wait = %v", err)
		}
		tcancel()
	}
	var now int
	for range 100 {
		if now = runtime.NumGoroutine(); now <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("goroutines: %d before, %d after", before, now)
}

func TestCopiesIndependent(t *testing.T) {
	m, _ := newStore(t, Limits{})
	in := &Exchange{
		ID:      "x_1",
		Request: &translate.Request{Input: []translate.Message{{Parts: []translate.Part{translate.TextPart("q")}}}},
		History: []translate.Message{{Parts: []translate.Part{{Kind: translate.PartData, Data: json.RawMessage(`{"a":1}`)}}}},
		Meta:    map[string]string{"k": "v"},
	}
	mustCreate(t, m, in)
	// Mutating what was given.
	in.Request.Input[0].Parts[0].Text = "changed"
	in.History[0].Parts[0].Data[1] = 'X'
	in.Meta["k"] = "changed"
	// Mutating what was returned.
	got, _ := m.Get("x_1")
	got.Request.Input[0].Parts[0].Text = "changed"
	got.History[0].Parts[0].Data[1] = 'X'
	got.Meta["k"] = "changed"
	got.State = translate.StateFailed
	if l := m.List(0); len(l) == 1 {
		l[0].Meta["k"] = "changed"
	}
	m.Alias("x_1", "k")
	if f, err := m.Find("k"); err == nil {
		f.Meta["k"] = "changed"
	}

	x, _ := m.Get("x_1")
	if x.Request.Input[0].Parts[0].Text != "q" || string(x.History[0].Parts[0].Data) != `{"a":1}` ||
		x.Meta["k"] != "v" || x.State != "" {
		t.Errorf("store changed through a copy: %+v", x)
	}

	// Events: the appended one and the returned ones.
	ev := &translate.Event{
		Kind: translate.KindToolCall, Tool: &translate.Tool{Name: "get_weather"},
		Data: json.RawMessage(`{"n":1}`), Ext: translate.Ext{Proto: "aip", Raw: json.RawMessage(`{"x":1}`)},
	}
	mustAppend(t, m, "x_1", ev)
	ev.Tool.Name = "changed"
	ev.Data[1] = 'X'
	ev.Ext.Raw[1] = 'X'
	evs, _ := m.Events("x_1", 0)
	evs[0].Tool.Name = "changed"
	evs[0].Ext.Raw[1] = 'X'
	evs[0].Seq = 99
	evs, _ = m.Events("x_1", 0)
	if e := evs[0]; e.Tool.Name != "get_weather" || string(e.Data) != `{"n":1}` ||
		string(e.Ext.Raw) != `{"x":1}` || e.Seq != 1 {
		t.Errorf("stored event changed through a copy: %+v", e)
	}
}

func TestList(t *testing.T) {
	m, c := newStore(t, Limits{MaxAge: time.Minute})
	for _, id := range []string{"x_a", "x_b", "x_c", "x_d"} {
		mustCreate(t, m, &Exchange{ID: id})
	}
	mustAppend(t, m, "x_b", textEvent("b"))
	ids := func(xs []*Exchange) string {
		var s string
		for _, x := range xs {
			s += x.ID + " "
		}
		return s
	}
	if got, want := ids(m.List(0)), "x_b x_d x_c x_a "; got != want {
		t.Errorf("List(0) = %s, want %s", got, want)
	}
	if got, want := ids(m.List(2)), "x_b x_d "; got != want {
		t.Errorf("List(2) = %s, want %s", got, want)
	}
	c.Advance(30 * time.Second)
	mustAppend(t, m, "x_c", textEvent("c"))
	c.Advance(45 * time.Second) // all but x_c expired
	if got, want := ids(m.List(10)), "x_c "; got != want {
		t.Errorf("List after expiry = %s, want %s", got, want)
	}
	if n := m.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
}

func TestClose(t *testing.T) {
	m := NewMemory(Limits{}, nil)
	mustCreate(t, m, &Exchange{ID: "x_1"})
	m.Alias("x_1", "k")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{}
	checks["Create"] = m.Create(&Exchange{})
	_, checks["Get"] = m.Get("x_1")
	_, checks["Find"] = m.Find("k")
	checks["Alias"] = m.Alias("x_1", "k2")
	checks["Update"] = m.Update("x_1", func(*Exchange) error { return nil })
	_, checks["Append"] = m.Append("x_1", textEvent("a"))
	_, checks["Events"] = m.Events("x_1", 0)
	checks["Wait"] = m.Wait(context.Background(), "x_1", 0)
	for name, err := range checks {
		if err != ErrClosed {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if m.Len() != 0 || m.List(0) != nil {
		t.Error("closed store not empty")
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := NewMemory(Limits{MaxAge: -1}, nil).Limits()
	want := Limits{DefaultMaxExchanges, DefaultMaxAge, DefaultMaxEventsPerExchange}
	if got != want {
		t.Errorf("Limits = %+v, want %+v", got, want)
	}
}

func TestNilArguments(t *testing.T) {
	m, _ := newStore(t, Limits{})
	mustCreate(t, m, &Exchange{ID: "x_1"})
	if m.Create(nil) == nil {
		t.Error("Create(nil) succeeded")
	}
	if _, err := m.Append("x_1", nil); err == nil {
		t.Error("Append(nil) succeeded")
	}
	if m.Update("x_1", nil) == nil {
		t.Error("Update(nil fn) succeeded")
	}
}

// Benchmarks. The log is bounded at the default 10000 events, so after warm-up
// an Append overwrites the ring's oldest slot and the figure is steady state.

func benchEvent() *translate.Event {
	p := translate.TextPart("hello, world")
	return &translate.Event{Kind: translate.KindContent, MessageID: "msg_1", Part: &p, Delta: true}
}

func BenchmarkAppend(b *testing.B) {
	m := NewMemory(Limits{}, nil)
	defer m.Close()
	m.Create(&Exchange{ID: "x_1"})
	ev := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Append("x_1", ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendParallel appends from every P, each to its own exchange: the
// gateway's shape, many streams at once.
func BenchmarkAppendParallel(b *testing.B) {
	m := NewMemory(Limits{}, nil)
	defer m.Close()
	var mu sync.Mutex
	n := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		id := fmt.Sprintf("x_%d", n)
		n++
		mu.Unlock()
		m.Create(&Exchange{ID: id})
		ev := benchEvent()
		for pb.Next() {
			if _, err := m.Append(id, ev); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAppendParallelShared appends from every P to one exchange: the
// worst case, all contention on one exchange lock.
func BenchmarkAppendParallelShared(b *testing.B) {
	m := NewMemory(Limits{}, nil)
	defer m.Close()
	m.Create(&Exchange{ID: "x_1"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ev := benchEvent()
		for pb.Next() {
			if _, err := m.Append("x_1", ev); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkAppendWithWaiter(b *testing.B) {
	m := NewMemory(Limits{}, nil)
	defer m.Close()
	m.Create(&Exchange{ID: "x_1"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var after uint64
		for m.Wait(ctx, "x_1", after) == nil {
			evs, err := m.Events("x_1", after)
			if err == ErrExpired { // fell behind the bound: skip ahead
				x, _ := m.Get("x_1")
				after = x.LastSeq
				continue
			}
			if err != nil || len(evs) == 0 {
				continue
			}
			after = evs[len(evs)-1].Seq
		}
	}()
	ev := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		m.Append("x_1", ev)
	}
	cancel()
	<-done
}

func BenchmarkEventsTail(b *testing.B) {
	m := NewMemory(Limits{}, nil)
	defer m.Close()
	m.Create(&Exchange{ID: "x_1"})
	for range 1000 {
		m.Append("x_1", benchEvent())
	}
	b.ReportAllocs()
	for b.Loop() {
		if evs, err := m.Events("x_1", 990); err != nil || len(evs) != 10 {
			b.Fatal(len(evs), err)
		}
	}
}

func BenchmarkCreateEvict(b *testing.B) {
	m := NewMemory(Limits{MaxExchanges: 1000}, nil)
	defer m.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := m.Create(&Exchange{ID: "x_" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
}
