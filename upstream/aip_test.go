package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
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

func newAIPClient(t testing.TB, rawURL string, opts AIPOptions, mut ...func(*Config)) *AIP {
	t.Helper()
	cfg := Config{Name: "aip-test", URL: rawURL, AIP: opts}
	for _, m := range mut {
		m(&cfg)
	}
	a, err := NewAIP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.bg.Wait)
	return a
}

func aipFastOpts(mode string) AIPOptions {
	return AIPOptions{Mode: mode, PollInterval: 5 * time.Millisecond, ResumeBackoff: 5 * time.Millisecond}
}

func aipUserRequest(session, text string) *translate.Request {
	return &translate.Request{Command: translate.CommandStart, Session: session,
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(text)}}}}
}

// aipSummary renders events compactly for comparison.
func aipSummary(evs []*translate.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case translate.KindState:
			s := "state:" + string(ev.State)
			if ev.Err != nil {
				s += ":" + ev.Err.Code
			}
			out = append(out, s)
		case translate.KindMessageStart:
			out = append(out, "start:"+string(ev.Message.Role))
		case translate.KindMessageEnd:
			out = append(out, "end")
		case translate.KindContent:
			out = append(out, "text:"+ev.Part.Text)
		case translate.KindToolCall:
			out = append(out, "call:"+ev.Tool.Name+":"+ev.Tool.Arguments)
		case translate.KindToolResult:
			out = append(out, "result:"+ev.Tool.Name+":"+ev.Tool.Output)
		case translate.KindArtifact:
			s := "artifact:" + ev.Artifact.Name
			for _, p := range ev.Artifact.Parts {
				s += ":" + p.URI
			}
			out = append(out, s)
		case translate.KindInputRequest:
			out = append(out, "input:"+translate.PartsText(ev.Parts))
		default:
			out = append(out, ev.Kind.String())
		}
	}
	return out
}

func aipCollect(t testing.TB, a *AIP, ctx context.Context, req *translate.Request) ([]*translate.Event, error) {
	t.Helper()
	s, err := a.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	return translate.Collect(s)
}

func aipTaskIDs(calls []aipFakeCall) []string {
	var ids []string
	for _, c := range calls {
		if c.TaskID != "" && !slices.Contains(ids, c.TaskID) {
			ids = append(ids, c.TaskID)
		}
	}
	return ids
}

func TestAIPPaths(t *testing.T) {
	cases := []struct {
		url       string
		overrides map[string]string
		rpc       string
		stream    string
		notifSet  string
		acs       string
	}{
		{"http://h:1", nil, "/rpc", "/stream", "/notification/set", "/.well-known/acs.json"},
		{"http://h:1/", nil, "/rpc", "/stream", "/notification/set", "/.well-known/acs.json"},
		{"http://h:1/rpc", nil, "/rpc", "/stream", "/notification/set", "/.well-known/acs.json"},
		{"http://h:1/acps-aip-v1", nil, "/acps-aip-v1/rpc", "/acps-aip-v1/stream", "/acps-aip-v1/notification/set", "/acps-aip-v1/.well-known/acs.json"},
		{"http://h:1/acps-aip-v1/", nil, "/acps-aip-v1/rpc", "/acps-aip-v1/stream", "/acps-aip-v1/notification/set", "/acps-aip-v1/.well-known/acs.json"},
		{"http://h:1/acps-aip-v1/rpc", nil, "/acps-aip-v1/rpc", "/acps-aip-v1/stream", "/acps-aip-v1/notification/set", "/acps-aip-v1/.well-known/acs.json"},
		{"http://h:1/a/b/rpc/", nil, "/a/b/rpc", "/a/b/stream", "/a/b/notification/set", "/a/b/.well-known/acs.json"},
		{"http://h:1/grpc", nil, "/grpc/rpc", "/grpc/stream", "/grpc/notification/set", "/grpc/.well-known/acs.json"},
		{"http://h:1/p/rpc", map[string]string{"stream": "/sse", "acs": "http://h:1/agent_spec.json", "notification/set": "hooks/set"},
			"/p/rpc", "/sse", "/p/hooks/set", "/agent_spec.json"},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.url)
		got, err := aipPaths(u, c.overrides)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		want := []string{c.rpc, c.stream, c.notifSet, c.acs}
		have := []string{got["rpc"], got["stream"], got["notification/set"], got["acs"]}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("%s %v: got %v, want %v", c.url, c.overrides, have, want)
		}
	}
	u, _ := url.Parse("http://h:1/rpc")
	for _, bad := range []map[string]string{{"strem": "/x"}, {"stream": "http://other:2/stream"}, {"stream": ""}} {
		if _, err := aipPaths(u, bad); err == nil {
			t.Errorf("override %v accepted", bad)
		}
	}
	a := newAIPClient(t, "https://agent.example.com/acps-aip-v1/rpc", AIPOptions{})
	if got := a.Endpoint("stream"); got != "https://agent.example.com/acps-aip-v1/stream" {
		t.Errorf("Endpoint(stream) = %q", got)
	}
	if _, err := NewAIP(Config{URL: "http://h/rpc", AIP: AIPOptions{Mode: "push"}}); err == nil {
		t.Error("mode push accepted")
	}
}

func TestAIPBehaviours(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"text", "hi", []string{"state:submitted", "state:working", "start:assistant", "text:echo: hi", "end", "state:completed"}},
		{"tool", "[tool] hi", []string{"state:submitted", "state:working", "start:assistant",
			`call:get_weather:{"city":"Beijing"}`, "result:get_weather:sunny", "end",
			"start:assistant", "text:echo: [tool] hi", "end", "state:completed"}},
		{"file", "[file] hi", []string{"state:submitted", "state:working", "start:assistant", "text:echo: [file] hi", "end",
			"artifact:report.txt:https://example.com/report.txt", "state:completed"}},
		{"fail", "[fail] hi", []string{"state:submitted", "state:working", "state:failed:AGENT_FAILED"}},
		{"ask", "[ask] hi", []string{"state:submitted", "state:working", "start:assistant", "text:need more input", "end",
			"input:need more input", "state:input-required"}},
		{"slow", "[slow] hi", []string{"state:submitted", "state:working", "start:assistant", "text:echo: [slow] hi", "end", "state:completed"}},
	}
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		f := newAIPFake(t, "/acps-aip-v1")
		a := newAIPClient(t, f.URL()+"/rpc", aipFastOpts(mode))
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				evs, err := aipCollect(t, a, context.Background(), aipUserRequest("", c.text))
				if err != nil {
					t.Fatal(err)
				}
				if got := aipSummary(evs); !reflect.DeepEqual(got, c.want) {
					t.Errorf("got  %q\nwant %q", got, c.want)
				}
			})
		}
		for _, c := range f.Calls() {
			want := "/acps-aip-v1/" + mode
			if c.Command == "get" || c.Command == "cancel" || c.Command == "complete" {
				want = "/acps-aip-v1/rpc"
			}
			if c.Path != want {
				t.Errorf("%s mode: %s sent to %s", mode, c.Command, c.Path)
			}
		}
		if n := a.Breaker().Counts().TotalFailures; n != 0 {
			t.Errorf("%s mode: %d breaker failures", mode, n)
		}
	}
}

func TestAIPAutoMode(t *testing.T) {
	for _, c := range []struct {
		acs  int
		want string
	}{{1, "stream"}, {2, "rpc"}, {0, "rpc"}} {
		f := newAIPFake(t, "")
		f.set(func(f *aipFake) { f.acs = c.acs })
		a := newAIPClient(t, f.URL(), aipFastOpts(""))
		for range 2 {
			evs, err := aipCollect(t, a, context.Background(), aipUserRequest("", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			if last := evs[len(evs)-1]; last.State != translate.StateCompleted {
				t.Fatalf("acs %d: ended %v", c.acs, last.State)
			}
		}
		cmds := f.commands()
		if cmds[0] != "/.well-known/acs.json acs" || slices.Index(cmds[1:], "/.well-known/acs.json acs") >= 0 {
			t.Errorf("acs %d: the document is read once, first: %q", c.acs, cmds)
		}
		if cmds[1] != "/"+c.want+" start" {
			t.Errorf("acs %d: started with %q, want %s", c.acs, cmds[1], c.want)
		}
	}
}

func TestAIPAutoComplete(t *testing.T) {
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		for _, auto := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/auto=%v", mode, auto), func(t *testing.T) {
				f := newAIPFake(t, "")
				f.set(func(f *aipFake) { f.awaitCompletion = true })
				opts := aipFastOpts(mode)
				opts.AutoComplete = &auto
				a := newAIPClient(t, f.URL(), opts)
				evs, err := aipCollect(t, a, context.Background(), aipUserRequest("s1", "[file] hi"))
				if err != nil {
					t.Fatal(err)
				}
				got := aipSummary(evs)
				completes := slices.Index(f.commands(), "/rpc complete") >= 0
				last := got[len(got)-1]
				if auto {
					if !completes || last != "state:completed" || slices.Contains(got, "state:awaiting-completion") {
						t.Errorf("auto-complete: complete sent %v, events %q", completes, got)
					}
				} else if completes || last != "state:awaiting-completion" {
					t.Errorf("no auto-complete: complete sent %v, events %q", completes, got)
				}
				if !slices.Contains(got, "artifact:report.txt:https://example.com/report.txt") {
					t.Errorf("no artifact: %q", got)
				}
				if !auto {
					// A later complete of the session goes to the waiting task.
					evs, err := aipCollect(t, a, context.Background(), &translate.Request{Command: translate.CommandComplete, Session: "s1"})
					if err != nil {
						t.Fatal(err)
					}
					if got := aipSummary(evs); got[len(got)-1] != "state:completed" {
						t.Errorf("complete: %q", got)
					}
					if ids := aipTaskIDs(f.Calls()); len(ids) != 1 {
						t.Errorf("complete went to another task: %v", ids)
					}
				}
			})
		}
	}
}

func TestAIPAskThenContinue(t *testing.T) {
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		t.Run(mode, func(t *testing.T) {
			f := newAIPFake(t, "")
			a := newAIPClient(t, f.URL(), aipFastOpts(mode))
			evs, err := aipCollect(t, a, context.Background(), aipUserRequest("sess-1", "[ask] hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got := aipSummary(evs); got[len(got)-1] != "state:input-required" {
				t.Fatalf("first turn: %q", got)
			}
			evs, err = aipCollect(t, a, context.Background(), aipUserRequest("sess-1", "Beijing"))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"state:working", "start:assistant", "text:echo: Beijing", "end", "state:completed"}
			if got := aipSummary(evs); !reflect.DeepEqual(got, want) {
				t.Errorf("second turn:\ngot  %q\nwant %q", got, want)
			}
			var starts, continues []aipFakeCall
			for _, c := range f.Calls() {
				switch c.Command {
				case "start":
					starts = append(starts, c)
				case "continue":
					continues = append(continues, c)
				}
			}
			if len(starts) != 1 || len(continues) != 1 || continues[0].TaskID != starts[0].TaskID ||
				continues[0].SessionID != "sess-1" || starts[0].SessionID != "sess-1" {
				t.Fatalf("starts %+v continues %+v", starts, continues)
			}
			if continues[0].Path != "/"+mode {
				t.Errorf("continue sent to %s", continues[0].Path)
			}
			// The task is over: the next request of the session starts a new one.
			if _, err := aipCollect(t, a, context.Background(), aipUserRequest("sess-1", "again")); err != nil {
				t.Fatal(err)
			}
			if ids := aipTaskIDs(f.Calls()); len(ids) != 2 {
				t.Errorf("task ids %v, want 2", ids)
			}
			// Another session never continues this one's task.
			if _, err := aipCollect(t, a, context.Background(), aipUserRequest("sess-2", "[ask] x")); err != nil {
				t.Fatal(err)
			}
			if _, err := aipCollect(t, a, context.Background(), aipUserRequest("sess-3", "y")); err != nil {
				t.Fatal(err)
			}
			if ids := aipTaskIDs(f.Calls()); len(ids) != 4 {
				t.Errorf("task ids %v, want 4", ids)
			}
		})
	}
}

func TestAIPStreamResume(t *testing.T) {
	const text = "[tool] [file] hi"
	ref := newAIPFake(t, "")
	want, err := aipCollect(t, newAIPClient(t, ref.URL(), aipFastOpts(AIPModeStream)), context.Background(), aipUserRequest("", text))
	if err != nil {
		t.Fatal(err)
	}
	for _, abort := range []bool{false, true} {
		for _, n := range []int{1, 3, 5} {
			t.Run(fmt.Sprintf("abort=%v/after=%d", abort, n), func(t *testing.T) {
				f := newAIPFake(t, "")
				f.set(func(f *aipFake) { f.cutAfter, f.cutAbort, f.replies = n, abort, 1 })
				a := newAIPClient(t, f.URL(), aipFastOpts(AIPModeStream))
				got, err := aipCollect(t, a, context.Background(), aipUserRequest("", text))
				if err != nil {
					t.Fatal(err)
				}
				if g, w := aipSummary(got), aipSummary(want); !reflect.DeepEqual(g, w) {
					t.Errorf("got  %q\nwant %q", g, w)
				}
				for i := 1; i < len(got); i++ {
					if got[i].Seq < got[i-1].Seq {
						t.Errorf("seq goes back at %d: %d after %d", i, got[i].Seq, got[i-1].Seq)
					}
				}
				var restreams []aipFakeCall
				for _, c := range f.Calls() {
					if c.Command == "re-stream" {
						restreams = append(restreams, c)
					}
				}
				if len(restreams) != 1 || restreams[0].LastEventSeq != int64(n) || restreams[0].Path != "/stream" {
					t.Errorf("re-streams %+v, want one with lastEventSeq %d", restreams, n)
				}
				if c := a.Breaker().Counts(); c.TotalFailures != 0 || c.Requests != 1 {
					t.Errorf("breaker counts %+v, want one successful exchange", c)
				}
			})
		}
	}
}

func TestAIPStreamUnresumable(t *testing.T) {
	for _, knob := range []string{"error-frame", "404"} {
		t.Run(knob, func(t *testing.T) {
			f := newAIPFake(t, "")
			f.set(func(f *aipFake) {
				f.cutAfter = 2
				f.restreamError = knob == "error-frame"
				f.restream404 = knob == "404"
			})
			a := newAIPClient(t, f.URL(), aipFastOpts(AIPModeStream))
			evs, err := aipCollect(t, a, context.Background(), aipUserRequest("", "[slow] hi"))
			var ue *Error
			if !errors.As(err, &ue) || ue.Code != translate.CodeStreamIncomplete {
				t.Fatalf("err = %v, want STREAM_INCOMPLETE", err)
			}
			if len(evs) != 2 {
				t.Errorf("%d events before the error, want 2: %q", len(evs), aipSummary(evs))
			}
			if c := a.Breaker().Counts(); c.TotalFailures != 1 {
				t.Errorf("breaker counts %+v, want one failure", c)
			}
		})
	}
	// Resuming disabled: a cut is at once an error.
	f := newAIPFake(t, "")
	f.set(func(f *aipFake) { f.cutAfter = 1 })
	opts := aipFastOpts(AIPModeStream)
	opts.ResumeRetries = -1
	a := newAIPClient(t, f.URL(), opts)
	if _, err := aipCollect(t, a, context.Background(), aipUserRequest("", "[slow] hi")); err == nil {
		t.Fatal("a cut stream without resuming ended well")
	}
}

func TestAIPCancelOnClientGone(t *testing.T) {
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		t.Run(mode, func(t *testing.T) {
			f := newAIPFake(t, "")
			a := newAIPClient(t, f.URL(), aipFastOpts(mode))
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
				_, err = s.Next()
				if err != nil {
					break
				}
			}
			if !errors.Is(err, ErrClientGone) {
				t.Errorf("Next after cancel: %v, want ErrClientGone", err)
			}
			task := aipTaskIDs(f.Calls())[0]
			select {
			case id := <-f.cancels:
				if id != task {
					t.Errorf("cancel for %s, want %s", id, task)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no cancel reached the partner")
			}
			if c := a.Breaker().Counts(); c.TotalFailures != 0 {
				t.Errorf("breaker counts %+v: a client going away is no failure", c)
			}
		})
	}
	// Close before the end cancels too; after a settled state it does not.
	f := newAIPFake(t, "")
	a := newAIPClient(t, f.URL(), aipFastOpts(AIPModeStream))
	s, err := a.Open(context.Background(), aipUserRequest("", "[slow] hi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := s.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	select {
	case <-f.cancels:
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not cancel the task")
	}
	if _, err := aipCollect(t, a, context.Background(), aipUserRequest("", "hi")); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	select {
	case id := <-f.cancels:
		t.Errorf("a finished task %s was cancelled", id)
	default:
	}
}

func TestAIPBreakerOpensOn500(t *testing.T) {
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		t.Run(mode, func(t *testing.T) {
			f := newAIPFake(t, "")
			f.set(func(f *aipFake) { f.fail500 = true })
			a := newAIPClient(t, f.URL(), aipFastOpts(mode), func(c *Config) {
				c.Breaker = BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute}
			})
			for i := range 3 {
				_, err := a.Open(context.Background(), aipUserRequest("", "hi"))
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

func TestAIPErrorAnswers(t *testing.T) {
	// {"detail":{"code":-32001,…}} with HTTP 404: the AIP code, no breaker failure.
	f := newAIPFake(t, "")
	f.set(func(f *aipFake) { f.rpc404 = true })
	a := newAIPClient(t, f.URL(), aipFastOpts(AIPModeRPC))
	_, err := a.Open(context.Background(), aipUserRequest("", "hi"))
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != "-32001" || ue.Status != 404 || !strings.Contains(ue.Error(), "Task not found") {
		t.Fatalf("err = %v, want -32001 HTTP 404", err)
	}
	// A JSON-RPC error (HTTP 200, "result": null) in both modes.
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		f := newAIPFake(t, "")
		a := newAIPClient(t, f.URL(), aipFastOpts(mode))
		_, err := a.Open(context.Background(), aipUserRequest("", "[badparams]"))
		if !errors.As(err, &ue) || ue.Code != "-32602" {
			t.Fatalf("%s: err = %v, want -32602", mode, err)
		}
		if ce := ue.Canonical(); ce.Code != "-32602" {
			t.Errorf("canonical %+v", ce)
		}
		if c := a.Breaker().Counts(); c.TotalFailures != 0 || c.Requests != 1 {
			t.Errorf("%s: breaker counts %+v: the request's fault is no failure", mode, c)
		}
	}
	if c := a.Breaker().Counts(); c.TotalFailures != 0 {
		t.Errorf("breaker counts %+v after a 404", c)
	}
	// Commands that need a task.
	if _, err := a.Open(context.Background(), &translate.Request{Command: translate.CommandCancel, Session: "none"}); err == nil {
		t.Error("cancel without a task accepted")
	}
}

func TestAIPMalformedIsFailure(t *testing.T) {
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		f := newAIPFake(t, "")
		f.set(func(f *aipFake) { f.garbage = true })
		a := newAIPClient(t, f.URL(), aipFastOpts(mode))
		_, err := aipCollect(t, a, context.Background(), aipUserRequest("", "hi"))
		var ue *Error
		if !errors.As(err, &ue) || ue.Code != translate.CodeUpstreamError {
			t.Errorf("%s: err = %v, want UPSTREAM_ERROR", mode, err)
		}
		if c := a.Breaker().Counts(); c.TotalFailures != 1 {
			t.Errorf("%s: breaker counts %+v, want one failure", mode, c)
		}
		for _, c := range f.Calls() {
			if c.Command == "re-stream" {
				t.Errorf("%s: a malformed stream was re-streamed", mode)
			}
		}
	}
}

func TestAIPForwardsHeaders(t *testing.T) {
	f := newAIPFake(t, "")
	f.set(func(f *aipFake) { f.awaitCompletion = true })
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		a := newAIPClient(t, f.URL(), aipFastOpts(mode))
		ctx := callctx.WithHeaders(context.Background(), map[string]string{"traceparent": tp})
		if _, err := aipCollect(t, a, ctx, aipUserRequest("", "hi")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range f.Calls() {
		if c.Command != "acs" && c.Trace != tp {
			t.Errorf("%s %s without traceparent", c.Path, c.Command)
		}
	}
}

func TestAIPResumeCommand(t *testing.T) {
	f := newAIPFake(t, "")
	a := newAIPClient(t, f.URL(), aipFastOpts(AIPModeStream))
	if _, err := aipCollect(t, a, context.Background(), aipUserRequest("s", "hi")); err != nil {
		t.Fatal(err)
	}
	task := aipTaskIDs(f.Calls())[0]
	evs, err := aipCollect(t, a, context.Background(), &translate.Request{Command: translate.CommandResume, ID: task, Session: "s", After: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start:assistant", "text:echo: hi", "end", "state:completed"}
	if got := aipSummary(evs); !reflect.DeepEqual(got, want) {
		t.Errorf("resume after 2: %q, want %q", got, want)
	}
}

func TestAIPSessionsBounded(t *testing.T) {
	m := newSessionMap[*aipTask](3)
	for i := range 5 {
		m.put(&aipTask{session: fmt.Sprint("s", i), id: fmt.Sprint("t", i), state: translate.StateInputRequired})
	}
	if m.len() != 3 {
		t.Fatalf("len %d", m.len())
	}
	if m.take("s0") != nil || m.take("s1") != nil {
		t.Error("the oldest sessions were kept")
	}
	if got := m.take("s4", inState(translate.StateAwaitingCompletion)); got != nil {
		t.Error("took a task in another state")
	}
	if got := m.take("s4", inState(translate.StateInputRequired)); got == nil || got.id != "t4" {
		t.Errorf("take s4 = %+v", got)
	}
	if m.take("s4") != nil {
		t.Error("a task was taken twice")
	}
	m.put(&aipTask{session: "s2", id: "t9"})
	if got := m.take("s2"); got == nil || got.id != "t9" || m.len() != 1 {
		t.Errorf("replace: %+v, len %d", got, m.len())
	}
}

func TestAIPNoGoroutineLeak(t *testing.T) {
	f := newAIPFake(t, "")
	f.set(func(f *aipFake) { f.awaitCompletion = true })
	clients := map[string]*AIP{}
	for _, mode := range []string{AIPModeStream, AIPModeRPC} {
		clients[mode] = newAIPClient(t, f.URL(), aipFastOpts(mode))
	}
	run := func() {
		for _, a := range clients {
			for _, text := range []string{"hi", "[tool] [file] x", "[fail] y"} {
				if _, err := aipCollect(t, a, context.Background(), aipUserRequest("", text)); err != nil {
					t.Fatal(err)
				}
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
		}
		// Idle connections the partner closed are redialled.
		f.srv.CloseClientConnections()
	}
	run() // warm up pools and timers
	time.Sleep(50 * time.Millisecond)
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

func BenchmarkAIPStream(b *testing.B) {
	f := newAIPFake(b, "")
	f.set(func(f *aipFake) { f.replies = 50 })
	a := newAIPClient(b, f.URL(), AIPOptions{Mode: AIPModeStream})
	req := aipUserRequest("", "hi")
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
}
