package downstream

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// watchDisconnect calls gone as soon as the client closes conn, without
// consuming any byte it may send. fasthttp reports a departed client only
// when a write fails, which for a quiet stream can be minutes away; this
// lets the bridge cancel the upstream call at once instead.
//
// It waits for the socket to become readable in the runtime's poller and
// peeks: zero bytes is the client's FIN, an error its reset. Bytes waiting
// (a pipelined request) end the watch without a verdict. The returned stop
// ends the watch and restores the connection's read deadline; it must be
// called before the connection is used again. Connections that are not
// plain sockets (TLS, in-memory test listeners) are not watched.
func watchDisconnect(conn net.Conn, gone func()) (stop func()) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var buf [1]byte
		var n int
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return !errors.Is(rerr, syscall.EAGAIN)
		})
		if err != nil { // deadline set by stop: the stream ended first
			return
		}
		if n == 0 || rerr != nil {
			gone()
		}
	}()
	return func() {
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-finished
		_ = conn.SetReadDeadline(time.Time{})
	}
}
