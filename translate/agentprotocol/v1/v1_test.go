package v1

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

func TestWireShapes(t *testing.T) {
	in := "hi"
	task, _ := json.Marshal(Task{Input: &in, TaskID: "t1"})
	if got := string(task); got != `{"input":"hi","additional_input":{},"task_id":"t1","artifacts":[]}` {
		t.Errorf("task: %s", got)
	}
	step, _ := json.Marshal(Step{TaskID: "t1", StepID: "s1", Status: StatusCreated})
	if got := string(step); got != `{"input":null,"additional_input":{},"task_id":"t1","step_id":"s1","name":null,"status":"created","output":null,"additional_output":null,"artifacts":[],"is_last":false}` {
		t.Errorf("step: %s", got)
	}
	if got := string(AppendNotFound(nil, "Task", "t9")); got != `{"message":"Task with t9 not found."}` {
		t.Errorf("404: %s", got)
	}
	// The doc examples decode.
	for _, f := range []string{"testdata/v1-create-task-response.example.json", "testdata/v1-execute-step-response.example.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s Step
		if err := json.Unmarshal(b, &s); err != nil || s.TaskID != "e6d768bb-4c50-4007-9853-aeffb46c77be" {
			t.Errorf("%s: %+v %v", f, s, err)
		}
	}
}

func TestDecodeBodies(t *testing.T) {
	tests := []struct {
		body    string
		input   string
		add     string
		wantErr bool
	}{
		{``, "", "", false},
		{`{}`, "", "", false},
		{`{"input":null,"additional_input":null}`, "", "", false},
		{`{"input":"Write the word 'Washington' to a .txt file","additional_input":{"test_run_id":"123"}}`, "Write the word 'Washington' to a .txt file", `{"test_run_id":"123"}`, false},
		{`{"input":5}`, "", "", true},
		{`{"additional_input":[1]}`, "", "", true},
		{`[]`, "", "", true},
		{`{`, "", "", true},
	}
	for _, tt := range tests {
		b, err := DecodeStepRequest([]byte(tt.body))
		if tt.wantErr {
			if !errors.Is(err, translate.ErrBadRequest) {
				t.Errorf("%s: %v", tt.body, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		var in string
		if b.Input != nil {
			in = *b.Input
		}
		if in != tt.input || string(b.AdditionalInput) != tt.add {
			t.Errorf("%s: %q %s", tt.body, in, b.AdditionalInput)
		}
		if _, err := DecodeTaskRequest([]byte(tt.body)); err != nil {
			t.Errorf("task %s: %v", tt.body, err)
		}
	}
}

func TestPaginate(t *testing.T) {
	tests := []struct {
		total, page, size int
		want              Pagination
		start, end        int
	}{
		{0, 1, 10, Pagination{0, 0, 1, 10}, 0, 0},
		{42, 1, 25, Pagination{42, 2, 1, 25}, 0, 25},
		{42, 2, 25, Pagination{42, 2, 2, 25}, 25, 42},
		{42, 3, 25, Pagination{42, 2, 3, 25}, 42, 42},
		{10, 1, 10, Pagination{10, 1, 1, 10}, 0, 10},
		{11, 2, 10, Pagination{11, 2, 2, 10}, 10, 11},
		{3, 0, 0, Pagination{3, 1, 1, 10}, 0, 3},
		{5, 1 << 62, 1 << 40, Pagination{5, 1, 1 << 62, 1 << 40}, 5, 5},
	}
	for _, tt := range tests {
		p, s, e := Paginate(tt.total, tt.page, tt.size)
		if p != tt.want || s != tt.start || e != tt.end {
			t.Errorf("Paginate(%d,%d,%d) = %+v %d %d, want %+v %d %d", tt.total, tt.page, tt.size, p, s, e, tt.want, tt.start, tt.end)
		}
	}
	items, p := Page([]int{1, 2, 3}, 1, 1)
	if len(items) != 1 || p.PageSize != 1 || p.TotalPages != 3 {
		t.Errorf("Page: %v %+v", items, p)
	}
	for _, q := range [][2]string{{"", ""}, {"2", "5"}, {"1", "5000"}} {
		if _, _, err := ParsePage(q[0], q[1]); err != nil {
			t.Errorf("%v: %v", q, err)
		}
	}
	if _, size, _ := ParsePage("", "5000"); size != MaxPageSize {
		t.Errorf("cap: %d", size)
	}
	for _, q := range [][2]string{{"0", ""}, {"", "0"}, {"x", ""}, {"", "-1"}} {
		if _, _, err := ParsePage(q[0], q[1]); !errors.Is(err, translate.ErrBadRequest) {
			t.Errorf("%v: %v", q, err)
		}
	}
}

func TestStepRequest(t *testing.T) {
	taskIn := "task prompt"
	task := &Task{TaskID: "t1", Input: &taskIn, AdditionalInput: Object(`{"mode":"x"}`)}
	r := StepRequest(task, &StepRequestBody{}, true)
	if r.Command != translate.CommandStart || r.ID != "t1" || r.Session != "t1" || r.LastInput().Text() != "task prompt" || !strings.Contains(string(r.Ext.Raw), `"mode"`) {
		t.Errorf("first: %+v", r)
	}
	y := "y"
	r = StepRequest(task, &StepRequestBody{Input: &y}, false)
	if r.Command != translate.CommandContinue || r.LastInput().Text() != "y" || r.Ext.Raw != nil {
		t.Errorf("later: %+v", r)
	}
	body := TaskRequest(StepRequest(task, nil, true))
	if *body.Input != "task prompt" || string(body.AdditionalInput) != `{"mode":"x"}` {
		t.Errorf("client body: %+v", body)
	}
}

func text(msg, s string, delta bool) *translate.Event {
	p := translate.TextPart(s)
	return &translate.Event{Kind: translate.KindContent, MessageID: msg, Part: &p, Delta: delta}
}

func state(s translate.State) *translate.Event {
	return &translate.Event{Kind: translate.KindState, State: s}
}

func TestStepBuilder(t *testing.T) {
	art := &translate.Event{Kind: translate.KindArtifact, Artifact: &translate.Artifact{ID: "a1", Parts: []translate.Part{{Kind: translate.PartFile, URI: "https://example.com/report.txt"}}}}
	artMore := &translate.Event{Kind: translate.KindArtifact, Artifact: &translate.Artifact{ID: "a1", Parts: []translate.Part{translate.TextPart("x")}, Append: true, Last: true}}
	tests := []struct {
		name   string
		evs    []*translate.Event
		status StepStatus
		last   bool
		output string
		arts   []string
	}{
		{"nothing yet", nil, StatusCreated, false, "", nil},
		{"running", []*translate.Event{state(translate.StateWorking), text("m", "ec", true)}, StatusRunning, false, "ec", nil},
		{"completed with deltas and snapshot", []*translate.Event{text("m", "ec", true), text("m", "ho", true), text("m", "echo", false),
			{Kind: translate.KindMessageEnd, MessageID: "m", Message: &translate.Message{ID: "m", Parts: []translate.Part{translate.TextPart("echo")}}},
			state(translate.StateCompleted)}, StatusCompleted, true, "echo", nil},
		{"input required is not last", []*translate.Event{text("m", "hm", true), {Kind: translate.KindInputRequest, Parts: []translate.Part{translate.TextPart("need more input")}},
			state(translate.StateInputRequired)}, StatusCompleted, false, "hm\n\nneed more input", nil},
		{"failed carries the error", []*translate.Event{text("m", "partial", true),
			{Kind: translate.KindState, State: translate.StateFailed, Err: &translate.Error{Code: "AGENT_FAILED", Message: "failed on request"}}},
			StatusCompleted, true, "partial\n\nError: failed on request", nil},
		{"artifacts", []*translate.Event{art, artMore, {Kind: translate.KindArtifact, Artifact: &translate.Artifact{Name: "b.txt"}}, state(translate.StateCompleted)},
			StatusCompleted, true, "", []string{"a1:report.txt", "s1-artifact-2:b.txt"}},
		{"user text skipped", []*translate.Event{{Kind: translate.KindMessageStart, MessageID: "u", Message: &translate.Message{ID: "u", Role: translate.RoleUser}}, text("u", "mine", true), state(translate.StateCanceled)},
			StatusCompleted, true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewStepBuilder("t1", "s1", nil)
			for _, ev := range tt.evs {
				b.Apply(ev)
			}
			s := b.Step()
			var out string
			if s.Output != nil {
				out = *s.Output
			}
			var arts []string
			for _, a := range s.Artifacts {
				arts = append(arts, a.ArtifactID+":"+a.FileName)
			}
			if s.Status != tt.status || s.IsLast != tt.last || out != tt.output || strings.Join(arts, ",") != strings.Join(tt.arts, ",") {
				t.Errorf("got %s last=%v output=%q arts=%v", s.Status, s.IsLast, out, arts)
			}
			if _, err := json.Marshal(s); err != nil {
				t.Fatal(err)
			}
		})
	}
	b := NewStepBuilder("t1", "s1", nil)
	b.Apply(art)
	b.Apply(artMore)
	if got := b.Artifacts(); len(got) != 1 || len(got[0].Parts) != 2 || !got[0].Last {
		t.Errorf("merged artifacts: %+v", got)
	}
	b.Apply(&translate.Event{Kind: translate.KindState, State: translate.StateFailed, Err: &translate.Error{Code: "X", Message: "m"}})
	if s := b.Step(); !strings.Contains(string(s.AdditionalOutput), `"state":"failed"`) || !strings.Contains(string(s.AdditionalOutput), `"code":"X"`) {
		t.Errorf("additional_output %s", s.AdditionalOutput)
	}
}

func TestStepEvents(t *testing.T) {
	out := "hello"
	evs := StepEvents(&Step{StepID: "s1", Status: StatusCompleted, Output: &out, IsLast: true,
		Artifacts: []Artifact{{ArtifactID: "a1", FileName: "f.txt", AgentCreated: true}}},
		func(id string) string { return "/ap/v1/agent/tasks/t1/artifacts/" + id })
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind.String())
	}
	if got := strings.Join(kinds, ","); got != "message_start,content,message_end,artifact,state" || evs[len(evs)-1].State != translate.StateCompleted {
		t.Errorf("last step: %s", got)
	}
	evs = StepEvents(&Step{StepID: "s2", Status: StatusCompleted, Output: &out}, nil)
	if last := evs[len(evs)-1]; last.State != translate.StateInputRequired || translate.PartsText(last.Parts) != "hello" {
		t.Errorf("not last: %+v", last)
	}
}
