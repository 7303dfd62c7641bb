package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-db/causeway/internal/membership"
)

// A node that restarts on its data finds its site by itself: it joins
// gossip through its --join addresses and the gossip addresses of its
// site's other nodes that its copy of the cluster configuration records
// (cluster.json, docs/adr/017), tries each of them once at start, starts
// whatever answers, and goes on trying them in the background (the
// membership reconnector, every ReconnectInterval) as long as no member
// alive gossips at them. A node on a new data directory must still join
// through --join within joinWait: the fresh-identity check
// (docs/adr/027) asks the members it reaches.

// joinWait bounds the join of a node on a new data directory.
const joinWait = 30 * time.Second

// seedsEvery is how often the node refreshes its gossip seeds from its
// data and checks that gossip shows it its site.
const seedsEvery = 5 * time.Second

// knownGossipAddrs returns the gossip addresses of the other nodes of
// this node's site that its copy of the cluster configuration records,
// sorted by node id, without the nodes the site catalog removed for good.
func (s *Server) knownGossipAddrs() []string {
	if s.cluster == nil {
		return nil
	}
	cfg, _ := s.cluster.Config()
	removed := map[string]bool{}
	if s.catalog != nil {
		st, _ := s.catalog.State()
		for id := range st.Removed {
			removed[id] = true
		}
	}
	self := s.members.Local().GossipAddr
	var out []string
	for _, n := range cfg.Nodes(s.cfg.Site) {
		if n.ID == s.cfg.NodeID || removed[n.ID] || n.GossipAddr == "" || n.GossipAddr == self || slices.Contains(out, n.GossipAddr) {
			continue
		}
		out = append(out, n.GossipAddr)
	}
	return out
}

// gossipSeeds returns --join and knownGossipAddrs, without repeats and
// without this node's own gossip address (a --join that names every node
// of the site names it too).
func (s *Server) gossipSeeds() []string {
	self := s.members.Local().GossipAddr
	var out []string
	for _, a := range append(slices.Clone(s.cfg.Join), s.knownGossipAddrs()...) {
		if a != "" && a != self && a != s.cfg.GossipAddr && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// joinSite joins the site's gossip as Start ends. A node on a new data
// directory joins through --join, retrying for joinWait, and fails to
// start if no address answered. A node on existing data tries --join and
// the addresses its data records once each and starts whether or not one
// answered: the membership reconnector goes on trying them.
func (s *Server) joinSite(fresh bool) error {
	seeds := s.gossipSeeds()
	s.members.SetSeeds(seeds)
	if fresh {
		if len(s.cfg.Join) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), joinWait)
		defer cancel()
		if _, err := s.members.Join(ctx, s.cfg.Join); err != nil {
			return fmt.Errorf("join %v: %w", s.cfg.Join, err)
		}
		return nil
	}
	if len(seeds) == 0 {
		return nil
	}
	known := s.knownGossipAddrs()
	s.log.Info("existing data: joining the site's gossip through --join and the site's nodes this node's data records",
		"join", s.cfg.Join, "known", known)
	if _, err := s.members.TryJoin(seeds); err != nil {
		s.log.Warn("existing data: no member of the site answered; starting on this node's data and retrying these addresses in the background",
			"addrs", seeds, "retry_every", s.reconnectInterval(), "err", err)
	}
	return nil
}

// gossipWatch refreshes the gossip seeds as the node's data learns of the
// site's nodes, and logs while gossip shows this node no other member of
// its site although the site catalog has a leader and counts other
// voters (siteCutOff).
type gossipWatch struct {
	cutOff atomic.Bool // read by the causeway_membership_site_cut_off gauge
}

// watchGossip starts the loop of gossipWatch and registers its gauge.
func (s *Server) watchGossip() {
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "causeway", Subsystem: "membership", Name: "site_cut_off",
		Help: "1 while gossip shows this node no other member of its site although the site catalog has a leader and counts other voters: the node and the rest of its site count each other as down.",
	}, func() float64 {
		if s.gossip.cutOff.Load() {
			return 1
		}
		return 0
	}))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(seedsEvery)
		defer t.Stop()
		var warned time.Time
		for {
			select {
			case <-t.C:
			case <-s.stopping:
				return
			}
			s.members.SetSeeds(s.gossipSeeds())
			why := s.siteCutOff()
			was := s.gossip.cutOff.Swap(why != "")
			switch {
			case why == "" && was:
				s.log.Info("gossip shows this node its site again")
				warned = time.Time{}
			case why != "" && time.Since(warned) >= time.Minute:
				warned = time.Now()
				s.log.Warn(why)
			}
		}
	}()
}

// siteCutOff describes why gossip and the site catalog disagree on this
// node's site, or returns "": gossip shows no other member of the site
// alive, while the site catalog has a leader and counts other voters, so
// that this node's raft groups reach other nodes that gossip does not.
// The node still serves (what it does not hold is forwarded), but it and
// the rest of the site count each other as down, and the catalog leader
// moves replicas away from the nodes it counts down.
func (s *Server) siteCutOff() string {
	if s.catalog == nil || s.members == nil {
		return ""
	}
	leader, _ := s.catalog.Leader()
	if leader == "" {
		return ""
	}
	others, _, _ := s.catalogPeers()
	if leader != s.cfg.NodeID && !slices.Contains(others, leader) {
		others = append(others, leader)
	}
	if len(others) == 0 || len(s.siteMembersUp()) > 0 {
		return ""
	}
	return fmt.Sprintf("gossip shows no other member of site %s, although the site catalog has a leader (%s) and counts %s as voters: this node and the rest of its site see each other as down, and the catalog leader moves replicas away from the nodes it sees down after --dead-grace; gossip retries %s every %v",
		s.cfg.Site, leader, strings.Join(others, ", "), s.seedsText(), s.reconnectInterval())
}

// catalogPeers returns the site catalog's voters other than this node,
// those of them gossip shows alive (or suspect), and whether this node is
// a voter.
func (s *Server) catalogPeers() (voters, up []string, self bool) {
	ids, err := s.catalog.Voters()
	if err != nil {
		return nil, nil, false
	}
	alive := s.siteMembersUp()
	for _, id := range ids {
		if id == s.cfg.NodeID {
			self = true
			continue
		}
		voters = append(voters, id)
		if slices.Contains(alive, id) {
			up = append(up, id)
		}
	}
	return voters, up, self
}

// siteMembersUp lists the other members of this node's site that gossip
// shows alive or suspect.
func (s *Server) siteMembersUp() []string {
	var out []string
	for _, m := range s.members.Members() {
		if m.Site == s.cfg.Site && m.NodeID != s.cfg.NodeID && (m.State == membership.StateAlive || m.State == membership.StateSuspect) {
			out = append(out, m.NodeID)
		}
	}
	return out
}

// noLeaderReason is Ready's reason while the site catalog has no leader,
// with what gossip shows of the catalog's other voters.
func (s *Server) noLeaderReason() string {
	const reason = "the site catalog has no leader"
	voters, up, self := s.catalogPeers()
	if len(voters) == 0 {
		return reason
	}
	all, upCount := len(voters), len(up)
	if self {
		all++
		upCount++
	}
	shown := "none"
	if len(up) > 0 {
		shown = strings.Join(up, ", ")
	}
	msg := fmt.Sprintf("%s: gossip shows %s of its other voters (%s) alive", reason, shown, strings.Join(voters, ", "))
	if upCount > all/2 {
		return msg + "; a majority of its voters is up: an election is under way"
	}
	msg += fmt.Sprintf("; %d of its %d voters must be up", all/2+1, all)
	if len(up) == 0 {
		msg += fmt.Sprintf("; gossip retries %s every %v", s.seedsText(), s.reconnectInterval())
	}
	return msg
}

// seedsText lists the gossip seeds for a message.
func (s *Server) seedsText() string {
	seeds := s.members.Seeds()
	if len(seeds) == 0 {
		return "no address (no --join, and this node's data records no other node of its site)"
	}
	return strings.Join(seeds, ", ")
}

// reconnectInterval is how often gossip retries its seeds.
func (s *Server) reconnectInterval() time.Duration { return s.members.ReconnectInterval() }
