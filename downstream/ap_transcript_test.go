package downstream_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/tools/txtar"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/internal/refagent"
	"github.com/agentbridge/bridge/translate"
)

var (
	apTimestamps = regexp.MustCompile(`"timestamp":"[^"]*"`)
	apUUIDs      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	apHexIDs     = regexp.MustCompile(`\b(call|artifact)_[0-9a-f]+`)
)

// apNormalize replaces what changes from run to run: times and generated ids.
func apNormalize(b []byte) []byte {
	b = apTimestamps.ReplaceAll(b, []byte(`"timestamp":"<time>"`))
	b = apUUIDs.ReplaceAll(b, []byte(`<uuid>`))
	return apHexIDs.ReplaceAll(b, []byte(`${1}_<id>`))
}

// TestAPTranscripts serves each ap-*.txtar request to a bridge fronting the
// reference agent in-process, over process?wait=true (the README's answer:
// the RequestStarted event), getevents as SSE, process?until=settled (the
// bridge's whole-turn answer) and the WebSocket, and compares the
// normalized answers with the want sections (-update rewrites them).
func TestAPTranscripts(t *testing.T) {
	files, _ := filepath.Glob("../testdata/transcripts/ap-*.txtar")
	if len(files) == 0 {
		t.Fatal("no ap-*.txtar transcripts")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			body := string(bytes.TrimSpace(section(a, "downstream.request")))
			ref := refagent.New()
			ref.Delay = 0
			base := serve(t, downstream.New(downstream.Options{Logger: quietLog(), KeepAlive: -1},
				&downstream.Routing{Routes: []downstream.Route{{Name: "ref", Upstream: "ref", Proto: translate.ProtoAgentAPI, Agent: ref}}}))
			agent := base + "/ref"

			st, h, raw := apDo(t, "POST", agent+"/process?wait=true", body, nil)
			started := apJSONOK(t, st, h, raw, 200)
			rid := started.Get("request_id").String()
			if !started.IsObject() || rid == "" {
				t.Fatalf("process?wait=true answered %s", raw)
			}
			process := prettyJSON(apNormalize(raw))

			resp, err := http.Get(agent + "/getevents/" + rid + "?stream=true")
			if err != nil {
				t.Fatal(err)
			}
			sse, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if evs := apSSE(t, sse); len(evs) == 0 || evs[0].data.Raw != started.Raw {
				t.Fatalf("process answered %s, the stream %s", started.Raw, sse)
			}
			sse = apNormalize(sse)

			st, h, raw = apDo(t, "POST", agent+"/process?wait=true&until=settled", body, nil)
			if !apJSONOK(t, st, h, raw, 200).IsArray() {
				t.Fatalf("process?until=settled answered %s", raw)
			}
			settled := prettyJSON(apNormalize(raw))

			c := apDial(t, agent)
			apSend(t, c, body)
			var ws []byte
			for {
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, f, err := c.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				ws = append(append(ws, f...), '\n')
				if bytes.Contains(f, []byte(`"type":"request_completed"`)) {
					break
				}
			}
			_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			ws = apNormalize(ws)

			if *update {
				setSection(a, "want.process", process)
				setSection(a, "want.getevents.sse", sse)
				setSection(a, "want.process.settled", settled)
				setSection(a, "want.ws", ws)
				if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, c := range []struct {
				name string
				got  []byte
			}{{"want.process", process}, {"want.getevents.sse", sse}, {"want.process.settled", settled}, {"want.ws", ws}} {
				if want := section(a, c.name); !bytes.Equal(c.got, want) {
					t.Errorf("%s:\n got: %s\nwant: %s", c.name, c.got, want)
				}
			}
		})
	}
}
