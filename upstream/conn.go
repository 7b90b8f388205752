package upstream

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// dialer makes the connections of one upstream's fasthttp client and keeps
// a handle on each, so that a streamed response can be given an idle timeout
// and be cancelled: fasthttp sets one read deadline before the response
// header and none while a body streams, and has no per-request context.
type dialer struct {
	timeout time.Duration
	conns   sync.Map // netip.AddrPort (local) -> *watchedConn
}

func (d *dialer) dial(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, d.timeout)
	if err != nil {
		return nil, err
	}
	wc := &watchedConn{Conn: c, d: d}
	if ta, ok := c.LocalAddr().(*net.TCPAddr); ok {
		wc.key = ta.AddrPort()
		d.conns.Store(wc.key, wc)
	}
	return wc, nil
}

// lookup finds the connection whose local address is addr.
func (d *dialer) lookup(addr net.Addr) *watchedConn {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	v, ok := d.conns.Load(ta.AddrPort())
	if !ok {
		return nil
	}
	return v.(*watchedConn)
}

// watchedConn renews its read deadline before every read while a stream is
// bound to it, and can be woken by a context.
type watchedConn struct {
	net.Conn
	d        *dialer
	key      netip.AddrPort
	idle     atomic.Int64 // nanoseconds; 0 = no idle bound
	watching atomic.Bool
	canceled atomic.Bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	if c.watching.Load() {
		if c.canceled.Load() {
			return 0, context.Canceled
		}
		if idle := c.idle.Load(); idle > 0 {
			_ = c.Conn.SetReadDeadline(time.Now().Add(time.Duration(idle)))
		}
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.watching.Load() && c.canceled.Load() {
		err = context.Canceled
	}
	return n, err
}

// bind starts watching for one streamed response: reads get the idle bound
// and cancelling ctx wakes a blocked read. The returned func unbinds; it
// reports false when ctx was cancelled while bound, which leaves the
// connection with a read deadline in the past: it must then be closed,
// never pooled.
func (c *watchedConn) bind(ctx context.Context, idle time.Duration) (unbind func() (clean bool)) {
	c.canceled.Store(false)
	c.idle.Store(int64(idle))
	if idle <= 0 {
		// Clear the first-byte deadline fasthttp set, or it would cut the stream.
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
	c.watching.Store(true)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.canceled.Store(true)
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() bool {
		clean := stop()
		if !clean {
			<-fired // let the wake-up finish before anyone judges the connection
		}
		c.watching.Store(false)
		c.idle.Store(0)
		return clean
	}
}

func (c *watchedConn) Close() error {
	if c.key.IsValid() {
		c.d.conns.CompareAndDelete(c.key, c)
	}
	return c.Conn.Close()
}
