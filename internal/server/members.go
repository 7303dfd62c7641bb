package server

import (
	"sync"
	"time"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/membership"
)

// siteMembers adapts gossip membership to catalog.Members: the alive nodes
// of this site, and since when each other known node has not been alive. A
// node that announces another incarnation of the site than this node's
// (docs/adr/029) is not alive for it: it answers gossip under a member's
// name, but refuses the site's raft traffic and calls, and a leadership
// transfer to it would hold a shard's writes.
type siteMembers struct {
	m           *membership.Membership
	site, self  string
	incarnation func() uint64 // this node's; 0 while unknown

	mu        sync.Mutex
	downSince map[string]time.Time // REQUIRES: mu
	known     map[string]bool      // REQUIRES: mu
}

func newSiteMembers(m *membership.Membership, site, self string, incarnation func() uint64) *siteMembers {
	return &siteMembers{m: m, site: site, self: self, incarnation: incarnation, downSince: map[string]time.Time{}, known: map[string]bool{}}
}

// Alive implements catalog.Members.
func (s *siteMembers) Alive() ([]catalog.Node, map[string]time.Time) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var alive []catalog.Node
	local := s.incarnation()
	for _, mb := range s.m.Members() {
		if mb.Site != s.site || mb.NodeID == "" {
			continue
		}
		seen[mb.NodeID] = true
		s.known[mb.NodeID] = true
		foreign := local != 0 && mb.Incarnation != 0 && mb.Incarnation != local && !guards.Off(guards.SiteIncarnation)
		if mb.State == membership.StateAlive && !foreign {
			delete(s.downSince, mb.NodeID)
			alive = append(alive, catalog.Node{ID: mb.NodeID, PeerAddr: mb.PeerAddr, ClientAddr: mb.ClientAddr, Unreachable: int(mb.Unreachable), Replicas: int(mb.Replicas)})
		} else if _, ok := s.downSince[mb.NodeID]; !ok {
			// Since gossip declared it dead, if it did: the catalog
			// leader's round may come much later (and a new leader's
			// first round after an election).
			since := now
			if !mb.DownSince.IsZero() && mb.DownSince.Before(now) {
				since = mb.DownSince
			}
			s.downSince[mb.NodeID] = since
		}
	}
	// Members gossip has forgotten are down too.
	for id := range s.known {
		if _, ok := s.downSince[id]; !seen[id] && !ok {
			s.downSince[id] = now
		}
	}
	out := make(map[string]time.Time, len(s.downSince))
	for k, v := range s.downSince {
		out[k] = v
	}
	return alive, out
}

// Suspect implements catalog.Members.
func (s *siteMembers) Suspect(node string) bool {
	for _, mb := range s.m.Members() {
		if mb.Site == s.site && mb.NodeID == node && mb.State == membership.StateSuspect {
			return true
		}
	}
	return false
}
