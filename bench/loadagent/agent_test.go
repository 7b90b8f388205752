package loadagent

import "testing"

func TestParseMarker(t *testing.T) {
	for _, c := range []struct {
		body    string
		n, size int
	}{
		{`{"text":"` + Marker(1000, 64) + ` xxxx"}`, 1000, 64},
		{`{"text":"[bench events=7]"}`, 7, 0},
		{`{"text":"hello"}`, 0, 0},
	} {
		n, size := parseMarker([]byte(c.body))
		if n != c.n || size != c.size {
			t.Errorf("parseMarker(%s) = %d, %d; want %d, %d", c.body, n, size, c.n, c.size)
		}
	}
}
