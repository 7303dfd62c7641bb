package membership

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// failedMember is a member found dead, retried until ReconnectTimeout.
type failedMember struct {
	addr  string
	since time.Time
}

// aloneWarnEvery bounds how often the reconnector warns that no other
// member is alive and none of the addresses it tried answered.
const aloneWarnEvery = time.Minute

// reconnectLoop is the reconnector, in the spirit of Serf's: memberlist
// stops probing a dead member and forgets it after GossipToTheDeadTime, so
// two sides of a partition that outlasted failure detection would never
// talk again. Every ReconnectInterval (jittered) it tries to join each
// member found dead within ReconnectTimeout, and each seed at which no
// member alive gossips, all at once: a seed this node never saw (a node that started
// after it, or on its own: the two halves of a site restarted apart would
// otherwise never meet), or a member gossip forgot. A join merges both
// sides' state, and memberlist's refutation brings the members back alive.
// While it sees no other member alive and no address answers, it warns at
// most every aloneWarnEvery, naming the addresses. Started by New, stopped
// by Shutdown; it does nothing after Leave.
func (m *Membership) reconnectLoop() {
	defer m.reconnected.Done()
	interval := m.cfg.reconnectInterval()
	var warned time.Time
	for {
		t := time.NewTimer(interval/2 + rand.N(interval/2+1))
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
		targets, alone := m.reconnectTargets(time.Now())
		// At once: an address whose host is down takes up to TCPTimeout,
		// which must not hold up the others.
		var wg sync.WaitGroup
		var answered atomic.Bool
		for _, addr := range targets {
			m.metrics.reconnectAttempts.Inc()
			wg.Go(func() {
				if n, err := m.ml.Join([]string{addr}); err == nil && n > 0 {
					answered.Store(true)
					m.log.Info("membership: reconnected", "gossip_addr", addr)
				} else {
					m.log.Debug("membership: reconnect failed", "gossip_addr", addr, "err", err)
				}
			})
		}
		wg.Wait()
		switch {
		case !alone || answered.Load():
			warned = time.Time{}
		case len(targets) > 0 && time.Since(warned) >= aloneWarnEvery:
			warned = time.Now()
			m.log.Warn("membership: no other member alive, and none of the addresses tried answered; retrying", "addrs", targets, "retry_every", interval)
		}
	}
}

// reconnectTargets returns the addresses to try now, and whether this node
// sees no other member alive; it forgets members dead for longer than
// ReconnectTimeout.
func (m *Membership) reconnectTargets(now time.Time) (targets []string, alone bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.left || m.mu.stopped {
		return nil, false
	}
	seen := map[string]bool{}
	for name, f := range m.mu.failed {
		if now.Sub(f.since) > m.cfg.reconnectTimeout() {
			delete(m.mu.failed, name)
			continue
		}
		if !seen[f.addr] {
			seen[f.addr] = true
			targets = append(targets, f.addr)
		}
	}
	// The addresses members alive (suspect ones included) gossip at, this
	// node's own among them.
	alone = true
	up := map[string]bool{m.cfg.BindAddr: true}
	for name, p := range m.mu.peers {
		if p.member.State == StateAlive {
			up[p.member.GossipAddr] = true
			if name != m.name {
				alone = false
			}
		}
	}
	for _, a := range m.mu.seeds {
		if !seen[a] && !up[a] {
			seen[a] = true
			targets = append(targets, a)
		}
	}
	return targets, alone
}
