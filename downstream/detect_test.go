package downstream

import "testing"

func TestLooksLikeAgentProtocol(t *testing.T) {
	cases := map[string]bool{
		`{"input":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`: false, // Agent API
		`{"input":"hi"}`:                       true,
		`{"prompt":"hi"}`:                      true,
		`{"request_id":"r","request_keys":{}}`: true,
		`{"run_id":"r"}`:                       true,
		`{"args":{"k":1}}`:                     true,
		`{"session_id":"s"}`:                   false, // an Agent API request missing input: its own 400
		`not json`:                             false,
		``:                                     false,
	}
	for body, want := range cases {
		if got := looksLikeAgentProtocol([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}
