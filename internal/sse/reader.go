package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxEventSize bounds one event's data when the caller gives no bound.
const DefaultMaxEventSize = 4 << 20

// ErrEventTooLarge is returned when one event's data exceeds the Reader's bound.
var ErrEventTooLarge = errors.New("sse: event too large")

// Event is one SSE event. Its slices are valid until the next call to
// Reader.Next.
type Event struct {
	ID    []byte
	Event []byte
	Data  []byte
	// HasID tells an empty "id:" line (which resets the last id) from none.
	HasID bool
}

// Reader reads SSE events from a stream.
type Reader struct {
	br      *bufio.Reader
	max     int
	data    []byte
	id      []byte
	event   []byte
	line    []byte
	hasData bool
	ev      Event
}

// NewReader returns a Reader over r that rejects events whose data exceeds
// maxEvent bytes (DefaultMaxEventSize when maxEvent <= 0).
func NewReader(r io.Reader, maxEvent int) *Reader {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEventSize
	}
	return &Reader{br: bufio.NewReaderSize(r, 16<<10), max: maxEvent}
}

// Next returns the next event with data or an id. It returns io.EOF at the
// end of the stream, after dispatching a final event that lacked its blank
// line. Comment lines and events with neither data nor id are skipped.
func (r *Reader) Next() (*Event, error) {
	r.data = r.data[:0]
	r.id = r.id[:0]
	r.event = r.event[:0]
	r.hasData = false
	r.ev.HasID = false
	for {
		line, err := r.readLine()
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF && (r.hasData || r.ev.HasID) {
				return r.dispatch(), nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if r.hasData || r.ev.HasID {
				return r.dispatch(), nil
			}
			r.event = r.event[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > r.max {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrEventTooLarge, r.max)
			}
			r.data = append(r.data, value...)
			r.hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.id = append(r.id[:0], value...)
				r.ev.HasID = true
			}
		case "event":
			r.event = append(r.event[:0], value...)
		}
		if err == io.EOF {
			if r.hasData || r.ev.HasID {
				return r.dispatch(), nil
			}
			return nil, io.EOF
		}
	}
}

func (r *Reader) dispatch() *Event {
	r.ev.Data = r.data
	r.ev.ID = r.id
	r.ev.Event = r.event
	return &r.ev
}

// readLine returns one line without its LF or CRLF. A line longer than the
// event bound is an error rather than a growing buffer.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
		if len(r.line) > r.max+64 {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrEventTooLarge, r.max)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line := r.line
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if err == io.EOF && len(r.line) > 0 {
			return line, io.EOF
		}
		return line, err
	}
}
