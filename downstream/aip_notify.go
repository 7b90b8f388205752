package downstream

import (
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentbridge/bridge/internal/store"
	"github.com/agentbridge/bridge/translate/aip"
)

// Notifications (spec §6.3). Configs are kept per task id, a task may have
// configs before it exists (the spec's flow registers one, then starts the
// task with notification/start). Ids are made by the partner
// ("notification-<uuid>"). A config id that the task does not have is
// -32001 on set, get, delete and notification/start.
//
// Deliveries never block a task: the state change encodes the Task and
// hands it to a bounded queue; a few worker goroutines owned by the Server
// post it (with retries and backoff), one worker per task so that a task's
// callbacks arrive in order. A full queue drops the callback (logged).
// Shutdown stops the workers.

// aipSubscription is what notification/start asked for.
type aipSubscription struct {
	states []aip.TaskState
}

const (
	notifyWorkers    = 4
	notifyQueueDepth = 256
	notifyTokenHdr   = "X-ACPS-AIP-Notification-Token"
)

type notifyJob struct {
	url, token string
	taskID     string
	body       []byte
	headers    map[string]string
}

// notifier posts callbacks. Its zero value is ready; workers start on the
// first job.
type notifier struct {
	mu      sync.Mutex
	started bool
	closed  bool
	queues  []chan notifyJob
	quit    chan struct{}
	wg      sync.WaitGroup
	client  *fasthttp.Client
	opts    *AIPOptions
	log     *slog.Logger
}

func (n *notifier) enqueue(s *Server, j notifyJob) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if !n.started {
		n.start(s)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(j.taskID))
	select {
	case n.queues[h.Sum32()%notifyWorkers] <- j:
	default:
		s.log.Warn("AIP notification dropped: queue full", "task", j.taskID, "url", j.url)
	}
}

func (n *notifier) start(s *Server) {
	n.started = true
	n.opts = &s.opts.AIP
	n.log = s.log
	n.quit = make(chan struct{})
	timeout := n.opts.NotifyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	n.client = &fasthttp.Client{
		Name:                      "agent-bridge",
		NoDefaultUserAgentHeader:  true,
		ReadTimeout:               timeout,
		WriteTimeout:              timeout,
		MaxIdleConnDuration:       time.Second,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		MaxResponseBodySize:       64 << 10,
	}
	n.queues = make([]chan notifyJob, notifyWorkers)
	for i := range n.queues {
		q := make(chan notifyJob, notifyQueueDepth)
		n.queues[i] = q
		n.wg.Add(1)
		go n.work(q)
	}
}

func (n *notifier) work(q chan notifyJob) {
	defer n.wg.Done()
	for {
		select {
		case <-n.quit:
			return
		case j := <-q:
			n.deliver(j)
		}
	}
}

// deliver posts j, trying again on failure with a doubling backoff.
func (n *notifier) deliver(j notifyJob) {
	attempts := n.opts.NotifyAttempts
	if attempts <= 0 {
		attempts = 3
	}
	backoff := n.opts.NotifyBackoff
	if backoff <= 0 {
		backoff = 200 * time.Millisecond
	}
	timeout := n.opts.NotifyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	var lastErr string
	for i := 0; i < attempts; i++ {
		if i > 0 {
			tm := time.NewTimer(backoff)
			select {
			case <-n.quit:
				tm.Stop()
				return
			case <-tm.C:
			}
			backoff = min(2*backoff, time.Second)
		}
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		req.SetRequestURI(j.url)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.Header.Set(notifyTokenHdr, j.token)
		for k, v := range j.headers {
			req.Header.Set(k, v)
		}
		req.SetBody(j.body)
		err := n.client.DoTimeout(req, resp, timeout)
		code := resp.StatusCode()
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		if err == nil && code >= 200 && code < 300 {
			return
		}
		if err != nil {
			lastErr = err.Error()
		} else {
			lastErr = "HTTP " + fasthttp.StatusMessage(code)
		}
	}
	n.log.Warn("AIP notification not delivered", "task", j.taskID, "url", j.url, "attempts", attempts, "error", lastErr)
}

// stop ends the workers; a delivery in progress finishes its attempt.
func (n *notifier) stop() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	started := n.started
	if started {
		close(n.quit)
	}
	n.mu.Unlock()
	if !started {
		return
	}
	// A delivery in progress ends within its attempt's timeout; the
	// backoff waits end at once.
	n.wg.Wait()
	n.client.CloseIdleConnections()
}

// aipNotify queues the callbacks of a state change. t.mu is held.
func (s *Server) aipNotify(t *aipTask, st aip.TaskState) {
	if len(t.states) > 0 && !slices.Contains(t.states, st) {
		return
	}
	cfgs := s.aip.configsOf(t.taskID)
	if len(cfgs) == 0 {
		return
	}
	body := briefTask(t.b.Task()).AppendJSON(nil)
	for _, c := range cfgs {
		s.aip.notifier.enqueue(s, notifyJob{url: c.URL, token: c.Token, taskID: t.taskID, body: body, headers: t.headers})
	}
}

func (p *aipPartner) configsOf(taskID string) []aip.NotificationConfig {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	return slices.Clone(p.configs[taskID])
}

func (p *aipPartner) config(taskID, id string) (aip.NotificationConfig, bool) {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	for _, c := range p.configs[taskID] {
		if c.ID == id {
			return c, true
		}
	}
	return aip.NotificationConfig{}, false
}

func configNotFound(taskID, id string) *aip.Error {
	e := aip.NewError(aip.CodeTaskNotFound, "")
	e.Data, _ = json.Marshal(map[string]string{"taskId": taskID, "notificationConfigId": id,
		"details": "no such notification config for this task"})
	return e
}

// aipNotificationConfig serves notification/set, get and delete.
func (s *Server) aipNotificationConfig(ctx *fasthttp.RequestCtx, req *aip.Request, id json.RawMessage) {
	p := &s.aip
	switch req.Method {
	case aip.MethodNotificationSet:
		c := *req.Notification
		c.Extra = nil
		res, aerr := p.setConfig(s, c)
		if aerr != nil {
			rpcError(ctx, id, aerr)
			return
		}
		rpcResult(ctx, aip.AppendResultResponse(nil, id, res.AppendJSON(nil)))
	case aip.MethodNotificationGet:
		n := req.NotificationID
		var list []aip.NotificationConfig
		if n.NotificationConfigID != "" {
			c, ok := p.config(n.TaskID, n.NotificationConfigID)
			if !ok {
				rpcError(ctx, id, configNotFound(n.TaskID, n.NotificationConfigID))
				return
			}
			list = []aip.NotificationConfig{c}
		} else {
			list = p.configsOf(n.TaskID)
		}
		b := []byte{'['}
		for i := range list {
			if i > 0 {
				b = append(b, ',')
			}
			b = list[i].AppendJSON(b)
		}
		b = append(b, ']')
		rpcResult(ctx, aip.AppendResultResponse(nil, id, b))
	case aip.MethodNotificationDelete:
		n := req.NotificationID
		if !p.deleteConfig(n.TaskID, n.NotificationConfigID) {
			rpcError(ctx, id, configNotFound(n.TaskID, n.NotificationConfigID))
			return
		}
		rpcResult(ctx, aip.AppendResultResponse(nil, id, []byte(`{"success":true}`)))
	}
}

// setConfig creates (no id) or replaces (a known id) a config.
func (p *aipPartner) setConfig(s *Server, c aip.NotificationConfig) (aip.NotificationConfig, *aip.Error) {
	maxPer := s.opts.AIP.MaxNotificationConfigs
	if maxPer <= 0 {
		maxPer = 8
	}
	p.cmu.Lock()
	defer p.cmu.Unlock()
	if p.configs == nil {
		p.configs = map[string][]aip.NotificationConfig{}
	}
	list := p.configs[c.TaskID]
	if c.ID != "" {
		for i := range list {
			if list[i].ID == c.ID {
				list[i] = c
				return c, nil
			}
		}
		return c, configNotFound(c.TaskID, c.ID)
	}
	if len(list) >= maxPer {
		return c, aip.NewError(aip.CodeInvalidParams, "too many notification configs for this task")
	}
	if list == nil && len(p.configs) >= s.opts.AIP.maxTasks() {
		// Make room: forget the configs of tasks that are over or gone.
		for taskID := range p.configs {
			x, err := s.store.Find(aipTaskKey + taskID)
			if err == store.ErrNotFound || (err == nil && x.State.Terminal()) {
				delete(p.configs, taskID)
			}
		}
		if len(p.configs) >= s.opts.AIP.maxTasks() {
			return c, aip.NewError(aip.CodeInternalError, "too many tasks with notification configs")
		}
	}
	c.ID = aip.NewID("notification")
	p.configs[c.TaskID] = append(list, c)
	return c, nil
}

// deleteConfig deletes one config, or every config of the task for an
// empty id. It reports false for an id the task does not have.
func (p *aipPartner) deleteConfig(taskID, id string) bool {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	if id == "" {
		delete(p.configs, taskID)
		return true
	}
	list := p.configs[taskID]
	for i := range list {
		if list[i].ID == id {
			list = slices.Delete(list, i, i+1)
			if len(list) == 0 {
				delete(p.configs, taskID)
			} else {
				p.configs[taskID] = list
			}
			return true
		}
	}
	return false
}
