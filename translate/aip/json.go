package aip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/agentbridge/bridge/internal/jsonw"
	"github.com/agentbridge/bridge/translate"
)

// This file holds the reflection-free JSON plumbing every wire type uses:
// an appender for objects and strings, and gjson-based readers that keep the
// members a type does not name (the Extra carry-over).

// errNotObject is wrapped by decoders given a JSON value that is not an object.
var errNotObject = errors.New("not a JSON object")

// decodeError makes a decoding error that wraps translate.ErrMalformed.
func decodeError(format string, args ...any) error {
	return fmt.Errorf("aip: %w: %s", translate.ErrMalformed, fmt.Sprintf(format, args...))
}

// parseObject validates b as JSON and returns it as a gjson object.
func parseObject(b []byte) (gjson.Result, error) {
	if !json.Valid(b) {
		return gjson.Result{}, decodeError("invalid JSON")
	}
	r := gjson.ParseBytes(b)
	if !r.IsObject() {
		return gjson.Result{}, decodeError("%v", errNotObject)
	}
	return r, nil
}

// members calls fn for each member of the object v whose value is not null
// (JSON null is read as absent everywhere in AIP) and collects the members
// fn does not claim into extra. fn returns claimed=false for an unknown key.
func members(v gjson.Result, extra *json.RawMessage, fn func(key string, val gjson.Result) (claimed bool, err error)) error {
	if !v.IsObject() {
		return decodeError("%v", errNotObject)
	}
	var ex []byte
	var err error
	v.ForEach(func(k, val gjson.Result) bool {
		if val.Type == gjson.Null {
			return true
		}
		var ok bool
		ok, err = fn(k.String(), val)
		if err != nil {
			return false
		}
		if !ok && extra != nil {
			if len(ex) == 0 {
				ex = append(ex, '{')
			} else {
				ex = append(ex, ',')
			}
			ex = append(ex, k.Raw...)
			ex = append(ex, ':')
			ex = jsonw.AppendCompact(ex, val.Raw)
		}
		return true
	})
	if err != nil {
		return err
	}
	if extra != nil {
		if len(ex) > 0 {
			ex = append(ex, '}')
			*extra = ex
		} else {
			*extra = nil
		}
	}
	return nil
}

// rawValue returns a compact private copy of a JSON value.
func rawValue(v gjson.Result) json.RawMessage {
	return jsonw.AppendCompact(make([]byte, 0, len(v.Raw)), v.Raw)
}

func wantString(key string, v gjson.Result) (string, error) {
	if v.Type != gjson.String {
		return "", decodeError("%s: want a string, got %s", key, v.Type)
	}
	return v.Str, nil
}

func wantBool(key string, v gjson.Result) (bool, error) {
	switch v.Type {
	case gjson.True:
		return true, nil
	case gjson.False:
		return false, nil
	}
	return false, decodeError("%s: want a boolean, got %s", key, v.Type)
}

// wantUint reads a non-negative integer; a number with a zero fraction such as
// 3.0 is accepted.
func wantUint(key string, v gjson.Result) (uint64, error) {
	if v.Type != gjson.Number {
		return 0, decodeError("%s: want a number, got %s", key, v.Type)
	}
	if n, err := strconv.ParseUint(v.Raw, 10, 64); err == nil {
		return n, nil
	}
	f := v.Num
	if f < 0 || f != float64(uint64(f)) || f >= 1<<64 {
		return 0, decodeError("%s: want a non-negative integer, got %s", key, v.Raw)
	}
	return uint64(f), nil
}

func wantInt(key string, v gjson.Result) (int64, error) {
	if v.Type != gjson.Number {
		return 0, decodeError("%s: want a number, got %s", key, v.Type)
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, nil
	}
	f := v.Num
	if f != float64(int64(f)) {
		return 0, decodeError("%s: want an integer, got %s", key, v.Raw)
	}
	return int64(f), nil
}

func wantObject(key string, v gjson.Result) error {
	if !v.IsObject() {
		return decodeError("%s: want an object, got %s", key, kindOf(v))
	}
	return nil
}

func wantArray(key string, v gjson.Result) error {
	if !v.IsArray() {
		return decodeError("%s: want an array, got %s", key, kindOf(v))
	}
	return nil
}

func kindOf(v gjson.Result) string {
	switch {
	case v.IsObject():
		return "object"
	case v.IsArray():
		return "array"
	}
	return v.Type.String()
}

func wantStrings(key string, v gjson.Result) ([]string, error) {
	if err := wantArray(key, v); err != nil {
		return nil, err
	}
	out := []string{}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		if e.Type == gjson.Null {
			return true
		}
		var s string
		if s, err = wantString(key+"[]", e); err != nil {
			return false
		}
		out = append(out, s)
		return true
	})
	return out, err
}

// eachElem calls fn for each non-null element of the array v.
func eachElem(key string, v gjson.Result, fn func(e gjson.Result) error) error {
	if err := wantArray(key, v); err != nil {
		return err
	}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		if e.Type == gjson.Null {
			return true
		}
		err = fn(e)
		return err == nil
	})
	return err
}

// enc appends one JSON object member by member.
type enc struct {
	b     []byte
	first bool
}

func newEnc(dst []byte) enc {
	return enc{b: append(dst, '{'), first: true}
}

func (e *enc) key(k string) {
	if e.first {
		e.first = false
		e.b = append(e.b, '"')
	} else {
		e.b = append(e.b, ',', '"')
	}
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *enc) str(k, v string) {
	e.key(k)
	e.b = jsonw.AppendString(e.b, v)
}

// strOpt writes a string member unless it is empty.
func (e *enc) strOpt(k, v string) {
	if v != "" {
		e.str(k, v)
	}
}

func (e *enc) raw(k string, v []byte) {
	e.key(k)
	e.b = append(e.b, v...)
}

// rawOpt writes a raw JSON member unless it is empty.
func (e *enc) rawOpt(k string, v []byte) {
	if len(v) > 0 {
		e.raw(k, v)
	}
}

func (e *enc) boolean(k string, v bool) {
	e.key(k)
	e.b = strconv.AppendBool(e.b, v)
}

func (e *enc) uint(k string, v uint64) {
	e.key(k)
	e.b = strconv.AppendUint(e.b, v, 10)
}

func (e *enc) ts(k string, t Timestamp) {
	e.key(k)
	e.b = t.appendJSON(e.b)
}

// extra splices the members of the raw object x.
func (e *enc) extra(x json.RawMessage) {
	x = bytes.TrimSpace(x)
	if len(x) < 2 || x[0] != '{' {
		return
	}
	inner := bytes.TrimSpace(x[1 : len(x)-1])
	if len(inner) == 0 {
		return
	}
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.b = append(e.b, inner...)
}

func (e *enc) done() []byte { return append(e.b, '}') }

// marshalVia adapts an appender to json.Marshaler.
func marshalVia(appendJSON func([]byte) []byte) ([]byte, error) {
	return appendJSON(nil), nil
}

func wrapUnknownType(raw string) error {
	return fmt.Errorf("%w: %s", ErrUnknownType, raw)
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
