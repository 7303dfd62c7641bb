package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// The endpoint to start with. Calls go to one endpoint at a time, the
// first of Config.Endpoints until it fails (Client.invoke). A node that
// takes connections and answers nothing (a process stopped with SIGSTOP,
// hung, or behind a link that drops its packets) fails no call: a call
// sent to it waits for a status probe to go unanswered (watchNode, 2 s)
// before it moves on, and a process that makes one call and exits
// (kvctl) would wait that out on every call. So New dials every endpoint
// at once, and the first calls wait, before their first attempt, until
// the client has picked the endpoint to start with: the first one, in
// the configured order, whose connection is ready (its node answered the
// connection's HTTP/2 handshake), once every endpoint before it has
// failed to connect or is still connecting a while after a later one
// became ready (pickStart). gRPC sends nothing on a connection before it
// is ready, so the endpoints passed over got no call. The calls after the
// pick stay at the endpoint picked, as after a failover: the session
// goes with them, and the client goes back to the first endpoint
// FailbackAfter later.
//
// Goroutines: one per endpoint watches its connection's state and one
// picks; all of them end with the pick, which ends at the latest after
// DialTimeout (by then gRPC has given up on a connection that never got
// ready), or with Close, which waits for them.

// minPreferWait is the least time the client waits for an endpoint that
// is still connecting once a later one is ready: a node that answers at
// all answers the handshake within a round trip, and a later endpoint
// (another site's node, listed after the client's own) must not win
// over an earlier one that is only a little slower to be scheduled.
const minPreferWait = 300 * time.Millisecond

// dialState is how far an endpoint's connection got, as the pick sees it.
type dialState int

const (
	dialConnecting dialState = iota + 1 // not ready yet (or idle)
	dialReady
	dialFailed // the connection failed (refused, reset, timed out, not gRPC)
)

// endpointDial is the state of an endpoint's connection while the client
// picks the endpoint to start with.
type endpointDial struct {
	state dialState
	// readyAt is when the connection became ready, from the start of
	// the dials (valid in dialReady).
	readyAt time.Duration
}

// with returns d after its connection changed to s at at.
func (d endpointDial) with(s connectivity.State, at time.Duration) endpointDial {
	switch s {
	case connectivity.Ready:
		if d.state != dialReady {
			d.readyAt = at
		}
		d.state = dialReady
	case connectivity.TransientFailure, connectivity.Shutdown:
		d.state = dialFailed
	default:
		d.state = dialConnecting
	}
	return d
}

func (d endpointDial) String() string {
	switch d.state {
	case dialReady:
		return "ready"
	case dialFailed:
		return "could not connect"
	}
	return "connecting (no answer to the connection handshake yet)"
}

// pickStart decides, from the states of the endpoints' connections at
// now (from the start of the dials), which endpoint calls start at: the
// first ready one, unless an endpoint before it is still connecting and
// the ready one became ready less than max(its own time, minPreferWait)
// ago. It returns ep >= 0 once decided; else recheck > 0 is when to decide
// again if nothing changes (0: at the next change), and none reports that
// every connection failed (calls then start at the first endpoint and
// fail over as usual).
func pickStart(dials []endpointDial, now time.Duration) (ep int, recheck time.Duration, none bool) {
	first, ready := -1, -1
	for i, d := range dials {
		if first < 0 && d.state != dialFailed {
			first = i
		}
		if ready < 0 && d.state == dialReady {
			ready = i
		}
	}
	switch {
	case first < 0:
		return -1, 0, true
	case ready < 0:
		return -1, 0, false
	case ready == first:
		return ready, 0, false
	}
	// An endpoint before the ready one is still connecting: give it as
	// long again as the ready one took, and at least minPreferWait.
	at := dials[ready].readyAt
	until := at + max(at, minPreferWait)
	if now >= until {
		return ready, 0, false
	}
	return -1, until - now, false
}

// starter is the pick of the endpoint to start with (see above).
type starter struct {
	done   chan struct{} // closed once the pick is over
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		dials  []endpointDial // for the error of a call that could not wait
		picked bool           // an endpoint was ready and picked
	}
}

// stateChange is a connection's new state.
type stateChange struct {
	ep    int
	state connectivity.State
}

// startPick dials every endpoint and starts the pick; with one endpoint
// there is nothing to pick.
func (c *Client) startPick() {
	c.start.done = make(chan struct{})
	if len(c.conns) < 2 {
		close(c.start.done)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
	c.start.cancel = cancel
	c.start.mu.dials = make([]endpointDial, len(c.conns))
	changes := make(chan stateChange, len(c.conns))
	begin := time.Now()
	for i, conn := range c.conns {
		c.start.wg.Go(func() { watchConn(ctx, i, conn, changes) })
	}
	c.start.wg.Go(func() {
		defer cancel() // ends the watchers
		defer close(c.start.done)
		c.pick(ctx, begin, changes)
	})
}

// watchConn connects conn and sends its states to changes until ctx ends.
func watchConn(ctx context.Context, ep int, conn *grpc.ClientConn, changes chan<- stateChange) {
	conn.Connect()
	for s := conn.GetState(); ; s = conn.GetState() {
		select {
		case changes <- stateChange{ep, s}:
		case <-ctx.Done():
			return
		}
		if !conn.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// pick follows the connections' states until pickStart decides, every
// connection failed, or ctx ends.
func (c *Client) pick(ctx context.Context, begin time.Time, changes <-chan stateChange) {
	dials := make([]endpointDial, len(c.conns))
	for i := range dials {
		dials[i].state = dialConnecting
	}
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	for {
		select {
		case ch := <-changes:
			dials[ch.ep] = dials[ch.ep].with(ch.state, time.Since(begin))
			c.start.mu.Lock()
			copy(c.start.mu.dials, dials)
			c.start.mu.Unlock()
		case <-recheck.C:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) { // not Close
				c.log.Debug("client: no endpoint was ready within the dial timeout; starting at the first", "endpoints", c.describeDials(dials))
			}
			return
		}
		ep, wait, none := pickStart(dials, time.Since(begin))
		switch {
		case ep >= 0:
			c.start.mu.Lock()
			c.start.mu.picked = true
			c.start.mu.Unlock()
			if ep != 0 && c.cur.CompareAndSwap(0, int64(ep)) {
				c.movedTo(ep)
				c.log.Debug("client: starting at a later endpoint", "endpoint", c.cfg.Endpoints[ep], "endpoints", c.describeDials(dials))
			}
			return
		case none:
			return
		case wait > 0:
			recheck.Reset(wait)
		}
	}
}

// describeDials renders each endpoint with the state of its connection.
func (c *Client) describeDials(dials []endpointDial) string {
	parts := make([]string, len(dials))
	for i, d := range dials {
		parts[i] = c.cfg.Endpoints[i] + ": " + d.String()
	}
	return strings.Join(parts, "; ")
}

// waitStart waits until the client picked the endpoint to start with (at
// once once it has). If ctx ends before an endpoint was ready, it returns
// the status error of ctx's end, saying how far each endpoint's
// connection got.
func (c *Client) waitStart(ctx context.Context) error {
	select {
	case <-c.start.done:
		return nil
	default:
	}
	select {
	case <-c.start.done:
	case <-ctx.Done():
	}
	c.start.mu.Lock()
	defer c.start.mu.Unlock()
	if ctx.Err() == nil || c.start.mu.picked {
		return nil // the attempt reports a context that ended meanwhile
	}
	dials := c.describeDials(c.start.mu.dials)
	st := status.FromContextError(ctx.Err())
	return status.Error(st.Code(), fmt.Sprintf("no endpoint was ready before the call's context ended (%v): %s", ctx.Err(), dials))
}

// stopPick ends the pick and waits for its goroutines.
func (c *Client) stopPick() {
	if c.start.cancel != nil {
		c.start.cancel()
	}
	c.start.wg.Wait()
}
