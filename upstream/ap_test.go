package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/agentbridge/bridge/internal/callctx"
	"github.com/agentbridge/bridge/translate"
)

var apDialects = []string{APDialectProcess, APDialectRun, APDialectAgentic, APDialectV1}

func newAPClient(t testing.TB, rawURL string, opts APOptions, mut ...func(*Config)) *AgentProtocol {
	t.Helper()
	if opts.ResumeBackoff == 0 {
		opts.ResumeBackoff = 5 * time.Millisecond
	}
	cfg := Config{Name: "ap-test", URL: rawURL, AP: opts}
	for _, m := range mut {
		m(&cfg)
	}
	a, err := NewAgentProtocol(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.bg.Wait)
	return a
}

func apCollect(t testing.TB, a *AgentProtocol, ctx context.Context, req *translate.Request) ([]*translate.Event, error) {
	t.Helper()
	s, err := a.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	return translate.Collect(s)
}

// apSummary is aipSummary without the bookkeeping states, which differ by
// dialect (v1 has no working state, agentic none from its submit answer).
func apSummary(evs []*translate.Event) []string {
	var out []string
	for _, s := range aipSummary(evs) {
		if s != "state:submitted" && s != "state:working" {
			out = append(out, s)
		}
	}
	return out
}

func apContinue(session, text string) *translate.Request {
	r := aipUserRequest(session, text)
	r.Command = translate.CommandContinue
	return r
}

// apSubmits returns the bodies of the submit calls (POST process, run,
// resume, v1 steps).
func apSubmits(calls []apFakeCall) []string {
	var out []string
	for _, c := range calls {
		if c.Method == "POST" {
			out = append(out, c.Path+" "+c.Body)
		}
	}
	return out
}

func TestAPBehaviours(t *testing.T) {
	echo := []string{"start:assistant", "text:ec", "text:ho: ", "text:hi", "end", "state:completed"}
	tool := []string{"call:get_weather:{\"city\":\"Beijing\"}", "result:get_weather:sunny", "start:assistant", "text:ec", "text:ho: ", "text:[tool] hi", "end", "state:completed"}
	file := []string{"artifact:report.txt:https://example.com/report.txt", "start:assistant", "text:ec", "text:ho: ", "text:[file] hi", "end", "state:completed"}
	fail := []string{"state:failed:AGENT_FAILED"}
	want := map[string]map[string][]string{
		APDialectProcess: {"hi": echo, "[tool] hi": tool, "[file] hi": file, "[fail] hi": fail},
		APDialectRun:     {"hi": echo, "[tool] hi": tool, "[file] hi": file, "[fail] hi": fail},
		APDialectAgentic: {"hi": echo, "[tool] hi": tool, "[fail] hi": fail,
			// agentic has no artifact event
			"[file] hi": {"start:assistant", "text:ec", "text:ho: ", "text:[file] hi", "end", "state:completed"}},
		APDialectV1: {
			"hi":        {"start:assistant", "text:echo: hi", "end", "state:completed"},
			"[tool] hi": {"start:assistant", "text:echo: [tool] hi", "end", "state:completed"},
			"[file] hi": {"start:assistant", "text:echo: [file] hi", "end", "artifact:report.txt:URL", "state:completed"},
			"[fail] hi": {"start:assistant", "text:Error: failed on request", "end", "state:failed:AGENT_FAILED"},
		},
	}
	for _, d := range apDialects {
		for _, configured := range []bool{true, false} {
			name := d + "/detected"
			if configured {
				name = d + "/configured"
			}
			t.Run(name, func(t *testing.T) {
				f := newAPFake(t, d)
				opts := APOptions{}
				if configured {
					opts.Dialect, opts.Agent = d, "echo"
				}
				a := newAPClient(t, f.URL(), opts)
				for _, text := range []string{"hi", "[tool] hi", "[file] hi", "[fail] hi", "[slow] hi"} {
					evs, err := apCollect(t, a, context.Background(), aipUserRequest("", text))
					if err != nil {
						t.Fatalf("%q: %v", text, err)
					}
					w, ok := want[d][text]
					if text == "[slow] hi" {
						w = slices.Clone(want[d]["hi"])
						for i := range w {
							w[i] = strings.Replace(w[i], "hi", "[slow] hi", 1)
						}
						ok = true
					}
					if !ok {
						continue
					}
					if d == APDialectV1 {
						w = slices.Clone(w)
						for i := range w {
							w[i] = strings.Replace(w[i], "URL", f.URL()+"/ap/v1/agent/tasks/task-", 1)
						}
					}
					got := apSummary(evs)
					if d == APDialectV1 && text == "[file] hi" && len(got) == len(w) {
						// the artifact URL names the task: compare its prefix
						if strings.HasPrefix(got[3], w[3]) && strings.HasSuffix(got[3], "/artifacts/art-1") {
							got[3] = w[3]
						}
					}
					if !reflect.DeepEqual(got, w) {
						t.Errorf("%q:\n got %q\nwant %q", text, got, w)
					}
					if evs[0].Kind != translate.KindState || evs[0].State != translate.StateSubmitted && evs[0].State != translate.StateWorking {
						t.Errorf("%q: first event %v %v", text, evs[0].Kind, evs[0].State)
					}
				}
				if got := a.Dialect(); got != d {
					t.Errorf("Dialect() = %q, want %q", got, d)
				}
				if c := a.Breaker().Counts(); c.TotalFailures != 0 {
					t.Errorf("breaker counts %+v", c)
				}
			})
		}
	}
}

func TestAPAskThenResume(t *testing.T) {
	for _, d := range apDialects {
		t.Run(d, func(t *testing.T) {
			f := newAPFake(t, d)
			a := newAPClient(t, f.URL(), APOptions{Dialect: d})
			evs, err := apCollect(t, a, context.Background(), aipUserRequest("s1", "[ask] hi"))
			if err != nil {
				t.Fatal(err)
			}
			got := apSummary(evs)
			if n := len(got); n < 2 || got[n-2] != "input:need more input" || got[n-1] != "state:input-required" {
				t.Fatalf("ask: %q", got)
			}
			if a.sessions.len() != 1 {
				t.Fatalf("sessions %d", a.sessions.len())
			}
			evs, err = apCollect(t, a, context.Background(), apContinue("s1", "Paris"))
			if err != nil {
				t.Fatal(err)
			}
			got = apSummary(evs)
			want := []string{"start:assistant", "text:ec", "text:ho: ", "text:Paris", "end", "state:completed"}
			if d == APDialectV1 {
				want = []string{"start:assistant", "text:echo: Paris", "end", "state:completed"}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("resume:\n got %q\nwant %q", got, want)
			}
			if d == APDialectProcess || d == APDialectRun {
				// The resume was answered the request's start event, which
				// the turn that asked delivered already: not again.
				if all := aipSummary(evs); slices.Contains(all, "state:submitted") {
					t.Errorf("the continuation delivered the start event again: %q", all)
				}
				for _, c := range f.Calls() {
					if c.Method == "POST" && c.Query != "wait=true" {
						t.Errorf("POST %s?%s: a submit without wait=true", c.Path, c.Query)
					}
				}
			}
			subs := apSubmits(f.Calls())
			last := subs[len(subs)-1]
			switch d {
			case APDialectProcess, APDialectRun:
				if !strings.Contains(last, `"request_keys":{"input":"Paris"}`) {
					t.Errorf("resume body %s", last)
				}
			case APDialectAgentic:
				if !strings.HasPrefix(last, "/echo/resume ") || !strings.Contains(last, `"continue_result":{"input":"Paris","request_id":"req-`) {
					t.Errorf("resume body %s", last)
				}
			case APDialectV1:
				if !strings.Contains(last, "/ap/v1/agent/tasks/task-1/steps") || strings.Count(strings.Join(subs, "\n"), "POST /ap/v1/agent/tasks {") != 0 {
					t.Errorf("the continue did not post a step to the same task: %q", subs)
				}
				if n := len(subs); n != 3 {
					t.Errorf("submits %q", subs)
				}
			}
		})
	}
}

// TestAPStatusOnlyAnswer: a process agent that answers a submit with only
// a status code (the README's answer without wait, from an agent that
// ignores wait) is read by the request_id the client chose.
func TestAPStatusOnlyAnswer(t *testing.T) {
	f := newAPFake(t, APDialectProcess)
	f.set(func(f *apFake) { f.statusOnly = true })
	a := newAPClient(t, f.URL(), APOptions{Dialect: APDialectProcess, Agent: "echo"})
	evs, err := apCollect(t, a, context.Background(), aipUserRequest("s", "[ask] hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := apSummary(evs); len(got) < 2 || got[len(got)-1] != "state:input-required" {
		t.Fatalf("ask: %q", got)
	}
	if evs[0].Kind != translate.KindState || evs[0].State != translate.StateSubmitted {
		t.Errorf("first event %v %v, want the submitted state from the event stream", evs[0].Kind, evs[0].State)
	}
	evs, err = apCollect(t, a, context.Background(), apContinue("s", "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start:assistant", "text:ec", "text:ho: ", "text:Paris", "end", "state:completed"}
	if got := apSummary(evs); !reflect.DeepEqual(got, want) {
		t.Errorf("resume:\n got %q\nwant %q", got, want)
	}
	subs := apSubmits(f.Calls())
	if len(subs) != 2 || !strings.Contains(subs[0], `"request_id":"req_`) {
		t.Errorf("submits %q", subs)
	}
}

func TestAPSessionContinue(t *testing.T) {
	keys := map[string]string{APDialectProcess: `"run_id":"run-`, APDialectRun: `"thread_id":"thread-`, APDialectAgentic: `"thread_id":"thread-`}
	for _, d := range []string{APDialectProcess, APDialectRun, APDialectAgentic} {
		t.Run(d, func(t *testing.T) {
			f := newAPFake(t, d)
			a := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: "echo"})
			for _, text := range []string{"one", "two"} {
				if _, err := apCollect(t, a, context.Background(), aipUserRequest("sess", text)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := apCollect(t, a, context.Background(), aipUserRequest("", "three")); err != nil {
				t.Fatal(err)
			}
			subs := apSubmits(f.Calls())
			if len(subs) != 3 {
				t.Fatalf("submits %q", subs)
			}
			if strings.Contains(subs[0], keys[d]) || strings.Contains(subs[2], keys[d]) {
				t.Errorf("a new session sent a session id: %q", subs)
			}
			if !strings.Contains(subs[1], keys[d]) {
				t.Errorf("the second request of the session did not continue it: %q", subs[1])
			}
		})
	}
}

func TestAPResumeAfterCut(t *testing.T) {
	for _, d := range []string{APDialectProcess, APDialectRun} {
		for _, abort := range []bool{false, true} {
			for _, ignoreSince := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/abort=%v/ignoreSince=%v", d, abort, ignoreSince), func(t *testing.T) {
					f := newAPFake(t, d)
					f.set(func(f *apFake) { f.cutAfter, f.cutAbort, f.ignoreSince = 3, abort, ignoreSince })
					a := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: "echo"})
					evs, err := apCollect(t, a, context.Background(), aipUserRequest("", "[tool] hi"))
					if err != nil {
						t.Fatal(err)
					}
					want := []string{"call:get_weather:{\"city\":\"Beijing\"}", "result:get_weather:sunny", "start:assistant", "text:ec", "text:ho: ", "text:[tool] hi", "end", "state:completed"}
					if got := apSummary(evs); !reflect.DeepEqual(got, want) {
						t.Errorf("\n got %q\nwant %q", got, want)
					}
					var gets []string
					for _, c := range f.Calls() {
						if c.Method == "GET" && strings.Contains(c.Path, "events") {
							gets = append(gets, c.Query)
						}
					}
					if len(gets) != 2 || !strings.Contains(gets[1], "since=3") {
						t.Errorf("event GETs %q, want a second one with since=3", gets)
					}
					if c := a.Breaker().Counts(); c.TotalFailures != 0 {
						t.Errorf("breaker counts %+v", c)
					}
				})
			}
		}
	}
}

func TestAPUnresumableCut(t *testing.T) {
	for _, d := range []string{APDialectProcess, APDialectAgentic} {
		t.Run(d, func(t *testing.T) {
			f := newAPFake(t, d)
			f.set(func(f *apFake) { f.cutAfter, f.cutStall = 2, true })
			a := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: "echo"})
			_, err := apCollect(t, a, context.Background(), aipUserRequest("", "[slow] hi"))
			var ue *Error
			if !errors.As(err, &ue) || ue.Code != translate.CodeStreamIncomplete {
				t.Fatalf("err = %v, want STREAM_INCOMPLETE", err)
			}
			t.Logf("err: %v", err)
			if c := a.Breaker().Counts(); c.TotalFailures != 1 {
				t.Errorf("breaker counts %+v, want one failure", c)
			}
			var gets int
			for _, c := range f.Calls() {
				if c.Method == "GET" && strings.Contains(c.Path, "events") {
					gets++
				}
			}
			want := 4 // the first and three retries
			if d == APDialectAgentic {
				want = 1 // no ids, a draining queue: never resumed
			}
			if gets != want {
				t.Errorf("%d event GETs, want %d", gets, want)
			}
		})
	}
}

func TestAPDetection(t *testing.T) {
	for _, d := range apDialects {
		t.Run(d, func(t *testing.T) {
			f := newAPFake(t, d)
			a := newAPClient(t, f.URL(), APOptions{})
			for range 2 {
				if _, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi")); err != nil {
					t.Fatal(err)
				}
			}
			if a.Dialect() != d {
				t.Errorf("detected %q", a.Dialect())
			}
			var discovery int
			for _, c := range f.Calls() {
				if c.Method == "GET" && (c.Path == "/" || c.Path == "/_discovery" || c.Path == "/ap/v1/agent/tasks" || strings.HasSuffix(c.Path, "/describe")) {
					discovery++
				}
			}
			want := map[string]int{APDialectProcess: 2, APDialectRun: 2, APDialectAgentic: 2, APDialectV1: 3}[d]
			if discovery != want {
				t.Errorf("%d discovery calls, want %d (cached after the first exchange)", discovery, want)
			}
		})
	}
	// Without describe, the first submit tells the edition: /process, then /run after a 404.
	f := newAPFake(t, APDialectRun)
	f.set(func(f *apFake) { f.noDescribe = true })
	a := newAPClient(t, f.URL(), APOptions{})
	for range 2 {
		if _, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi")); err != nil {
			t.Fatal(err)
		}
	}
	if a.Dialect() != APDialectRun {
		t.Errorf("detected %q", a.Dialect())
	}
	var process int
	for _, c := range f.Calls() {
		if c.Path == "/echo/process" {
			process++
		}
	}
	if process != 1 {
		t.Errorf("%d POST /echo/process, want 1 (the edition is cached)", process)
	}
	if c := a.Breaker().Counts(); c.TotalFailures != 0 {
		t.Errorf("breaker counts %+v", c)
	}
}

func TestAPAgentDiscovery(t *testing.T) {
	for _, d := range []string{APDialectProcess, APDialectAgentic} {
		t.Run(d, func(t *testing.T) {
			// No agent configured: the first listed (/echo); configured by name
			// or path: that one (/other, which the fake does not serve: 404).
			f := newAPFake(t, d)
			a := newAPClient(t, f.URL(), APOptions{Dialect: d})
			if _, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi")); err != nil {
				t.Fatal(err)
			}
			list := "/"
			if d == APDialectAgentic {
				list = "/_discovery"
			}
			if c := f.Calls(); c[0].Path != list || c[1].Path != "/echo/process" {
				t.Errorf("calls %+v", c[:2])
			}
			for _, agent := range []string{"other", "/other"} {
				b := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: agent})
				_, err := apCollect(t, b, context.Background(), aipUserRequest("", "hi"))
				var ue *Error
				if !errors.As(err, &ue) || ue.Status != 404 {
					t.Errorf("agent %q: %v, want 404 from /other", agent, err)
				}
				if c := f.Calls(); c[len(c)-1].Path != "/other/process" {
					t.Errorf("agent %q: last call %+v", agent, c[len(c)-1])
				}
			}
		})
	}
}

func TestAPCancelOnClientGone(t *testing.T) {
	for _, d := range []string{APDialectProcess, APDialectRun} {
		t.Run(d, func(t *testing.T) {
			f := newAPFake(t, d)
			a := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: "echo"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := a.Open(ctx, aipUserRequest("", "[slow] hi"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Next(); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(20*time.Millisecond, cancel)
			for {
				if _, err = s.Next(); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrClientGone) {
				t.Errorf("Next after cancel: %v, want ErrClientGone", err)
			}
			select {
			case id := <-f.cancels:
				if id == "" {
					t.Error("cancel without a turn id")
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no cancel reached the agent")
			}
			if c := a.Breaker().Counts(); c.TotalFailures != 0 {
				t.Errorf("breaker counts %+v: a client going away is no failure", c)
			}
		})
	}
	// Close before the end cancels too; after the end it does not.
	f := newAPFake(t, APDialectProcess)
	a := newAPClient(t, f.URL(), APOptions{Dialect: APDialectProcess, Agent: "echo"})
	s, err := a.Open(context.Background(), aipUserRequest("", "[slow] hi"))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := s.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	select {
	case <-f.cancels:
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not cancel the turn")
	}
	if _, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi")); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	select {
	case id := <-f.cancels:
		t.Errorf("a finished turn %s was cancelled", id)
	default:
	}
	// The other dialects have no cancel: the client going away is still no failure.
	for _, d := range []string{APDialectAgentic, APDialectV1} {
		f := newAPFake(t, d)
		a := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: "echo"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		_, err := apCollect(t, a, ctx, aipUserRequest("", "[slow] hi"))
		cancel()
		if !errors.Is(err, ErrClientGone) {
			t.Errorf("%s: %v, want ErrClientGone", d, err)
		}
		if c := a.Breaker().Counts(); c.TotalFailures != 0 {
			t.Errorf("%s: breaker counts %+v", d, c)
		}
	}
}

func TestAPCancelCommand(t *testing.T) {
	f := newAPFake(t, APDialectProcess)
	a := newAPClient(t, f.URL(), APOptions{Dialect: APDialectProcess, Agent: "echo"})
	if _, err := apCollect(t, a, context.Background(), aipUserRequest("s", "[ask] hi")); err != nil {
		t.Fatal(err)
	}
	evs, err := apCollect(t, a, context.Background(), &translate.Request{Command: translate.CommandCancel, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := apSummary(evs); !reflect.DeepEqual(got, []string{"state:canceled"}) {
		t.Errorf("cancel: %q", got)
	}
	select {
	case <-f.cancels:
	default:
		t.Error("no CancelRequest reached the agent")
	}
	if _, err := a.Open(context.Background(), &translate.Request{Command: translate.CommandCancel, Session: "none"}); err == nil {
		t.Error("cancel without a turn accepted")
	}
	if _, err := a.Open(context.Background(), &translate.Request{Command: translate.CommandGet, Session: "s"}); err == nil {
		t.Error("get accepted")
	}
}

func TestAPBreakerOpensOn500(t *testing.T) {
	for _, d := range apDialects {
		for _, configured := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/configured=%v", d, configured), func(t *testing.T) {
				f := newAPFake(t, d)
				f.set(func(f *apFake) { f.fail500 = true })
				opts := APOptions{}
				if configured {
					opts = APOptions{Dialect: d, Agent: "echo"}
				}
				a := newAPClient(t, f.URL(), opts, func(c *Config) {
					c.Breaker = BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute}
				})
				for i := range 3 {
					_, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi"))
					var ue *Error
					if !errors.As(err, &ue) || ue.Status != 500 {
						t.Fatalf("call %d: %v, want HTTP 500", i, err)
					}
				}
				if st := a.Breaker().State(); st != gobreaker.StateOpen {
					t.Fatalf("breaker %v after three 500s", st)
				}
				n := len(f.Calls())
				if _, err := a.Open(context.Background(), aipUserRequest("", "hi")); !errors.Is(err, ErrUnavailable) {
					t.Errorf("open breaker: %v", err)
				}
				if len(f.Calls()) != n {
					t.Error("an open breaker let a call through")
				}
			})
		}
	}
}

func TestAPMalformedIsFailure(t *testing.T) {
	for _, d := range apDialects {
		for _, where := range []string{"answer", "event"} {
			if where == "event" && d == APDialectV1 {
				continue
			}
			t.Run(d+"/"+where, func(t *testing.T) {
				f := newAPFake(t, d)
				f.set(func(f *apFake) {
					f.garbage = where == "answer"
					f.garbageEvent = where == "event"
				})
				a := newAPClient(t, f.URL(), APOptions{Dialect: d, Agent: "echo"})
				_, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi"))
				var ue *Error
				if !errors.As(err, &ue) || ue.Code != translate.CodeUpstreamError || !errors.Is(err, translate.ErrMalformed) {
					t.Errorf("err = %v, want UPSTREAM_ERROR (malformed)", err)
				}
				if c := a.Breaker().Counts(); c.TotalFailures != 1 {
					t.Errorf("breaker counts %+v, want one failure", c)
				}
			})
		}
	}
}

func TestAP4xxIsNoFailure(t *testing.T) {
	f := newAPFake(t, APDialectProcess)
	a := newAPClient(t, f.URL(), APOptions{Dialect: APDialectProcess, Agent: "missing"})
	_, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi"))
	var ue *Error
	if !errors.As(err, &ue) || ue.Status != 404 || ue.Code != translate.CodeBadRequest {
		t.Fatalf("err = %v, want 404", err)
	}
	if c := a.Breaker().Counts(); c.TotalFailures != 0 || c.Requests != 1 {
		t.Errorf("breaker counts %+v", c)
	}
}

func TestAPV1RunningSteps(t *testing.T) {
	f := newAPFake(t, APDialectV1)
	f.set(func(f *apFake) { f.runningSteps = 2 })
	a := newAPClient(t, f.URL(), APOptions{Dialect: APDialectV1})
	evs, err := apCollect(t, a, context.Background(), aipUserRequest("", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"state:submitted", "start:assistant", "text:working…", "end", "state:working", "start:assistant", "text:working…", "end", "start:assistant", "text:echo: hi", "end", "state:completed"}
	if got := aipSummary(evs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	subs := apSubmits(f.Calls())
	if len(subs) != 4 || !strings.HasSuffix(subs[2], " {}") {
		t.Errorf("submits %q", subs)
	}
	b := newAPClient(t, f.URL(), APOptions{Dialect: APDialectV1, MaxSteps: 1})
	f.set(func(f *apFake) { f.runningSteps = 5 })
	if _, err := apCollect(t, b, context.Background(), aipUserRequest("", "hi")); err == nil {
		t.Error("MaxSteps not enforced")
	}
}

func TestAPForwardsHeaders(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, d := range apDialects {
		f := newAPFake(t, d)
		a := newAPClient(t, f.URL(), APOptions{})
		ctx := callctx.WithHeaders(context.Background(), map[string]string{"traceparent": tp})
		if _, err := apCollect(t, a, ctx, aipUserRequest("", "hi")); err != nil {
			t.Fatal(err)
		}
		for _, c := range f.Calls() {
			if c.Trace != tp {
				t.Errorf("%s: %s %s without traceparent", d, c.Method, c.Path)
			}
		}
	}
}

func TestAPSessionsBounded(t *testing.T) {
	m := newSessionMap[*apSession](3)
	for i := range 5 {
		m.put(&apSession{key: fmt.Sprint("s", i), remote: fmt.Sprint("r", i)})
	}
	if m.len() != 3 {
		t.Fatalf("len %d", m.len())
	}
	if m.take("s0") != nil || m.take("s1") != nil {
		t.Error("the oldest sessions were kept")
	}
	if got := m.take("s4"); got == nil || got.remote != "r4" {
		t.Errorf("take s4 = %+v", got)
	}
	if m.take("s4") != nil {
		t.Error("taken twice")
	}
	m.put(&apSession{key: ""})
	if m.len() != 2 {
		t.Errorf("an unkeyed session was kept")
	}
}

func TestAPBadOptions(t *testing.T) {
	if _, err := NewAgentProtocol(Config{Name: "x", URL: "http://h:1", AP: APOptions{Dialect: "v2"}}); err == nil {
		t.Error("dialect v2 accepted")
	}
	if _, err := NewAgentProtocol(Config{Name: "x", URL: "http://h:1", AP: APOptions{Dialect: "auto"}}); err != nil {
		t.Error(err)
	}
}

func TestAPNoGoroutineLeak(t *testing.T) {
	fakes := map[string]*apFake{}
	clients := map[string]*AgentProtocol{}
	for _, d := range apDialects {
		fakes[d] = newAPFake(t, d)
		clients[d] = newAPClient(t, fakes[d].URL(), APOptions{})
	}
	run := func() {
		for d, a := range clients {
			for _, text := range []string{"hi", "[tool] [file] x", "[fail] y"} {
				if _, err := apCollect(t, a, context.Background(), aipUserRequest("", text)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := apCollect(t, a, context.Background(), aipUserRequest("leak", "[ask] q")); err != nil {
				t.Fatal(err)
			}
			if _, err := apCollect(t, a, context.Background(), apContinue("leak", "a")); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			s, err := a.Open(ctx, aipUserRequest("", "[slow] z"))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = s.Next()
			cancel()
			for {
				if _, err := s.Next(); err != nil {
					break
				}
			}
			_ = s.Close()
			a.bg.Wait()
			fakes[d].srv.CloseClientConnections()
		}
	}
	run()
	time.Sleep(300 * time.Millisecond) // the fakes' slow scripts finish
	base := runtime.NumGoroutine()
	for range 3 {
		run()
	}
	var n int
	for range 100 {
		n = runtime.NumGoroutine()
		if n <= base+2 {
			return
		}
		time.Sleep(30 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("%d goroutines, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
}

func BenchmarkAPStream(b *testing.B) {
	for _, d := range apDialects {
		b.Run(d, func(b *testing.B) {
			f := newAPFake(b, d)
			a := newAPClient(b, f.URL(), APOptions{Dialect: d, Agent: "echo"})
			req := aipUserRequest("", "[tool] hi")
			b.ReportAllocs()
			b.ResetTimer()
			var events int
			for b.Loop() {
				s, err := a.Open(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := s.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					events++
				}
				_ = s.Close()
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
