package aip

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/agentbridge/bridge/internal/jsonw"
)

// TimeLayout is how the package writes timestamps: RFC 3339 with
// milliseconds and a numeric offset, "2025-09-01T12:00:00.000+08:00". A
// numeric offset (never "Z") is what the spec examples show and what every
// Python peer's datetime.fromisoformat accepts.
const TimeLayout = "2006-01-02T15:04:05.000-07:00"

// Beijing is the zone the spec names as the default ("默认使用北京时间"). A
// timestamp without an offset is read in it.
var Beijing = time.FixedZone("+08:00", 8*3600)

// Timestamp is an AIP date-time string. A decoded Timestamp remembers the
// text it came from and re-encodes it unchanged, so a decode→encode round
// trip is exact; one made with At encodes as TimeLayout. The zero Timestamp
// is absent (the member is omitted, or null where the field is nullable).
type Timestamp struct {
	t   time.Time
	raw string
}

// At returns the Timestamp of t, encoded in t's own zone.
func At(t time.Time) Timestamp { return Timestamp{t: t} }

// ParseTimestamp reads an AIP timestamp leniently: RFC 3339 with any number
// of fraction digits (none, milliseconds, the microseconds Python writes),
// "Z" or a "+hh:mm" / "+hhmm" / "+hh" offset, a space instead of "T", and no
// offset at all (read as Beijing time, the spec's default zone).
func ParseTimestamp(s string) (Timestamp, error) {
	t, err := parseTime(s)
	if err != nil {
		return Timestamp{}, err
	}
	return Timestamp{t: t, raw: s}, nil
}

var errBadTime = errors.New("not an ISO 8601 date-time")

func parseTime(s string) (time.Time, error) {
	if len(s) < len("2006-01-02T15:04") || len(s) > 64 {
		return time.Time{}, errBadTime
	}
	if s[10] == ' ' || s[10] == 't' {
		s = s[:10] + "T" + s[11:]
	}
	// Split off the zone: "Z", or the last '+' / '-' after the time part.
	body, zone := s, ""
	if n := len(s); s[n-1] == 'Z' || s[n-1] == 'z' {
		body, zone = s[:n-1], "Z"
	} else if i := strings.LastIndexAny(s, "+-"); i > 10 {
		body, zone = s[:i], s[i:]
	}
	var t time.Time
	var err error
	for _, layout := range [...]string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04"} {
		if t, err = time.ParseInLocation(layout, body, time.UTC); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, errBadTime
	}
	switch {
	case zone == "":
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), Beijing), nil
	case zone == "Z":
		return t, nil
	}
	off, ok := parseOffset(zone)
	if !ok {
		return time.Time{}, errBadTime
	}
	name := zone
	if off == 0 {
		name = "+00:00"
	}
	loc := time.FixedZone(name, off)
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc), nil
}

// parseOffset reads "+hh:mm", "+hhmm" or "+hh" into seconds east of UTC.
func parseOffset(z string) (int, bool) {
	sign := 1
	if z[0] == '-' {
		sign = -1
	}
	d := z[1:]
	if len(d) == 5 && d[2] == ':' {
		d = d[:2] + d[3:]
	}
	if len(d) != 2 && len(d) != 4 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
		n = n*10 + int(d[i]-'0')
	}
	h, m := n, 0
	if len(d) == 4 {
		h, m = n/100, n%100
	}
	if h > 23 || m > 59 {
		return 0, false
	}
	return sign * (h*3600 + m*60), true
}

// Time returns the instant; the zero time for the zero Timestamp.
func (ts Timestamp) Time() time.Time { return ts.t }

// IsZero reports whether ts is absent.
func (ts Timestamp) IsZero() bool { return ts.t.IsZero() && ts.raw == "" }

// String returns the text ts encodes as.
func (ts Timestamp) String() string {
	if ts.raw != "" {
		return ts.raw
	}
	if ts.t.IsZero() {
		return ""
	}
	return ts.t.Format(TimeLayout)
}

// Before reports whether ts is an earlier instant than u; instants are
// compared, not strings, so offsets and precisions mix freely.
func (ts Timestamp) Before(u Timestamp) bool { return ts.t.Before(u.t) }

// After reports whether ts is a later instant than u.
func (ts Timestamp) After(u Timestamp) bool { return ts.t.After(u.t) }

// Equal reports whether ts and u are the same instant.
func (ts Timestamp) Equal(u Timestamp) bool { return ts.t.Equal(u.t) }

func (ts Timestamp) appendJSON(dst []byte) []byte {
	if ts.raw != "" {
		return jsonw.AppendString(dst, ts.raw)
	}
	if ts.t.IsZero() {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = ts.t.AppendFormat(dst, TimeLayout)
	return append(dst, '"')
}

// MarshalJSON implements json.Marshaler.
func (ts Timestamp) MarshalJSON() ([]byte, error) { return ts.appendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler; null gives the zero Timestamp.
func (ts *Timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*ts = Timestamp{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return decodeError("timestamp: want a string")
	}
	v, err := ParseTimestamp(s)
	if err != nil {
		return decodeError("timestamp %q: %v", s, err)
	}
	*ts = v
	return nil
}
