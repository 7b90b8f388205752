package jsonw

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendStringIsValidOneLineJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "line\nbreak\r\t\b\f", "\x00\x1f", "中文 ünï", "\u2028\u2029", "bad\xffutf8", "<html>&"} {
		got := AppendString(nil, s)
		if strings.ContainsAny(string(got), "\n\r") {
			t.Errorf("%q: literal spans lines: %s", s, got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, got, err)
		}
		if want := viaEncodingJSON(s); back != want {
			t.Errorf("%q: round trip gave %q", s, back)
		}
	}
	if got := string(AppendString(nil, "中<")); got != `"中<"` {
		t.Errorf("non-ASCII or HTML escaped: %s", got)
	}
}

func TestAppendCompact(t *testing.T) {
	in := "{ \"a\" : [ 1 , 2 ],\n \"b\": \"x y\\\" z\" }"
	if got := string(AppendCompact(nil, in)); got != `{"a":[1,2],"b":"x y\" z"}` {
		t.Fatal(got)
	}
}

// viaEncodingJSON is what encoding/json makes of s: each invalid byte
// becomes U+FFFD, the oracle AppendString must match.
func viaEncodingJSON(s string) string {
	b, _ := json.Marshal(s)
	var back string
	_ = json.Unmarshal(b, &back)
	return back
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\n\u2028\xff")
	f.Add("\xe2\x9f")
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(AppendString(nil, s), &back); err != nil || back != viaEncodingJSON(s) {
			t.Fatalf("%q: %q %v", s, back, err)
		}
	})
}
