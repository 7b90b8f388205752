package downstream_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbridge/bridge/downstream"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

// TestSlowClientSlowsItsUpstream: a client that stops reading makes the
// bridge stop reading its upstream (one event in flight), so the bridge's
// memory does not grow with what the agent produces.
func TestSlowClientSlowsItsUpstream(t *testing.T) {
	var written atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	up := startHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"object":"response","status":"created","id":"r"}`+"\n\n")
		fmt.Fprint(w, `data: {"object":"message","status":"in_progress","id":"m","type":"message","role":"assistant"}`+"\n\n")
		chunk := strings.Repeat("x", 1000)
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			default:
			}
			if _, err := fmt.Fprintf(w, `data: {"object":"content","status":"in_progress","type":"text","index":0,"delta":true,"msg_id":"m","text":"%s"}`+"\n\n", chunk); err != nil {
				return
			}
			written.Add(1)
		}
	})
	bridge, _ := agentAPIBridge(t, up, upstream.Config{}, downstream.Options{KeepAlive: -1})
	c, err := net.Dial("tcp", strings.TrimPrefix(bridge, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // a small window: the client's share of the buffering
	}
	body := userRequest("slow-reader", "hi")
	fmt.Fprintf(c, "POST /process HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil { // the status line; then read nothing
		t.Fatal(err)
	}
	// Wait until the upstream is blocked: no progress for a whole second.
	var n1, n2 int64
	for deadline := time.Now().Add(15 * time.Second); ; {
		n1 = written.Load()
		time.Sleep(time.Second)
		n2 = written.Load()
		if n1 == n2 && n2 > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream kept writing (%d -> %d events) while the client read nothing", n1, n2)
		}
	}
	// Stalled, the bridge must hold still: nothing read upstream, nothing
	// buffered. (Before the stall, what the agent wrote filled the socket
	// buffers, which the kernel bounds, and the Agent API encoder keeps the
	// message text for the final response's output, as the protocol needs.)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapStalled := ms.HeapAlloc
	time.Sleep(2 * time.Second)
	// The kernel may still grow a socket buffer and take a little more (its
	// memory, not the bridge's), but the stream stays stalled.
	if n3 := written.Load(); n3-n2 > 2000 {
		t.Fatalf("the upstream went on from %d to %d events", n2, n3)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grew := int64(ms.HeapAlloc) - int64(heapStalled); grew > 256<<10 {
		t.Fatalf("heap grew by %d bytes while the client read nothing", grew)
	}
	t.Logf("upstream stalled after %d events of ~1 KB", n2)
}

// TestStreamLimitAnswersBusy: past the server's bound on open streams, a
// client gets the protocol's busy error at once.
func TestStreamLimitAnswersBusy(t *testing.T) {
	hold := make(chan struct{})
	up := startHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"object":"response","status":"created","id":"r"}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `data: {"object":"response","status":"completed","id":"r"}`+"\n\n")
	})
	bridge, _ := agentAPIBridge(t, up, upstream.Config{}, downstream.Options{MaxStreams: 1, KeepAlive: -1})
	first, err := http.Post(bridge+"/process", "application/json", strings.NewReader(userRequest("a", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if _, err := bufio.NewReader(first.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, frames, _ := post(t, bridge+"/process", userRequest("b", "hi"))
	last := checkAgentAPIStream(t, frames)
	if last.Get("error.code").String() != translate.CodeBusy || time.Since(start) > 2*time.Second {
		t.Fatalf("second stream past a limit of 1: %s after %v", last.Raw, time.Since(start))
	}
	close(hold)
}
