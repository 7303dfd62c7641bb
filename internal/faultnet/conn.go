package faultnet

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// chunk is bytes due for delivery at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// queue is one direction of a wrapped connection: chunks in delivery
// order, bounded in bytes.
type queue struct {
	mu     sync.Mutex
	chunks []chunk       // REQUIRES: mu
	bytes  int           // REQUIRES: mu
	err    error         // the end of the direction, after the chunks; REQUIRES: mu
	last   time.Time     // due time of the newest chunk; REQUIRES: mu
	ready  chan struct{} // capacity 1: a chunk was queued or the direction ended
	room   chan struct{} // capacity 1: a chunk was taken
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)} }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pushLocked appends b, due no earlier than the chunk before it (order
// is kept). REQUIRES: q.mu
func (q *queue) pushLocked(b []byte, due time.Time) {
	if due.Before(q.last) {
		due = q.last
	}
	q.last = due
	q.chunks = append(q.chunks, chunk{b: b, due: due})
	q.bytes += len(b)
	signal(q.ready)
}

// head returns the first chunk.
func (q *queue) head() (chunk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.chunks) == 0 {
		return chunk{}, false
	}
	return q.chunks[0], true
}

// pop removes the first chunk.
func (q *queue) pop() {
	q.mu.Lock()
	q.bytes -= len(q.chunks[0].b)
	q.chunks = q.chunks[1:]
	q.mu.Unlock()
	signal(q.room)
}

// full reports whether the queue holds its bound.
func (q *queue) full(max int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes >= max
}

// conn applies a link's rules to a connection dialled by h to addr:
// writes follow the rule from h to addr, reads the rule from addr to h.
type conn struct {
	net.Conn
	h    *Host
	addr string

	out, in *queue
	closed  chan struct{}
	once    sync.Once

	dmu           sync.Mutex
	readDeadline  time.Time     // REQUIRES: dmu
	writeDeadline time.Time     // REQUIRES: dmu
	readDL        chan struct{} // capacity 1: the read deadline changed
	writeDL       chan struct{} // capacity 1: the write deadline changed
}

func newConn(h *Host, c net.Conn, addr string) *conn {
	w := &conn{Conn: c, h: h, addr: addr, out: newQueue(), in: newQueue(), closed: make(chan struct{}),
		readDL: make(chan struct{}, 1), writeDL: make(chan struct{}, 1)}
	go w.send()
	go w.receive()
	return w
}

// outRule returns the rule of what this side writes.
func (c *conn) outRule() (Rule, <-chan struct{}) {
	r, ch, _ := c.h.net.rule(c.h.self, c.addr)
	return r, ch
}

// inRule returns the rule of what this side reads.
func (c *conn) inRule() (Rule, <-chan struct{}) { return c.h.net.ruleFrom(c.addr, c.h.self) }

// due returns when a message sent now under r is delivered.
func (c *conn) due(r Rule) time.Time {
	d, lost := c.h.net.delay(r)
	c.h.count(c.addr, r, d, lost)
	if lost {
		d += c.h.net.cfg.RetransmitDelay
	}
	if d > 0 || r.Down {
		c.h.metrics.heldWrites.Inc()
	}
	return time.Now().Add(d)
}

func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Write queues b for delivery and returns; it waits only while the
// connection holds MaxBuffered bytes not yet delivered.
func (c *conn) Write(b []byte) (int, error) {
	r, _ := c.outRule()
	due := c.due(r)
	for {
		if c.isClosed() {
			return 0, net.ErrClosed
		}
		c.out.mu.Lock()
		if c.out.err != nil {
			err := c.out.err
			c.out.mu.Unlock()
			return 0, err
		}
		if c.out.bytes < c.h.net.cfg.MaxBuffered {
			c.out.pushLocked(append([]byte(nil), b...), due)
			c.out.mu.Unlock()
			return len(b), nil
		}
		c.out.mu.Unlock()
		if err := c.wait(c.out.room, nil, nil, c.writeDL, func() time.Time { return c.writeDeadline }); err != nil {
			return 0, err
		}
	}
}

// wait waits for ch, due, changed (each may be nil), a deadline change, the deadline
// itself or Close.
func (c *conn) wait(ch <-chan struct{}, due <-chan time.Time, changed, dlChanged <-chan struct{}, deadline func() time.Time) error {
	c.dmu.Lock()
	dl := deadline()
	c.dmu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		left := time.Until(dl)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(left)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-due:
	case <-changed:
	case <-dlChanged:
	case <-timeout:
		return os.ErrDeadlineExceeded
	case <-c.closed:
		return net.ErrClosed
	}
	return nil
}

// send delivers queued writes to the connection when they are due and
// the link is up. After Close it delivers what was written before, for
// at most Linger, then closes the connection.
func (c *conn) send() {
	defer c.Conn.Close()
	closed := (<-chan struct{})(c.closed) // nil once lingering
	var linger <-chan time.Time
	for {
		head, ok := c.out.head()
		if !ok {
			if c.isClosed() {
				return
			}
			select {
			case <-c.out.ready:
			case <-c.closed:
			}
			continue
		}
		r, changed := c.outRule()
		wait := time.Until(head.due)
		if !r.Down && wait <= 0 {
			if _, err := c.Conn.Write(head.b); err != nil {
				c.out.mu.Lock()
				c.out.err, c.out.chunks, c.out.bytes = err, nil, 0
				c.out.mu.Unlock()
				signal(c.out.room)
				return
			}
			c.out.pop()
			continue
		}
		var timer *time.Timer
		var due <-chan time.Time
		if !r.Down {
			timer = time.NewTimer(wait)
			due = timer.C
		}
		expired := false
		select {
		case <-due:
		case <-changed:
		case <-closed:
			closed = nil
			t := time.NewTimer(c.h.net.cfg.Linger)
			defer t.Stop()
			linger = t.C
		case <-linger:
			expired = true
		}
		if timer != nil {
			timer.Stop()
		}
		if expired {
			return
		}
	}
}

// receive reads from the connection and queues what arrives, due after
// the rule of the direction at arrival.
func (c *conn) receive() {
	// One read buffer, and a chunk of exactly what arrived: a buffer per
	// read held 32 KiB for every few bytes queued.
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Conn.Read(buf)
		if n > 0 {
			r, _ := c.inRule()
			due := c.due(r)
			chunk := bytes.Clone(buf[:n])
			c.in.mu.Lock()
			c.in.pushLocked(chunk, due)
			c.in.mu.Unlock()
			for c.in.full(c.h.net.cfg.MaxBuffered) {
				select {
				case <-c.in.room:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			c.in.mu.Lock()
			c.in.err = err
			c.in.mu.Unlock()
			signal(c.in.ready)
			return
		}
	}
}

// Read returns received bytes once they are due and the link from the
// peer is up.
func (c *conn) Read(b []byte) (int, error) {
	for {
		if c.isClosed() {
			return 0, net.ErrClosed
		}
		r, changed := c.inRule()
		c.in.mu.Lock()
		wait := time.Duration(-1)
		switch {
		case len(c.in.chunks) > 0:
			head := &c.in.chunks[0]
			wait = time.Until(head.due)
			if !r.Down && wait <= 0 {
				n := copy(b, head.b)
				head.b = head.b[n:]
				if len(head.b) == 0 {
					c.in.chunks = c.in.chunks[1:]
				}
				c.in.bytes -= n
				c.in.mu.Unlock()
				signal(c.in.room)
				return n, nil
			}
		case c.in.err != nil:
			err := c.in.err
			c.in.mu.Unlock()
			return 0, err
		}
		c.in.mu.Unlock()
		var due <-chan time.Time
		if !r.Down && wait >= 0 {
			t := time.NewTimer(wait)
			due = t.C
			err := c.waitRead(changed, due)
			t.Stop()
			if err != nil {
				return 0, err
			}
			continue
		}
		if err := c.waitRead(changed, nil); err != nil {
			return 0, err
		}
	}
}

// waitRead waits for data, due, a rule change, the read deadline or
// Close.
func (c *conn) waitRead(changed <-chan struct{}, due <-chan time.Time) error {
	return c.wait(c.in.ready, due, changed, c.readDL, func() time.Time { return c.readDeadline })
}

// Close stops reads at once; writes already made are still delivered
// (for at most Linger) before the connection closes.
func (c *conn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		// Unblock receive's Read: nothing more is read after Close.
		_ = c.Conn.SetReadDeadline(time.Now())
	})
	return nil
}

// SetDeadline implements net.Conn.
func (c *conn) SetDeadline(t time.Time) error {
	c.setDeadlines(&t, &t)
	return nil
}

// SetReadDeadline implements net.Conn.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.setDeadlines(&t, nil)
	return nil
}

// SetWriteDeadline implements net.Conn.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.setDeadlines(nil, &t)
	return nil
}

func (c *conn) setDeadlines(r, w *time.Time) {
	c.dmu.Lock()
	if r != nil {
		c.readDeadline = *r
	}
	if w != nil {
		c.writeDeadline = *w
	}
	c.dmu.Unlock()
	if r != nil {
		signal(c.readDL)
	}
	if w != nil {
		signal(c.writeDL)
	}
}

var _ io.ReadWriteCloser = (*conn)(nil)
