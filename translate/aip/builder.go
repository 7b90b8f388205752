package aip

import (
	"strconv"
	"time"
	"unsafe"

	"github.com/agentbridge/bridge/translate"
)

// TaskBuilder folds canonical events into the AIP Task of one task id and
// session: what a Partner answers to rpc and get, posts to notification
// URLs, and what StreamEncoder streams. It is not safe for concurrent use.
//
// How events fold (see doc.go for the reasons):
//
//   - KindState sets Status and appends it to StatusHistory. A repeat of
//     the current state without reason parts, and anything after a terminal
//     state, is ignored. Reason parts become the status data items; when
//     there are none, awaiting-input takes the question (the text of the
//     turn's last partner message) and failed/rejected take the error
//     (Event.Err) or that text.
//   - KindMessageStart/KindContent/KindMessageEnd of the assistant build a
//     partner Message in MessageHistory (text deltas are concatenated,
//     snapshots replace). User, system and "reasoning" messages are left
//     out: the Leader's own messages enter through AddMessage.
//   - KindToolCall/KindToolResult become ToolItem data items of the partner
//     message they name (or the open one, or a new one), updated in place
//     by call id.
//   - KindArtifact adds a Product, or extends (Append) or replaces one.
//   - KindInputRequest is awaiting-input with the question as data items.
//   - KindError is failed with ErrorItem(err) unless the task already ended.
//   - When the state settles on awaiting-completion or completed and the
//     turn made no product, the text of the turn's last partner message is
//     also delivered as a Product "reply-<message id>", because AIP Leaders
//     read results from products (the v01.00 demo partners answer with a
//     text product). NoReplyProduct turns this off.
type TaskBuilder struct {
	// SenderID is the Partner's AIC, written as senderId of partner
	// messages.
	SenderID string
	// Now is the clock for events without a Time; time.Now when nil.
	Now func() time.Time
	// NoReplyProduct disables the reply product described above.
	NoReplyProduct bool

	task         Task
	index        map[string]int         // partner message id → MessageHistory index
	parts        map[string]map[int]int // message id → canonical part index → item index
	tools        map[string]int         // message id + call id → item index
	open         map[string]bool        // partner messages started and not ended
	ignored      map[string]bool        // non-assistant messages
	cur          string                 // the open message content without an id goes to
	turnStart    int                    // MessageHistory index where the current turn starts
	turnProducts bool                   // the current turn made a product
	products     int                    // counter for generated product ids
	// grown holds the bytes of text items that deltas append to, so that a
	// reply of n deltas costs O(n), not O(n²) string concatenation.
	grown map[grownKey][]byte
}

type grownKey struct {
	msg  string
	item int
}

// NewTaskBuilder returns a builder of the task taskID in session sessionID.
// The task starts with no status; the first state event (or SetState) sets
// one. Products starts as [] as the spec examples show.
func NewTaskBuilder(taskID, sessionID string) *TaskBuilder {
	return &TaskBuilder{
		task:    Task{ID: taskID, SessionID: sessionID, Products: []Product{}},
		index:   map[string]int{},
		parts:   map[string]map[int]int{},
		tools:   map[string]int{},
		open:    map[string]bool{},
		ignored: map[string]bool{},
		grown:   map[grownKey][]byte{},
	}
}

// Task returns the task as built so far. It is the builder's own value:
// encode or copy it before the next call that changes the builder, and do
// not modify it.
func (b *TaskBuilder) Task() *Task { return &b.task }

// State returns the current state, "" before the first.
func (b *TaskBuilder) State() TaskState { return b.task.Status.State }

func (b *TaskBuilder) now(ev *translate.Event) time.Time {
	if ev != nil && !ev.Time.IsZero() {
		return ev.Time
	}
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// AddMessage appends a Leader's message to MessageHistory (the Partner
// server calls it with each message it accepts). A start or continue
// begins a new turn: the reply product and the awaiting-input question are
// looked for in the partner messages after it.
func (b *TaskBuilder) AddMessage(m *Message) {
	b.task.MessageHistory = append(b.task.MessageHistory, *m)
	if m.Command == CommandStart || m.Command == CommandContinue {
		b.turnStart = len(b.task.MessageHistory)
		b.turnProducts = false
	}
}

// SetState sets the state with items at time at (now when zero), as the
// Partner server does itself: accepted on start, canceled on cancel,
// completed on complete. It reports whether the state changed.
func (b *TaskBuilder) SetState(s TaskState, items []DataItem, at time.Time) bool {
	if at.IsZero() {
		at = b.now(nil)
	}
	ch := b.setState(s, items, at)
	return ch.status
}

// Apply folds one canonical event into the task.
func (b *TaskBuilder) Apply(ev *translate.Event) { b.apply(ev) }

// change tells StreamEncoder what an event did.
type change struct {
	status  bool   // a status was appended
	reply   bool   // a reply product was made
	message int    // index of a partner message to emit now, or -1
	product string // id of the product an artifact touched
}

func (b *TaskBuilder) apply(ev *translate.Event) change {
	ch := change{message: -1}
	switch ev.Kind {
	case translate.KindState:
		s, ok := StateFromCanonical(ev.State)
		if !ok {
			return ch
		}
		items := ItemsFromParts(ev.Parts)
		failed := s == StateFailed || s == StateRejected
		switch {
		case failed && ev.Err != nil:
			// The error's code travels in its item's metadata; a reason
			// text that only repeats the message is not sent twice.
			kept := items[:0:0]
			for _, it := range items {
				if it.Type != ItemText || it.Text != ev.Err.Message {
					kept = append(kept, it)
				}
			}
			items = append(kept, ErrorItem(ev.Err))
		case items == nil && (failed || s == StateAwaitingInput):
			items = b.turnText()
		}
		return b.setState(s, items, b.now(ev))
	case translate.KindInputRequest:
		items := ItemsFromParts(ev.Parts)
		if items == nil {
			items = b.turnText()
		}
		return b.setState(StateAwaitingInput, items, b.now(ev))
	case translate.KindError:
		if ev.Err == nil || b.task.Status.State.Terminal() {
			return ch
		}
		return b.setState(StateFailed, []DataItem{ErrorItem(ev.Err)}, b.now(ev))
	case translate.KindMessageStart:
		if ev.Message == nil {
			return ch
		}
		m := ev.Message
		if (m.Role != "" && m.Role != translate.RoleAssistant) || m.Type == "reasoning" {
			b.ignored[m.ID] = true
			return ch
		}
		id := m.ID
		if id == "" {
			id = NewID("msg")
		}
		b.partner(id, b.now(ev))
		b.open[id] = true
		b.cur = id
	case translate.KindContent:
		if ev.Part == nil || b.ignored[ev.MessageID] {
			return ch
		}
		i := b.target(ev.MessageID, b.now(ev), true)
		b.content(i, ev)
	case translate.KindMessageEnd:
		id := ev.MessageID
		if id == "" && ev.Message != nil {
			id = ev.Message.ID
		}
		if id == "" {
			id = b.cur
		}
		if b.ignored[id] {
			return ch
		}
		i, ok := b.index[id]
		if !ok {
			if ev.Message == nil || len(ev.Message.Parts) == 0 ||
				(ev.Message.Role != "" && ev.Message.Role != translate.RoleAssistant) || ev.Message.Type == "reasoning" {
				return ch
			}
			if id == "" {
				id = NewID("msg")
			}
			i = b.partner(id, b.now(ev))
		}
		if ev.Message != nil && len(ev.Message.Parts) > 0 && len(b.parts[id]) == 0 {
			// A complete message whose content was not streamed.
			m := &b.task.MessageHistory[i]
			pm := b.parts[id]
			if pm == nil {
				pm = map[int]int{}
				b.parts[id] = pm
			}
			for k := range ev.Message.Parts {
				pm[k] = len(m.DataItems)
				m.DataItems = append(m.DataItems, ItemFromPart(&ev.Message.Parts[k]))
			}
		}
		delete(b.open, id)
		if b.cur == id {
			b.cur = ""
		}
		if len(b.task.MessageHistory[i].DataItems) > 0 {
			ch.message = i
		}
	case translate.KindToolCall, translate.KindToolResult:
		if ev.Tool == nil || b.ignored[ev.MessageID] {
			return ch
		}
		standalone := !b.open[ev.MessageID] && (ev.MessageID != "" || b.cur == "")
		i := b.target(ev.MessageID, b.now(ev), false)
		m := &b.task.MessageHistory[i]
		item := ToolItem(ev.Tool, ev.Kind == translate.KindToolResult)
		key := m.ID + "\x00" + strconv.Itoa(int(ev.Kind)) + "\x00" + ev.Tool.CallID
		if k, ok := b.tools[key]; ok && ev.Tool.CallID != "" {
			m.DataItems[k] = item
		} else {
			b.tools[key] = len(m.DataItems)
			m.DataItems = append(m.DataItems, item)
		}
		if standalone && ev.Done {
			ch.message = i
		}
	case translate.KindArtifact:
		if ev.Artifact == nil {
			return ch
		}
		ch.product = b.artifact(ev.Artifact)
	}
	return ch
}

// partner appends a new partner message and returns its index.
func (b *TaskBuilder) partner(id string, at time.Time) int {
	if i, ok := b.index[id]; ok {
		return i
	}
	b.task.MessageHistory = append(b.task.MessageHistory, Message{
		ID:         id,
		SentAt:     At(at),
		SenderRole: RolePartner,
		SenderID:   b.SenderID,
		DataItems:  []DataItem{},
		TaskID:     b.task.ID,
		SessionID:  b.task.SessionID,
	})
	i := len(b.task.MessageHistory) - 1
	b.index[id] = i
	return i
}

// target finds the partner message an event with message id goes to: that
// message, else the open one, else a new one (made current when open).
func (b *TaskBuilder) target(id string, at time.Time, open bool) int {
	if id != "" {
		if i, ok := b.index[id]; ok {
			return i
		}
	} else if b.cur != "" {
		return b.index[b.cur]
	} else {
		id = NewID("msg")
	}
	i := b.partner(id, at)
	if open {
		b.open[id] = true
		b.cur = id
	}
	return i
}

func (b *TaskBuilder) content(i int, ev *translate.Event) {
	m := &b.task.MessageHistory[i]
	pm := b.parts[m.ID]
	if pm == nil {
		pm = map[int]int{}
		b.parts[m.ID] = pm
	}
	k, ok := pm[ev.Index]
	if !ok {
		pm[ev.Index] = len(m.DataItems)
		m.DataItems = append(m.DataItems, ItemFromPart(ev.Part))
		return
	}
	it := &m.DataItems[k]
	key := grownKey{m.ID, k}
	if ev.Delta && ev.Part.Kind == translate.PartText && it.Type == ItemText {
		buf, ok := b.grown[key]
		if !ok {
			buf = append(make([]byte, 0, 2*(len(it.Text)+len(ev.Part.Text))), it.Text...)
		}
		buf = append(buf, ev.Part.Text...)
		b.grown[key] = buf
		// As strings.Builder does: the bytes behind the string are only
		// ever appended to, never changed, so the string stays valid.
		it.Text = unsafe.String(unsafe.SliceData(buf), len(buf))
		return
	}
	delete(b.grown, key)
	meta := it.Metadata
	*it = ItemFromPart(ev.Part)
	if it.Metadata == nil {
		it.Metadata = meta
	}
}

func (b *TaskBuilder) artifact(a *translate.Artifact) string {
	b.turnProducts = true
	id := a.ID
	if id == "" {
		b.products++
		id = "product-" + strconv.Itoa(b.products)
	}
	items := ItemsFromParts(a.Parts)
	for i := range b.task.Products {
		p := &b.task.Products[i]
		if p.ID != id {
			continue
		}
		if a.Append {
			p.DataItems = append(p.DataItems, items...)
		} else {
			p.DataItems = items
			if p.DataItems == nil {
				p.DataItems = []DataItem{}
			}
		}
		if a.Name != "" {
			p.Name = a.Name
		}
		if a.Description != "" {
			p.Description = a.Description
		}
		return id
	}
	p := ProductFromArtifact(a)
	p.ID = id
	b.task.Products = append(b.task.Products, p)
	return id
}

// lastTurnMessage returns the index of the turn's last partner message
// with a text item, or -1.
func (b *TaskBuilder) lastTurnMessage() int {
	for i := len(b.task.MessageHistory) - 1; i >= b.turnStart; i-- {
		m := &b.task.MessageHistory[i]
		if m.SenderRole != RolePartner {
			continue
		}
		for k := range m.DataItems {
			if m.DataItems[k].Type == ItemText && m.DataItems[k].Text != "" {
				return i
			}
		}
	}
	return -1
}

// turnText returns copies of the text items of the turn's last partner
// message, or nil.
func (b *TaskBuilder) turnText() []DataItem {
	i := b.lastTurnMessage()
	if i < 0 {
		return nil
	}
	var out []DataItem
	for _, it := range b.task.MessageHistory[i].DataItems {
		if it.Type == ItemText {
			out = append(out, it)
		}
	}
	return out
}

func (b *TaskBuilder) setState(s TaskState, items []DataItem, at time.Time) change {
	ch := change{message: -1}
	cur := b.task.Status.State
	if cur.Terminal() || (s == cur && items == nil) {
		return ch
	}
	if s == StateAwaitingCompletion || s == StateCompleted {
		ch.reply = b.replyProduct()
	}
	st := TaskStatus{State: s, StateChangedAt: At(at), DataItems: items}
	b.task.Status = st
	b.task.StatusHistory = append(b.task.StatusHistory, st)
	ch.status = true
	return ch
}

func (b *TaskBuilder) replyProduct() bool {
	if b.NoReplyProduct || b.turnProducts {
		return false
	}
	items := b.turnText()
	if items == nil {
		return false
	}
	b.turnProducts = true
	m := &b.task.MessageHistory[b.lastTurnMessage()]
	b.task.Products = append(b.task.Products, Product{ID: replyPrefix + m.ID, Name: "reply", DataItems: items})
	return true
}

// replyPrefix starts the id of a reply product.
const replyPrefix = "reply-"

// ErrorItem is the text data item of a failure: the message as text and
// {"code": …} (plus "retryable": true when set) as metadata.
func ErrorItem(err *translate.Error) DataItem {
	text := err.Message
	if text == "" {
		text = err.Code
	}
	e := newEnc(nil)
	e.str("code", err.Code)
	if err.Retryable {
		e.boolean("retryable", true)
	}
	return DataItem{Type: ItemText, Text: text, Metadata: e.done()}
}
