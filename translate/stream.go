package translate

import (
	"context"
	"io"
)

// Stream is a sequence of events coming from an agent. Next returns io.EOF
// after the last event; the returned event is valid until the next call to
// Next (Clone it to keep it). Close releases the stream and unblocks a Next in
// progress; it is safe to call more than once and from another goroutine.
type Stream interface {
	Next() (*Event, error)
	Close() error
}

// Agent is anything that turns a Request into a Stream of events: an
// upstream client, the reference agent, a test fake. The context bounds the
// whole exchange; cancelling it ends the stream.
type Agent interface {
	Open(ctx context.Context, req *Request) (Stream, error)
}

// AgentFunc adapts a function to the Agent interface.
type AgentFunc func(ctx context.Context, req *Request) (Stream, error)

// Open calls f.
func (f AgentFunc) Open(ctx context.Context, req *Request) (Stream, error) { return f(ctx, req) }

// SliceStream is a Stream over events held in memory, for tests and for
// answers the bridge settles itself.
type SliceStream struct {
	Events []*Event
	next   int
}

// NewSliceStream returns a Stream that yields evs in order.
func NewSliceStream(evs ...*Event) *SliceStream { return &SliceStream{Events: evs} }

// Next returns the next event or io.EOF.
func (s *SliceStream) Next() (*Event, error) {
	if s.next >= len(s.Events) {
		return nil, io.EOF
	}
	ev := s.Events[s.next]
	s.next++
	return ev, nil
}

// Close does nothing.
func (s *SliceStream) Close() error { return nil }

// Collect reads s to its end and returns clones of every event, closing s.
// The error is nil when the stream ended with io.EOF.
func Collect(s Stream) ([]*Event, error) {
	defer s.Close()
	var out []*Event
	for {
		ev, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev.Clone())
	}
}
