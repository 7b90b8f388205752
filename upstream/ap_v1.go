package upstream

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/translate"
	v1 "github.com/agentbridge/bridge/translate/agentprotocol/v1"
)

// tasksPath is the v1 tasks collection under base.
func (s *apStream) tasksPath() string { return s.a.v1Root() + "/agent/tasks" }

// openV1 creates the task, or takes the session's task waiting for input,
// and prepares the turn's first step; Next posts it.
func (s *apStream) openV1(req *translate.Request) error {
	s.stepBody, _ = json.Marshal(v1.StepRequestFor(req))
	if s.sess.remote != "" {
		s.task, s.sess.remote = s.sess.remote, "" // taken: a waiting task is answered once
		s.started = true
		return nil
	}
	body, err := json.Marshal(v1.TaskRequest(req))
	if err != nil {
		return &Error{Code: translate.CodeBadRequest, Err: err}
	}
	s.started = true
	ans, err := s.a.unary(s.ctx, s.tasksPath(), body, s.hdr)
	if err != nil {
		return err
	}
	var task v1.Task
	if err := json.Unmarshal(ans, &task); err != nil || task.TaskID == "" {
		return malformedError(0, "the answer to POST %s is not a task: %.200s", s.tasksPath(), ans)
	}
	s.task = task.TaskID
	s.queue = append(s.queue, &translate.Event{Kind: translate.KindState, State: translate.StateSubmitted})
	return nil
}

// nextStep posts the turn's next step and queues its events: the first
// carries the input, later ones (after a step that was not completed) are
// empty.
func (s *apStream) nextStep() error {
	if s.steps >= s.a.opts.MaxSteps {
		return &Error{Code: translate.CodeUpstreamError,
			Err: fmt.Errorf("agentprotocol v1: task %s answered no completed step in %d steps", s.task, s.steps)}
	}
	body := s.stepBody
	if s.steps > 0 {
		body = []byte("{}")
	}
	s.steps++
	path := s.tasksPath() + "/" + url.PathEscape(s.task) + "/steps"
	ans, err := s.a.unary(s.ctx, path, body, s.hdr)
	if err != nil {
		return err
	}
	var st v1.Step
	if err := json.Unmarshal(ans, &st); err != nil || st.StepID == "" && st.Status == "" {
		return malformedError(0, "the answer to POST %s is not a step: %.200s", path, ans)
	}
	for _, ev := range v1StepEvents(&st, s.artifactURL) {
		if ev.Kind == translate.KindState && ev.State == translate.StateWorking {
			if s.working {
				continue
			}
			s.working = true
		}
		s.queue = append(s.queue, ev)
		if ev.Kind == translate.KindState && ev.State.Settled() {
			s.settle(ev.State)
		}
	}
	return nil
}

// artifactURL is where the agent serves an artifact of the task.
func (s *apStream) artifactURL(id string) string {
	u := *s.a.c.url
	u.Path = s.a.base + s.tasksPath() + "/" + s.task + "/artifacts/" + id
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// v1StepEvents is v1.StepEvents, plus a failure: a last step whose
// additional_output says {"state": "failed"|"rejected"|"canceled", "error":
// {code, message}} (the bridge's own v1 server writes it) ends in that
// state rather than completed.
func v1StepEvents(st *v1.Step, artifactURL func(string) string) []*translate.Event {
	evs := v1.StepEvents(st, artifactURL)
	if !st.IsLast || len(st.AdditionalOutput) == 0 || len(evs) == 0 {
		return evs
	}
	ao := gjson.ParseBytes(st.AdditionalOutput)
	state := translate.State(ao.Get("state").Str)
	switch state {
	case translate.StateFailed, translate.StateRejected, translate.StateCanceled:
	default:
		return evs
	}
	last := evs[len(evs)-1]
	last.State = state
	if e := ao.Get("error"); e.IsObject() {
		last.Err = &translate.Error{Code: e.Get("code").Str, Message: e.Get("message").Str}
	} else if state != translate.StateCanceled {
		last.Err = &translate.Error{Code: translate.CodeUpstreamError, Message: "the agent's step failed"}
	}
	return evs
}
