package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

var (
	errIncomplete = errors.New("stream ended before a completed response")
	errFailed     = errors.New("terminal response not completed")
	errCount      = errors.New("content delta count mismatch")
	errDeadline   = errors.New("request deadline passed")
	errStrayBytes = errors.New("stray bytes after the previous response on the connection")
)

var (
	dataPrefix      = []byte("data:")
	objKey          = []byte(`"object":`)
	objResponse     = []byte(`"object":"response"`)
	objContent      = []byte(`"object":"content"`)
	deltaTrue       = []byte(`"delta":true`)
	statusCompleted = []byte(`"status":"completed"`)
	terminalStatus  = [][]byte{[]byte(`"status":"failed"`), []byte(`"status":"canceled"`),
		[]byte(`"status":"rejected"`), []byte(`"status":"incomplete"`)}
)

// classifyWindow is how much of a frame is looked at to tell its kind: the
// Agent API puts object, status and delta in the first members.
const classifyWindow = 256

// readSSE reads Agent API SSE frames until the terminal response frame,
// counting content deltas and noting when the first one arrived. A data
// line longer than the reader's buffer is classified by its head and the
// rest skipped.
func readSSE(br *bufio.Reader, o *outcome, deadline time.Time) error {
	for {
		line, err := br.ReadSlice('\n')
		o.bytes += len(line)
		long := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long {
			if errors.Is(err, io.EOF) {
				return errIncomplete
			}
			return fmt.Errorf("read: %w", err)
		}
		if bytes.HasPrefix(line, dataPrefix) {
			o.frames++
			head := line[:min(len(line), classifyWindow)]
			// The frame's own object is its first "object" member: a
			// message or response frame nests content objects after it.
			if i := bytes.Index(head, objKey); i >= 0 {
				head = head[i:]
			}
			switch {
			case bytes.HasPrefix(head, objContent):
				if bytes.Contains(head, deltaTrue) != o.whole {
					if o.events == 0 {
						o.firstEvent = time.Now()
					}
					o.events++
					if o.whole {
						n, err := lineLen(br, line, long)
						o.bytes += n - len(line)
						if err != nil {
							return err
						}
						o.contentLen += n
						long = false
					}
				}
			case bytes.HasPrefix(head, objResponse):
				if bytes.Contains(head, statusCompleted) {
					if err := skipLine(br, o, long); err != nil {
						return err
					}
					// Read to the end of the body so the connection is reused.
					n, err := io.Copy(io.Discard, br)
					o.bytes += int(n)
					if err != nil {
						return fmt.Errorf("read after terminal frame: %w", err)
					}
					return nil
				}
				for _, s := range terminalStatus {
					if bytes.Contains(head, s) {
						fe := &failedError{code: errorCode(line), frame: string(line[:min(len(line), 400)])}
						// Read to the end of the body here too, or the
						// pooled connection keeps this reply's last chunk
						// and the next request reads it as its own.
						if err := skipLine(br, o, long); err != nil {
							return err
						}
						n, _ := io.Copy(io.Discard, br)
						o.bytes += int(n)
						return fe
					}
				}
			}
		}
		if long {
			if err := skipLine(br, o, true); err != nil {
				return err
			}
		}
		if o.frames&63 == 0 && time.Now().After(deadline) {
			return errDeadline
		}
	}
}

// failedError is a well-formed terminal response that did not complete:
// the system under test answered, with an error.
type failedError struct {
	code  string // the error's code, "" if none
	frame string // the start of the frame
}

func (e *failedError) Error() string {
	return fmt.Sprintf("%v (%s): %s", errFailed, e.code, bytes.TrimSpace([]byte(e.frame)))
}

func (e *failedError) Unwrap() error { return errFailed }

var codeKey = []byte(`"code":"`)

// errorCode is the first "code" string member of an Agent API frame.
func errorCode(line []byte) string {
	i := bytes.Index(line, codeKey)
	if i < 0 {
		return ""
	}
	rest := line[i+len(codeKey):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 && j <= 64 {
		return string(rest[:j])
	}
	return ""
}

// lineLen is the length of a line whose first part was read, reading and
// discarding the rest of it when it was longer than the buffer.
func lineLen(br *bufio.Reader, first []byte, long bool) (int, error) {
	n := len(first)
	for long {
		line, err := br.ReadSlice('\n')
		n += len(line)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return n, fmt.Errorf("read: %w", err)
		}
	}
	return n, nil
}

// skipLine discards the rest of a line whose head was already read.
func skipLine(br *bufio.Reader, o *outcome, long bool) error {
	for long {
		line, err := br.ReadSlice('\n')
		o.bytes += len(line)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return fmt.Errorf("read: %w", err)
		}
	}
	return nil
}

// bytesReader wraps a fully read body (a server that did not stream).
func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
