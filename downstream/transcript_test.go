package downstream_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
	"golang.org/x/tools/txtar"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/upstream"
)

var update = flag.Bool("update", false, "rewrite the want.* sections of testdata/transcripts")

// replayUpstream serves reply to every POST and records the request bodies.
type replayUpstream struct {
	reply []byte
	mu    sync.Mutex
	got   [][]byte
}

func (u *replayUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.got = append(u.got, b)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = w.Write(u.reply)
}

func startReplay(t *testing.T, reply []byte) (*replayUpstream, string) {
	t.Helper()
	u := &replayUpstream{reply: reply}
	hs := &http.Server{Handler: u}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return u, "http://" + ln.Addr().String() + "/process"
}

var timestamps = regexp.MustCompile(`"(created_at|completed_at)":\d+`)

// normalize zeroes the wall-clock fields so transcripts compare exactly.
func normalize(b []byte) []byte {
	return timestamps.ReplaceAll(b, []byte(`"$1":0`))
}

func section(a *txtar.Archive, name string) []byte {
	for _, f := range a.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

func setSection(a *txtar.Archive, name string, data []byte) {
	for i := range a.Files {
		if a.Files[i].Name == name {
			a.Files[i].Data = data
			return
		}
	}
	a.Files = append(a.Files, txtar.File{Name: name, Data: data})
}

func prettyJSON(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return append(out, '\n')
}

// TestTranscripts replays each recorded upstream reply through the bridge
// (Agent API in, Agent API out) and compares what the upstream was sent and
// what the client received with the transcript's want sections.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("../testdata/transcripts/agentapi-*.txtar")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			up, upURL := startReplay(t, section(a, "upstream.reply"))
			bridge, _ := agentAPIBridge(t, upURL, upstream.Config{}, downstream.Options{KeepAlive: -1})
			resp, err := http.Post(bridge+"/process", "application/json", bytes.NewReader(section(a, "downstream.request")))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = normalize(got)
			if len(up.got) != 1 {
				t.Fatalf("upstream got %d requests", len(up.got))
			}
			sent := prettyJSON(up.got[0])
			if *update {
				setSection(a, "want.upstream.request", sent)
				setSection(a, "want.downstream", got)
				if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := section(a, "want.upstream.request"); !bytes.Equal(sent, want) {
				t.Errorf("upstream request:\n got: %s\nwant: %s", sent, want)
			}
			if want := section(a, "want.downstream"); !bytes.Equal(got, want) {
				t.Errorf("downstream bytes:\n got: %s\nwant: %s", got, want)
			}
			checkAgentAPIStream(t, dataFrames(t, got))
		})
	}
}

// TestPassthroughKeepsMessages checks the passthrough promise directly,
// independent of the golden bytes: the client sees the upstream's messages
// (ids, types, roles, full content) and the same final output and error.
func TestPassthroughKeepsMessages(t *testing.T) {
	files, _ := filepath.Glob("../testdata/transcripts/agentapi-*.txtar")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			reply := section(a, "upstream.reply")
			_, upURL := startReplay(t, reply)
			bridge, _ := agentAPIBridge(t, upURL, upstream.Config{}, downstream.Options{KeepAlive: -1})
			_, frames, _ := post(t, bridge+"/process", string(section(a, "downstream.request")))
			upMsgs, upFinal := completedMessages(lenientFrames(reply))
			downMsgs, downFinal := completedMessages(frames)
			if !equalJSON(upMsgs, downMsgs) {
				t.Errorf("completed messages differ:\nupstream: %s\nclient:   %s", upMsgs, downMsgs)
			}
			if upFinal.Exists() {
				if upFinal.Get("status").String() != downFinal.Get("status").String() ||
					!equalJSON(stripSeq(upFinal.Get("output").Raw), stripSeq(downFinal.Get("output").Raw)) ||
					upFinal.Get("error").Raw != downFinal.Get("error").Raw {
					t.Errorf("final response differs:\nupstream: %s\nclient:   %s", upFinal.Raw, downFinal.Raw)
				}
			}
		})
	}
}

// lenientFrames parses an upstream reply the way a tolerant client does.
func lenientFrames(raw []byte) []frame {
	var out []frame
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		if gjson.Valid(line) && strings.HasPrefix(line, "{") {
			out = append(out, gjson.Parse(line))
		}
	}
	return out
}

// completedMessages returns the completed message frames (without sequence
// numbers) as a JSON array, and the final response frame if any.
func completedMessages(frames []frame) (string, frame) {
	var msgs []string
	var final frame
	for _, f := range frames {
		switch f.Get("object").String() {
		case "message":
			if f.Get("status").String() == "completed" {
				msgs = append(msgs, stripSeq(f.Raw))
			}
		case "response":
			final = f
		}
	}
	return "[" + strings.Join(msgs, ",") + "]", final
}

var seqField = regexp.MustCompile(`"sequence_number":(null|\d+)`)

func stripSeq(s string) string { return seqField.ReplaceAllString(s, `"sequence_number":null`) }

func equalJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
