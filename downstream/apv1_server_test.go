package downstream_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

const apv1Tasks = "/ap/v1/agent/tasks"

// apv1Client does not follow redirects, so artifact downloads by URI show.
var apv1Client = &http.Client{
	Timeout:       20 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type apv1Resp struct {
	status int
	header http.Header
	body   []byte
	json   gjson.Result
}

func apv1Call(t *testing.T, method, url, body string) apv1Resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return apv1Send(t, req)
}

func apv1Send(t *testing.T, req *http.Request) apv1Resp {
	t.Helper()
	resp, err := apv1Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apv1Resp{status: resp.StatusCode, header: resp.Header, body: b, json: gjson.ParseBytes(b)}
}

// apv1OK asserts a 200 JSON answer.
func apv1OK(t *testing.T, r apv1Resp) gjson.Result {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q", ct)
	}
	return r.json
}

// apv1Bridges returns the base URL of a bridge fronting the reference agent
// over the Agent API, and of one fronting it in process.
func apv1Bridges(t *testing.T, opts downstream.Options) map[string]string {
	t.Helper()
	agent := referenceAgent(t, 20*time.Millisecond)
	overHTTP, _ := agentAPIBridge(t, agent+"/process", upstream.Config{}, opts)
	return map[string]string{"agentapi": overHTTP, "inproc": apv1InProc(t, opts)}
}

func apv1InProc(t *testing.T, opts downstream.Options) string {
	t.Helper()
	a := refagent.New()
	a.Delay = 20 * time.Millisecond
	if opts.Logger == nil {
		opts.Logger = quietLog()
	}
	return serve(t, downstream.New(opts, &downstream.Routing{Routes: []downstream.Route{
		{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}}))
}

func apv1CreateTask(t *testing.T, base, body string) string {
	t.Helper()
	task := apv1OK(t, apv1Call(t, "POST", base+apv1Tasks, body))
	id := task.Get("task_id").String()
	if id == "" || !task.Get("artifacts").IsArray() || !task.Get("additional_input").IsObject() {
		t.Fatalf("task %s", task.Raw)
	}
	return id
}

func apv1Step(t *testing.T, base, task, input string) gjson.Result {
	t.Helper()
	body := `{"input":` + string(gjson.AppendJSONString(nil, input)) + `}`
	if input == "" {
		body = `{}`
	}
	return apv1OK(t, apv1Call(t, "POST", base+apv1Tasks+"/"+task+"/steps", body))
}

// checkStep asserts the shape every Step must have.
func checkStep(t *testing.T, s gjson.Result, task string) {
	t.Helper()
	for _, k := range []string{"task_id", "step_id", "status", "is_last", "artifacts", "input", "additional_input", "name", "output", "additional_output"} {
		if !s.Get(k).Exists() {
			t.Fatalf("step lacks %s: %s", k, s.Raw)
		}
	}
	if s.Get("task_id").String() != task || !s.Get("artifacts").IsArray() || !s.Get("additional_input").IsObject() {
		t.Fatalf("step %s", s.Raw)
	}
}

func TestAPv1StepsPerBehaviour(t *testing.T) {
	for name, base := range apv1Bridges(t, downstream.Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Run("echo", func(t *testing.T) {
				task := apv1CreateTask(t, base, `{"input":"hello","additional_input":{"k":1}}`)
				s := apv1Step(t, base, task, "")
				checkStep(t, s, task)
				if s.Get("output").String() != "echo: hello" || !s.Get("is_last").Bool() || s.Get("status").String() != "completed" {
					t.Fatalf("first step without input uses the task's: %s", s.Raw)
				}
				if s.Get("additional_output.state").String() != "completed" || !s.Get("additional_output.usage").IsObject() {
					t.Fatalf("additional_output %s", s.Get("additional_output").Raw)
				}
			})
			t.Run("tool", func(t *testing.T) {
				task := apv1CreateTask(t, base, `{"input":"weather [tool]"}`)
				s := apv1Step(t, base, task, "weather [tool]")
				checkStep(t, s, task)
				call := s.Get("additional_output.tool_calls.0")
				if call.Get("name").String() != refagent.ToolName || call.Get("arguments").String() != refagent.ToolArguments ||
					call.Get("output").String() != refagent.ToolOutput || call.Get("call_id").String() == "" {
					t.Fatalf("tool call not in additional_output: %s", s.Raw)
				}
				if s.Get("output").String() != "echo: weather [tool]" || !s.Get("is_last").Bool() {
					t.Fatalf("step %s", s.Raw)
				}
			})
			t.Run("file", func(t *testing.T) {
				task := apv1CreateTask(t, base, `{"input":"report [file]"}`)
				s := apv1Step(t, base, task, "")
				checkStep(t, s, task)
				a := s.Get("artifacts.0")
				if a.Get("file_name").String() != refagent.FileName || !a.Get("agent_created").Bool() || a.Get("artifact_id").String() == "" {
					t.Fatalf("step artifacts %s", s.Get("artifacts").Raw)
				}
				id := a.Get("artifact_id").String()
				list := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task+"/artifacts", ""))
				if list.Get("artifacts.#").Int() != 1 || list.Get("artifacts.0.artifact_id").String() != id ||
					list.Get("pagination.total_items").Int() != 1 {
					t.Fatalf("artifact list %s", list.Raw)
				}
				got := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task, ""))
				if got.Get("artifacts.0.artifact_id").String() != id {
					t.Fatalf("task artifacts %s", got.Raw)
				}
				dl := apv1Call(t, "GET", base+apv1Tasks+"/"+task+"/artifacts/"+id, "")
				if dl.status != http.StatusFound || dl.header.Get("Location") != refagent.FileURI || dl.json.Get("uri").String() != refagent.FileURI {
					t.Fatalf("download of a URI artifact: %d %v %s", dl.status, dl.header, dl.body)
				}
			})
			t.Run("fail", func(t *testing.T) {
				task := apv1CreateTask(t, base, `{}`)
				s := apv1Step(t, base, task, "x [fail]")
				checkStep(t, s, task)
				if !strings.Contains(s.Get("output").String(), refagent.FailMessage) || !s.Get("is_last").Bool() ||
					s.Get("additional_output.state").String() != "failed" || s.Get("additional_output.error.code").String() != refagent.FailCode {
					t.Fatalf("failed step %s", s.Raw)
				}
			})
			t.Run("ask", func(t *testing.T) {
				task := apv1CreateTask(t, base, `{"input":"x [ask]"}`)
				s := apv1Step(t, base, task, "x [ask]")
				checkStep(t, s, task)
				if s.Get("is_last").Bool() || s.Get("status").String() != "completed" || !strings.Contains(s.Get("output").String(), refagent.AskPrompt) {
					t.Fatalf("asking step %s", s.Raw)
				}
				s2 := apv1Step(t, base, task, "Paris")
				if !s2.Get("is_last").Bool() || s2.Get("output").String() != "echo: Paris" {
					t.Fatalf("answer step %s", s2.Raw)
				}
				// A step after the last: a new turn of the same session, 200.
				s3 := apv1Step(t, base, task, "y")
				if !s3.Get("is_last").Bool() || s3.Get("output").String() != "echo: y" || s3.Get("status").String() != "completed" {
					t.Fatalf("step after the last %s", s3.Raw)
				}
				steps := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task+"/steps", ""))
				if steps.Get("steps.#").Int() != 3 || steps.Get("pagination.total_items").Int() != 3 {
					t.Fatalf("steps %s", steps.Raw)
				}
				for i, id := range []string{s.Get("step_id").String(), s2.Get("step_id").String(), s3.Get("step_id").String()} {
					if steps.Get(fmt.Sprintf("steps.%d.step_id", i)).String() != id {
						t.Fatalf("steps out of order: %s", steps.Raw)
					}
					one := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task+"/steps/"+id, ""))
					if one.Get("step_id").String() != id || one.Get("output").String() != steps.Get(fmt.Sprintf("steps.%d.output", i)).String() {
						t.Fatalf("GET step %s", one.Raw)
					}
				}
			})
		})
	}
}

func TestAPv1TaskCreateAndGet(t *testing.T) {
	base := apv1InProc(t, downstream.Options{})
	task := apv1OK(t, apv1Call(t, "POST", base+apv1Tasks, `{"input":"Write the word 'Washington' to a .txt file","additional_input":{"test_run_id":"123"}}`))
	id := task.Get("task_id").String()
	got := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+id, ""))
	if got.Get("input").String() != "Write the word 'Washington' to a .txt file" || got.Get("additional_input.test_run_id").String() != "123" ||
		got.Get("artifacts").Raw != "[]" {
		t.Fatalf("task %s", got.Raw)
	}
	// No body at all: input null, additional_input {}.
	empty := apv1OK(t, apv1Call(t, "POST", base+apv1Tasks, ""))
	if empty.Get("input").Type != gjson.Null || empty.Get("additional_input").Raw != "{}" || empty.Get("artifacts").Raw != "[]" {
		t.Fatalf("empty task %s", empty.Raw)
	}
}

func TestAPv1Pagination(t *testing.T) {
	base := apv1InProc(t, downstream.Options{})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, apv1CreateTask(t, base, fmt.Sprintf(`{"input":"t%d"}`, i)))
	}
	cases := []struct {
		query             string
		page, size, pages int
		want              []string
	}{
		{"", 1, 10, 1, ids},
		{"?page_size=2", 1, 2, 3, ids[0:2]},
		{"?page_size=2&current_page=2", 2, 2, 3, ids[2:4]},
		{"?page_size=2&current_page=3", 3, 2, 3, ids[4:5]},
		{"?page_size=2&current_page=4", 4, 2, 3, nil},
		{"?page_size=1&current_page=1", 1, 1, 5, ids[0:1]},
		{"?page_size=5", 1, 5, 1, ids},
	}
	for _, c := range cases {
		r := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+c.query, ""))
		p := r.Get("pagination")
		if p.Get("total_items").Int() != 5 || p.Get("total_pages").Int() != int64(c.pages) ||
			p.Get("current_page").Int() != int64(c.page) || p.Get("page_size").Int() != int64(c.size) {
			t.Fatalf("%s: pagination %s", c.query, p.Raw)
		}
		var got []string
		for _, x := range r.Get("tasks").Array() {
			got = append(got, x.Get("task_id").String())
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || !r.Get("tasks").IsArray() {
			t.Fatalf("%s: tasks %v, want %v", c.query, got, c.want)
		}
	}
	for _, q := range []string{"?page_size=0", "?current_page=0", "?page_size=x", "?current_page=-1"} {
		r := apv1Call(t, "GET", base+apv1Tasks+q, "")
		if r.status != http.StatusBadRequest || r.json.Get("message").String() == "" {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
	}
	// Steps paginate the same way.
	task := ids[0]
	for i := 0; i < 3; i++ {
		apv1Step(t, base, task, fmt.Sprint("s", i))
	}
	r := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task+"/steps?page_size=2&current_page=2", ""))
	if r.Get("steps.#").Int() != 1 || r.Get("steps.0.output").String() != "echo: s2" || r.Get("pagination.total_pages").Int() != 2 {
		t.Fatalf("steps page %s", r.Raw)
	}
}

// multipartBody writes a multipart form with a file field and optional fields.
func multipartBody(t *testing.T, field, name string, data []byte, fields map[string]string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = w.WriteField(k, v)
	}
	if field != "" {
		fw, err := w.CreateFormFile(field, name)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(data)
	}
	w.Close()
	return w.FormDataContentType(), &buf
}

func apv1Upload(t *testing.T, url, field, name string, data []byte, fields map[string]string) apv1Resp {
	t.Helper()
	ct, body := multipartBody(t, field, name, data, fields)
	req, _ := http.NewRequest("POST", url, body)
	req.Header.Set("Content-Type", ct)
	return apv1Send(t, req)
}

func TestAPv1ArtifactUploadDownload(t *testing.T) {
	base := apv1InProc(t, downstream.Options{APv1: downstream.APv1Options{MaxArtifactBytes: 1000, MaxArtifacts: 3}})
	task := apv1CreateTask(t, base, `{}`)
	arts := base + apv1Tasks + "/" + task + "/artifacts"

	a := apv1OK(t, apv1Upload(t, arts, "file", "test_output.txt", []byte("Washington\n"), map[string]string{"relative_path": "out/"}))
	id := a.Get("artifact_id").String()
	if id == "" || a.Get("file_name").String() != "test_output.txt" || a.Get("agent_created").Bool() || a.Get("relative_path").String() != "out/" {
		t.Fatalf("artifact %s", a.Raw)
	}
	dl := apv1Call(t, "GET", arts+"/"+id, "")
	if dl.status != http.StatusOK || string(dl.body) != "Washington\n" || dl.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download %d %v %q", dl.status, dl.header, dl.body)
	}
	if _, params, err := mime.ParseMediaType(dl.header.Get("Content-Disposition")); err != nil || params["filename"] != "test_output.txt" {
		t.Fatalf("content disposition %q", dl.header.Get("Content-Disposition"))
	}
	list := apv1OK(t, apv1Call(t, "GET", arts, ""))
	if list.Get("artifacts.0.artifact_id").String() != id || list.Get("pagination.total_items").Int() != 1 {
		t.Fatalf("list %s", list.Raw)
	}
	if got := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task, "")); got.Get("artifacts.0.file_name").String() != "test_output.txt" {
		t.Fatalf("task %s", got.Raw)
	}
	// No relative_path: null. A path in the file name keeps its base.
	b := apv1OK(t, apv1Upload(t, arts, "file", "dir/ü name.bin", []byte{0, 1, 2}, nil))
	if b.Get("relative_path").Type != gjson.Null || b.Get("file_name").String() != "ü name.bin" {
		t.Fatalf("artifact %s", b.Raw)
	}
	dl = apv1Call(t, "GET", arts+"/"+b.Get("artifact_id").String(), "")
	if _, params, _ := mime.ParseMediaType(dl.header.Get("Content-Disposition")); params["filename"] != "ü name.bin" || !bytes.Equal(dl.body, []byte{0, 1, 2}) {
		t.Fatalf("download %v %q", dl.header, dl.body)
	}

	if r := apv1Upload(t, arts, "file", "big.bin", bytes.Repeat([]byte("x"), 1001), nil); r.status != http.StatusRequestEntityTooLarge || r.json.Get("message").String() == "" {
		t.Fatalf("over the per-file limit: %d %s", r.status, r.body)
	}
	if r := apv1Upload(t, arts, "", "", nil, map[string]string{"relative_path": "x"}); r.status != http.StatusBadRequest {
		t.Fatalf("no file field: %d %s", r.status, r.body)
	}
	if r := apv1Call(t, "POST", arts, `{"file":"x"}`); r.status != http.StatusBadRequest {
		t.Fatalf("JSON upload: %d %s", r.status, r.body)
	}
	if r := apv1Call(t, "GET", arts+"/nope", ""); r.status != http.StatusNotFound || r.json.Get("message").String() != "Artifact with nope not found." {
		t.Fatalf("unknown artifact: %d %s", r.status, r.body)
	}
	// Past MaxArtifacts the oldest bytes go; the listing keeps the newest.
	for i := 0; i < 3; i++ {
		apv1OK(t, apv1Upload(t, arts, "file", fmt.Sprint("f", i), []byte("x"), nil))
	}
	if r := apv1Call(t, "GET", arts+"/"+id, ""); r.status != http.StatusNotFound {
		t.Fatalf("evicted artifact: %d %s", r.status, r.body)
	}
	if l := apv1OK(t, apv1Call(t, "GET", arts, "")); l.Get("pagination.total_items").Int() != 3 {
		t.Fatalf("list after eviction %s", l.Raw)
	}
}

func TestAPv1NotFoundAndBadRequests(t *testing.T) {
	base := apv1InProc(t, downstream.Options{})
	task := apv1CreateTask(t, base, `{}`)
	for _, p := range []struct{ method, path, item, id string }{
		{"GET", "/nope", "Task", "nope"},
		{"GET", "/nope/steps", "Task", "nope"},
		{"POST", "/nope/steps", "Task", "nope"},
		{"GET", "/nope/steps/s1", "Task", "nope"},
		{"GET", "/nope/artifacts", "Task", "nope"},
		{"POST", "/nope/artifacts", "Task", "nope"},
		{"GET", "/nope/artifacts/a1", "Task", "nope"},
		{"GET", "/" + task + "/steps/s1", "Step", "s1"},
		{"GET", "/" + task + "/artifacts/a1", "Artifact", "a1"},
	} {
		r := apv1Call(t, p.method, base+apv1Tasks+p.path, "")
		if r.status != http.StatusNotFound || r.json.Get("message").String() != p.item+" with "+p.id+" not found." ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s %s: %d %s", p.method, p.path, r.status, r.body)
		}
	}
	for _, p := range []string{"/ap/v1/agent", "/ap/v1/agent/tasks/" + task + "/other", "/ap/v1/agent/tasks/" + task + "/steps/a/b", "/ap/v1/agent/tasksx"} {
		if r := apv1Call(t, "GET", base+p, ""); r.status != http.StatusNotFound || r.json.Get("message").String() == "" {
			t.Fatalf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	for _, c := range []struct{ path, body, mention string }{
		{"", `{"input":`, "JSON"},
		{"", `[1]`, "object"},
		{"", `{"input":3}`, "input"},
		{"", `{"additional_input":"x"}`, "additional_input"},
		{"/" + task + "/steps", `{"input":`, "JSON"},
		{"/" + task + "/steps", `{"additional_input":[]}`, "additional_input"},
	} {
		r := apv1Call(t, "POST", base+apv1Tasks+c.path, c.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.json.Get("message").String(), c.mention) {
			t.Fatalf("POST %s %s: %d %s", c.path, c.body, r.status, r.body)
		}
	}
	if r := apv1Call(t, "DELETE", base+apv1Tasks+"/"+task, ""); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET" {
		t.Fatalf("DELETE: %d %v", r.status, r.header)
	}
	// Tasks belong to their route: another route does not see them.
	a := refagent.New()
	srv := downstream.New(downstream.Options{Logger: quietLog()}, &downstream.Routing{Routes: []downstream.Route{
		{Name: "one", PathPrefix: "/one", Proto: translate.ProtoAgentAPI, Agent: a},
		{Name: "two", PathPrefix: "/two", Proto: translate.ProtoAgentAPI, Agent: a}}})
	b2 := serve(t, srv)
	id := apv1CreateTask(t, b2+"/one", `{"input":"hi"}`)
	if r := apv1Call(t, "GET", b2+"/two"+apv1Tasks+"/"+id, ""); r.status != http.StatusNotFound {
		t.Fatalf("other route sees the task: %d", r.status)
	}
	if s := apv1Step(t, b2+"/one", id, ""); s.Get("output").String() != "echo: hi" {
		t.Fatalf("step under a prefix %s", s.Raw)
	}
	if l := apv1OK(t, apv1Call(t, "GET", b2+"/two"+apv1Tasks, "")); l.Get("pagination.total_items").Int() != 0 {
		t.Fatalf("other route lists %s", l.Raw)
	}
}

func TestAPv1StepTimeoutAnswersRunning(t *testing.T) {
	a := refagent.New()
	a.Delay = 60 * time.Millisecond
	base := serve(t, downstream.New(downstream.Options{Logger: quietLog(), APv1: downstream.APv1Options{StepTimeout: 50 * time.Millisecond}},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}}))
	task := apv1CreateTask(t, base, `{}`)
	s := apv1Step(t, base, task, "x [slow]")
	if s.Get("status").String() != "running" || s.Get("is_last").Bool() {
		t.Fatalf("timed-out step %s", s.Raw)
	}
	// While it runs, another step is refused.
	if r := apv1Call(t, "POST", base+apv1Tasks+"/"+task+"/steps", `{"input":"again"}`); r.status != http.StatusConflict {
		t.Fatalf("step while one runs: %d %s", r.status, r.body)
	}
	id := s.Get("step_id").String()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := apv1OK(t, apv1Call(t, "GET", base+apv1Tasks+"/"+task+"/steps/"+id, ""))
		if g.Get("status").String() == "completed" {
			if g.Get("output").String() != "echo: x [slow]" || !g.Get("is_last").Bool() {
				t.Fatalf("completed step %s", g.Raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step never completed: %s", g.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAPv1ConcurrentTasks(t *testing.T) {
	base := apv1InProc(t, downstream.Options{})
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := apv1Call(t, "POST", base+apv1Tasks, fmt.Sprintf(`{"input":"n%d"}`, i))
			id := r.json.Get("task_id").String()
			s := apv1Call(t, "POST", base+apv1Tasks+"/"+id+"/steps", "")
			if s.status != 200 || s.json.Get("output").String() != fmt.Sprintf("echo: n%d", i) {
				errs <- fmt.Sprintf("%d: %d %s", i, s.status, s.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestAPv1NoGoroutineAfterShutdown(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	apv1Client.CloseIdleConnections()
	before := runtime.NumGoroutine()

	a := refagent.New()
	a.Delay = 100 * time.Millisecond
	srv := downstream.New(downstream.Options{Logger: quietLog(), APv1: downstream.APv1Options{StepTimeout: 20 * time.Millisecond}},
		&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Proto: translate.ProtoAgentAPI, Agent: a}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()
	base := "http://" + ln.Addr().String()
	for i := 0; i < 5; i++ {
		task := apv1CreateTask(t, base, `{"input":"hi [tool] [file]"}`)
		apv1Step(t, base, task, "")
		apv1Upload(t, base+apv1Tasks+"/"+task+"/artifacts", "file", "f.txt", []byte("x"), nil)
	}
	// One step is still running (slow) when the server shuts down.
	task := apv1CreateTask(t, base, `{}`)
	if s := apv1Step(t, base, task, "x [slow]"); s.Get("status").String() != "running" {
		t.Fatalf("slow step %s", s.Raw)
	}
	apv1Client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	<-served
	waitGoroutines(t, before, "shutdown")
}
