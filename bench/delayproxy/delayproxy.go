// Package delayproxy is a TCP proxy that delays each direction of every
// connection by a fixed one-way delay, for benchmarks that stretch a
// system over simulated sites (bench/geo-compare.sh puts one in front of
// each etcd member's peer port).
//
// Bytes keep their order and the throughput is not limited by the delay:
// each direction has a reader that stamps every chunk it reads with the
// time it arrived and queues it, and a writer that sends each chunk once
// its time plus the delay has passed. Chunks read back to back are
// therefore delivered back to back, one delay later, as on a long link;
// nothing sleeps per chunk in the read path. A direction's end (EOF) is
// delayed like its data and passed on as a half-close, so a peer that
// stops writing but keeps reading works through the proxy.
//
// Connection setup is not delayed: the proxy accepts at once and dials
// the target at once; only the bytes are. A queue holds at most
// MaxQueued bytes per direction; past that the reader waits, which pushes
// back on the sender through TCP as a slow link would.
//
// Goroutines: Serve runs the accept loop; each proxied connection has
// two per direction (a reader and a writer). Close stops the accept loop,
// closes every connection and waits for all of them.
package delayproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxQueued bounds the bytes read but not yet delivered, per direction of
// a connection.
const MaxQueued = 16 << 20

// chunkSize is the largest read.
const chunkSize = 64 << 10

// DialTimeout bounds the dial of the target for each accepted connection.
var DialTimeout = 5 * time.Second

// Proxy forwards the connections accepted on its listener to one target,
// each direction delayed by Delay.
type Proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex
	conns  map[*pair]struct{} // REQUIRES: mu
	closed bool               // REQUIRES: mu
	wg     sync.WaitGroup     // the accept loop and every pair's goroutines
	done   chan struct{}      // closed by Close
}

// Listen listens on addr (host:port; port 0 picks one) and returns a Proxy
// forwarding to target with the given one-way delay. Call Serve to start
// it and Close to stop it.
func Listen(addr, target string, delay time.Duration) (*Proxy, error) {
	if delay < 0 {
		return nil, fmt.Errorf("delayproxy: negative delay %v", delay)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return New(ln, target, delay), nil
}

// New returns a Proxy accepting on ln; it owns ln from now on.
func New(ln net.Listener, target string, delay time.Duration) *Proxy {
	return &Proxy{ln: ln, target: target, delay: delay, conns: map[*pair]struct{}{}, done: make(chan struct{})}
}

// Addr is the address the proxy accepts on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Delay is the one-way delay of each direction.
func (p *Proxy) Delay() time.Duration { return p.delay }

// Start runs Serve in a goroutine that Close waits for.
func (p *Proxy) Start() {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.Serve()
	}()
}

// Serve accepts connections until Close; it returns nil after Close and
// the accept error otherwise.
func (p *Proxy) Serve() error {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return nil
		}
		pr := &pair{p: p, client: c, done: make(chan struct{})}
		p.conns[pr] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go pr.run()
	}
}

// Close stops accepting, closes every proxied connection (dropping what
// was not delivered yet) and waits until every goroutine of the proxy
// ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	close(p.done)
	err := p.ln.Close()
	for pr := range p.conns {
		pr.abort()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// pair is one proxied connection: the accepted client side and the
// dialed target side.
type pair struct {
	p      *Proxy
	client net.Conn
	target net.Conn // set by run before the directions start

	once sync.Once
	done chan struct{} // closed by abort
}

// abort ends both directions at once and closes both connections.
func (pr *pair) abort() {
	pr.once.Do(func() {
		close(pr.done)
		pr.client.Close()
		if pr.target != nil {
			pr.target.Close()
		}
	})
}

func (pr *pair) run() {
	defer pr.p.wg.Done()
	defer func() {
		pr.p.mu.Lock()
		delete(pr.p.conns, pr)
		pr.p.mu.Unlock()
	}()
	d := net.Dialer{Timeout: DialTimeout}
	t, err := d.Dial("tcp", pr.p.target)
	if err != nil {
		pr.abort()
		return
	}
	pr.p.mu.Lock()
	aborted := pr.p.closed
	if !aborted {
		pr.target = t
	}
	pr.p.mu.Unlock()
	if aborted {
		t.Close()
		pr.abort()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pr.direction(pr.client, t) }()
	go func() { defer wg.Done(); pr.direction(t, pr.client) }()
	wg.Wait()
	pr.abort()
}

// chunk is data read at a time; eof marks the end of the direction.
type chunk struct {
	b   []byte
	at  time.Time
	eof bool
}

// queue holds one direction's chunks between its reader and its writer,
// at most MaxQueued bytes (or one chunk, whatever its size).
type queue struct {
	mu     sync.Mutex
	chunks []chunk         // REQUIRES: mu
	bytes  int             // REQUIRES: mu
	ready  chan struct{}   // capacity 1: a chunk was queued
	room   chan struct{}   // capacity 1: a chunk was taken
	done   <-chan struct{} // the pair's abort
}

func newQueue(done <-chan struct{}) *queue {
	return &queue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: done}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push queues c, waiting for room; false if the pair was aborted.
func (q *queue) push(c chunk) bool {
	for {
		q.mu.Lock()
		if q.bytes == 0 || q.bytes+len(c.b) <= MaxQueued {
			q.chunks = append(q.chunks, c)
			q.bytes += len(c.b)
			q.mu.Unlock()
			signal(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-q.done:
			return false
		}
	}
}

// pop takes the first chunk, waiting for one; false if the pair was
// aborted.
func (q *queue) pop() (chunk, bool) {
	for {
		q.mu.Lock()
		if len(q.chunks) > 0 {
			c := q.chunks[0]
			q.chunks[0] = chunk{}
			q.chunks = q.chunks[1:]
			q.bytes -= len(c.b)
			q.mu.Unlock()
			signal(q.room)
			return c, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-q.done:
			return chunk{}, false
		}
	}
}

// direction copies src to dst, each chunk delayed by the proxy's delay
// after it was read. It returns once the end of src was delivered (as a
// half-close of dst) or the pair was aborted.
func (pr *pair) direction(src, dst net.Conn) {
	q := newQueue(pr.done)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pr.write(q, dst)
	}()
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 {
			b := make([]byte, n)
			copy(b, buf[:n])
			if !q.push(chunk{b: b, at: now}) {
				wg.Wait()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				q.push(chunk{at: now, eof: true})
			} else {
				pr.abort() // a reset or a closed connection ends both directions
			}
			wg.Wait()
			return
		}
	}
}

// write delivers the queued chunks to dst, each at its read time plus the
// delay.
func (pr *pair) write(q *queue, dst net.Conn) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		c, ok := q.pop()
		if !ok {
			return
		}
		if wait := time.Until(c.at.Add(pr.p.delay)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-pr.done:
				return
			}
		}
		if c.eof {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				if cw.CloseWrite() == nil {
					return
				}
			}
			pr.abort()
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			pr.abort()
			return
		}
	}
}
