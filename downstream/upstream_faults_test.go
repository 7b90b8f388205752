package downstream_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// startHTTP serves h on a loopback port for the test's lifetime.
func startHTTP(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String() + "/process"
}

func TestIdleUpstreamStreamTimesOut(t *testing.T) {
	up := startHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"sequence_number":0,"object":"response","status":"created","id":"r"}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	bridge, _ := agentAPIBridge(t, up, upstream.Config{Timeouts: upstream.Timeouts{Idle: 300 * time.Millisecond}}, downstream.Options{})
	start := time.Now()
	_, frames, _ := post(t, bridge+"/process", userRequest("idle", "hi"))
	last := checkAgentAPIStream(t, frames)
	if last.Get("status").String() != "failed" || last.Get("error.code").String() != translate.CodeUpstreamTimeout {
		t.Fatalf("idle stream ended with %s", last.Raw)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("idle timeout of 300ms took %v to fire", took)
	}
}

func TestLongHealthyStreamIsNotCutByTotalTimeout(t *testing.T) {
	up := startHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"sequence_number":0,"object":"response","status":"created","id":"r"}`+"\n\n")
		fmt.Fprint(w, `data: {"sequence_number":1,"object":"message","status":"in_progress","id":"m","type":"message","role":"assistant"}`+"\n\n")
		for i := 0; i < 8; i++ {
			fmt.Fprintf(w, `data: {"object":"content","status":"in_progress","type":"text","index":0,"delta":true,"msg_id":"m","text":"%d"}`+"\n\n", i)
			fl.Flush()
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprint(w, `data: {"object":"response","status":"completed","id":"r"}`+"\n\n")
	})
	bridge, _ := agentAPIBridge(t, up, upstream.Config{Timeouts: upstream.Timeouts{
		Total: 300 * time.Millisecond, FirstByte: 300 * time.Millisecond, Idle: 400 * time.Millisecond}}, downstream.Options{})
	_, frames, _ := post(t, bridge+"/process", userRequest("long", "hi"))
	last := checkAgentAPIStream(t, frames)
	if last.Get("status").String() != "completed" || deltaText(frames) != "01234567" {
		t.Fatalf("an 800ms healthy stream was cut: %q %s", deltaText(frames), last.Raw)
	}
}

func TestRetryAfterHoldsCallsOff(t *testing.T) {
	var calls atomic.Int32
	up := startHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	bridge, _ := agentAPIBridge(t, up, upstream.Config{}, downstream.Options{})
	for i := 0; i < 3; i++ {
		_, frames, _ := post(t, bridge+"/process", userRequest(fmt.Sprint("ra", i), "hi"))
		last := checkAgentAPIStream(t, frames)
		if last.Get("error.code").String() != translate.CodeUpstreamUnavailable {
			t.Fatalf("call %d: %s", i, last.Raw)
		}
		if i == 0 && !strings.Contains(last.Get("error.message").String(), "slow down") {
			t.Fatalf("the upstream's reason is lost: %s", last.Raw)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("upstream called %d times within its Retry-After, want 1", n)
	}
}

func TestUpstreamAnsweringJSONInsteadOfSSEFails(t *testing.T) {
	up := startHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"detail":"wrong endpoint"}`)
	})
	bridge, _ := agentAPIBridge(t, up, upstream.Config{}, downstream.Options{})
	_, frames, _ := post(t, bridge+"/process", userRequest("json", "hi"))
	last := checkAgentAPIStream(t, frames)
	if last.Get("status").String() != "failed" || last.Get("error.code").String() != translate.CodeUpstreamError ||
		!strings.Contains(last.Get("error.message").String(), "text/event-stream") {
		t.Fatalf("%s", last.Raw)
	}
}

// TestSilentConnectionIsClosedQuietly: a connection that sends nothing
// before the read timeout is closed without an answer, which a client would
// otherwise read as an unsolicited response on an idle connection.
func TestSilentConnectionIsClosedQuietly(t *testing.T) {
	bridge := serve(t, downstream.New(downstream.Options{Logger: quietLog(), ReadTimeout: 200 * time.Millisecond}, nil))
	c, err := net.Dial("tcp", strings.TrimPrefix(bridge, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if len(b) != 0 {
		t.Fatalf("the bridge wrote %q to a connection that asked nothing", b)
	}
	if err != nil {
		t.Fatalf("connection not closed: %v", err)
	}
}

// TestUpstreamConnectionsAreReused: finished streams give their upstream
// connection back to the pool; a proxy that dials per request pays a
// connect on every call.
func TestUpstreamConnectionsAreReused(t *testing.T) {
	var conns atomic.Int32
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"object":"response","status":"created","id":"r"}`+"\n\n")
		fmt.Fprint(w, `data: {"object":"content","status":"in_progress","type":"text","index":0,"delta":true,"msg_id":"m","text":"hi"}`+"\n\n")
		fmt.Fprint(w, `data: {"object":"response","status":"completed","id":"r"}`+"\n\n")
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go hs.Serve(ln)
	defer hs.Close()
	bridge, _ := agentAPIBridge(t, "http://"+ln.Addr().String()+"/process", upstream.Config{}, downstream.Options{})
	for i := 0; i < 10; i++ {
		_, frames, _ := post(t, bridge+"/process", userRequest(fmt.Sprint("reuse", i), "hi"))
		if last := checkAgentAPIStream(t, frames); last.Get("status").String() != "completed" {
			t.Fatalf("call %d: %s", i, last.Raw)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections for 10 sequential exchanges, want 1", n)
	}
}
