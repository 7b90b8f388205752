package sse

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string, max int) ([]string, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in), max)
	var out []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(ev.Data))
	}
}

func TestReaderLenient(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"space after colon", "data: a\n\n", []string{"a"}},
		{"no space after colon", "data:a\n\n", []string{"a"}},
		{"only the first space is dropped", "data:  a\n\n", []string{" a"}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"comments and blank lines", ": hi\n\n\n\ndata: a\n: mid\n\n", []string{"a"}},
		{"multi-line data is joined", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"event and unknown fields", "event: x\nretry: 5\nfoo\ndata: a\n\n", []string{"a"}},
		{"empty data line", "data:\n\n", []string{""}},
		{"nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, tt.in, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReaderBound(t *testing.T) {
	for _, in := range []string{
		"data: " + strings.Repeat("x", 100) + "\n\n",
		"data: " + strings.Repeat("x", 30) + "\ndata: " + strings.Repeat("x", 30) + "\n\n",
	} {
		if _, err := readAll(t, in, 50); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("got %v, want ErrEventTooLarge", err)
		}
	}
}

func TestReaderID(t *testing.T) {
	r := NewReader(strings.NewReader("id: 7\nevent: e\ndata: a\n\nid:\n\n"), 0)
	ev, err := r.Next()
	if err != nil || string(ev.ID) != "7" || string(ev.Event) != "e" || !ev.HasID {
		t.Fatalf("first: %+v %v", ev, err)
	}
	ev, err = r.Next()
	if err != nil || !ev.HasID || len(ev.ID) != 0 {
		t.Fatalf("second: %+v %v", ev, err)
	}
}

func TestAppendData(t *testing.T) {
	if got := string(AppendData(nil, 0, []byte(`{"a":1}`))); got != "data: {\"a\":1}\n\n" {
		t.Errorf("got %q", got)
	}
	if got := string(AppendData(nil, 3, []byte("a\r\nb"))); got != "id: 3\ndata: a\ndata: b\n\n" {
		t.Errorf("got %q", got)
	}
	if got := string(AppendNamed(nil, 0, "x", []byte("a"))); got != "event: x\ndata: a\n\n" {
		t.Errorf("got %q", got)
	}
	// What AppendData writes, the Reader reads back.
	got, err := readAll(t, string(AppendData(AppendData(nil, 0, []byte("a\nb")), 0, []byte("c"))), 0)
	if err != nil || !reflect.DeepEqual(got, []string{"a\nb", "c"}) {
		t.Errorf("round trip: %q %v", got, err)
	}
}
