package membership

import (
	"math/rand/v2"
	"time"
)

// failedMember is a member found dead, retried until ReconnectTimeout.
type failedMember struct {
	addr  string
	since time.Time
}

// reconnectLoop is the reconnector, in the spirit of Serf's: memberlist
// stops probing a dead member and forgets it after GossipToTheDeadTime, so
// two sides of a partition that outlasted failure detection would never
// talk again. Every ReconnectInterval (jittered) it tries to join each
// member found dead within ReconnectTimeout, and the seeds while no other
// member is alive; a join merges both sides' state, and memberlist's
// refutation brings the members back alive. Started by New, stopped by
// Shutdown; it does nothing after Leave.
func (m *Membership) reconnectLoop() {
	defer m.reconnected.Done()
	interval := m.cfg.reconnectInterval()
	for {
		t := time.NewTimer(interval/2 + rand.N(interval/2+1))
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
		for _, addr := range m.reconnectTargets(time.Now()) {
			select {
			case <-m.stop:
				return
			default:
			}
			m.metrics.reconnectAttempts.Inc()
			if n, err := m.ml.Join([]string{addr}); err == nil && n > 0 {
				m.log.Info("membership: reconnected", "gossip_addr", addr)
			} else {
				m.log.Debug("membership: reconnect failed", "gossip_addr", addr, "err", err)
			}
		}
	}
}

// reconnectTargets returns the addresses to try now, and forgets members
// dead for longer than ReconnectTimeout.
func (m *Membership) reconnectTargets(now time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.left || m.mu.stopped {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for name, f := range m.mu.failed {
		if now.Sub(f.since) > m.cfg.reconnectTimeout() {
			delete(m.mu.failed, name)
			continue
		}
		if !seen[f.addr] {
			seen[f.addr] = true
			out = append(out, f.addr)
		}
	}
	alone := true
	for name, p := range m.mu.peers {
		if name != m.name && p.member.State == StateAlive {
			alone = false
			break
		}
	}
	if alone {
		for _, a := range m.cfg.Seeds {
			if !seen[a] && a != m.cfg.BindAddr {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}
