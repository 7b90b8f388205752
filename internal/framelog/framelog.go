package framelog

import (
	"container/list"
	"sync"
	"time"
)

// The defaults of Limits, used for every field left zero (or negative).
const (
	DefaultMaxExchanges         = 1000
	DefaultMaxFramesPerExchange = 500
	DefaultMaxFrameBytes        = 16 << 10
)

// Limits bounds a Log. A zero or negative field takes its default.
type Limits struct {
	// MaxExchanges is how many exchanges have frames kept at once;
	// recording for one more forgets the least recently recorded one.
	MaxExchanges int
	// MaxFramesPerExchange is how many frames one exchange keeps, the
	// oldest being dropped first.
	MaxFramesPerExchange int
	// MaxFrameBytes is how much of one frame is kept; the rest is cut.
	MaxFrameBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxExchanges <= 0 {
		l.MaxExchanges = DefaultMaxExchanges
	}
	if l.MaxFramesPerExchange <= 0 {
		l.MaxFramesPerExchange = DefaultMaxFramesPerExchange
	}
	if l.MaxFrameBytes <= 0 {
		l.MaxFrameBytes = DefaultMaxFrameBytes
	}
	return l
}

// Frame is one raw frame of an exchange.
type Frame struct {
	// Seq numbers the exchange's frames from 1 in the order recorded,
	// dropped ones included, so a gap shows what the bound dropped.
	Seq uint64 `json:"seq"`
	// Time is when the frame was recorded.
	Time time.Time `json:"time"`
	// Dir is the frame's direction: down-in, down-out, up-out or up-in
	// (downstream.FrameDownIn and so on).
	Dir string `json:"dir"`
	// Data is the frame, at most Limits.MaxFrameBytes of it.
	Data []byte `json:"data"`
	// Size is the frame's whole length; Truncated says Data holds less.
	Size      int  `json:"size"`
	Truncated bool `json:"truncated,omitempty"`
}

// ring is the frames of one exchange: a circular buffer that grows up to
// its bound and then overwrites its oldest frame.
type ring struct {
	id     string
	frames []Frame
	head   int    // index of the oldest frame once full
	seq    uint64 // frames recorded so far
	elem   *list.Element
}

// Log keeps the frames of recent exchanges. The zero value is not usable:
// call New.
type Log struct {
	lim Limits
	now func() time.Time

	mu  sync.Mutex
	m   map[string]*ring
	lru *list.List // of *ring, the most recently recorded to at the front
}

// New returns an empty log with the given bounds.
func New(lim Limits) *Log {
	return &Log{lim: lim.withDefaults(), now: time.Now, m: map[string]*ring{}, lru: list.New()}
}

// Record keeps a copy of frame as the next frame of exchange, going in
// direction dir. Empty frames and an empty exchange id are ignored.
func (l *Log) Record(exchange, dir string, frame []byte) {
	if exchange == "" || len(frame) == 0 {
		return
	}
	f := Frame{Time: l.now(), Dir: dir, Size: len(frame)}
	n := min(len(frame), l.lim.MaxFrameBytes)
	f.Data = append([]byte(nil), frame[:n]...) // copy outside the lock
	f.Truncated = n < len(frame)

	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.m[exchange]
	if r == nil {
		if l.lru.Len() >= l.lim.MaxExchanges {
			old := l.lru.Remove(l.lru.Back()).(*ring)
			delete(l.m, old.id)
		}
		r = &ring{id: exchange}
		r.elem = l.lru.PushFront(r)
		l.m[exchange] = r
	} else {
		l.lru.MoveToFront(r.elem)
	}
	r.seq++
	f.Seq = r.seq
	if len(r.frames) < l.lim.MaxFramesPerExchange {
		r.frames = append(r.frames, f)
		return
	}
	r.frames[r.head] = f
	r.head = (r.head + 1) % len(r.frames)
}

// Frames returns copies of the frames kept for exchange, oldest first, or
// nil when none are.
func (l *Log) Frames(exchange string) []Frame {
	l.mu.Lock()
	r := l.m[exchange]
	if r == nil {
		l.mu.Unlock()
		return nil
	}
	out := make([]Frame, 0, len(r.frames))
	out = append(out, r.frames[r.head:]...)
	out = append(out, r.frames[:r.head]...)
	l.mu.Unlock()
	// Data slices are never written after Record, so sharing them with the
	// copy would be safe; copy anyway so callers may modify what they get.
	for i := range out {
		out[i].Data = append([]byte(nil), out[i].Data...)
	}
	return out
}

// Len returns the number of exchanges whose frames are kept.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
