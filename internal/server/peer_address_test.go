package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestPeerAddressOfALiveNodeIsRefused: a node on a new data directory
// started with --peer-advertise-addr naming the peer address of a live
// node of its site (another node's flags copied) is refused with
// ErrPeerAddressInUse, naming that node, before it creates a file; the
// live node keeps its place in the cluster configuration and the site
// catalog. Without the check the new node started, and the cluster
// configuration's leader took it for the replacement of the node whose
// address it advertised (docs/adr/027): it dropped the live node from
// the configuration and from the group's membership.
func TestPeerAddressOfALiveNodeIsRefused(t *testing.T) {
	a := start(t, testConfig(t.TempDir()))
	bcfg := testConfig(t.TempDir())
	bcfg.NodeID, bcfg.Join = "n2", []string{a.srv.GossipAddr()}
	b := start(t, bcfg)
	livePeer := b.srv.PeerAddr()
	poll.Until(t, 30*time.Second, "n2 in the cluster configuration", func() error {
		return listsAt(a.srv, "n2", livePeer)
	})

	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.NodeID, cfg.Join, cfg.PeerAdvertise = "n3", []string{a.srv.GossipAddr()}, livePeer
	srv, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		defer srv.Stop()
		// Say what the start did to the live node.
		dropped := poll.Wait(10*time.Second, func() error {
			if listsAt(a.srv, "n2", livePeer) == nil {
				return errors.New("n2 still listed")
			}
			return nil
		})
		t.Fatalf("a node advertising live node n2's peer address %s started (n2 dropped from the cluster configuration: %v)", livePeer, dropped == nil)
	}
	t.Logf("start: %v", err)
	if !errors.Is(err, ErrPeerAddressInUse) || !strings.Contains(err.Error(), "node n2 of site local is alive") || !strings.Contains(err.Error(), "--peer-advertise-addr") {
		t.Fatalf("start: %v; want ErrPeerAddressInUse naming n2 and the flag", err)
	}
	if entries, rerr := os.ReadDir(dir); rerr != nil || len(entries) > 0 {
		t.Fatalf("the refused start left %v in its new data directory (%v)", entries, rerr)
	}
	// n2 keeps its place, and the refused node is registered nowhere.
	if err := listsAt(a.srv, "n2", livePeer); err != nil {
		t.Fatal(err)
	}
	cfgNow, _ := a.srv.Cluster().Config()
	for _, n := range cfgNow.Nodes(a.srv.cfg.Site) {
		if n.ID == "n3" {
			t.Fatalf("the cluster configuration lists the refused node: %+v", n)
		}
	}
	// (The site catalog may list n3 for a moment: gossip announced it
	// before it was refused, and it shows as left until gossip forgets it.)
	if st, _ := a.srv.Catalog().State(); st.Nodes["n2"].PeerAddr != livePeer {
		t.Fatalf("site catalog: n2 %+v", st.Nodes["n2"])
	}

	// A registration that reaches the cluster configuration all the same
	// (gossip did not show n2 yet, a node of an older release) is refused
	// by the leader, at which n2 answers at that address.
	_, err = a.srv.Cluster().HandleJoin(ctx(t), cluster.Node{ID: "n3", Site: a.srv.cfg.Site, PeerAddr: livePeer, ClientAddr: "127.0.0.1:1", GossipAddr: "127.0.0.1:2"}, 0)
	if !errors.Is(err, cluster.ErrExists) || !strings.Contains(err.Error(), "where node n2 of site local answers") {
		t.Fatalf("registration of n3 at n2's peer address: %v; want ErrExists naming n2", err)
	}
	if err := listsAt(a.srv, "n2", livePeer); err != nil {
		t.Fatal(err)
	}
}

// listsAt fails unless s's copy of the cluster configuration lists node id
// of its site at peer address addr.
func listsAt(s *Server, id, addr string) error {
	cfg, _ := s.Cluster().Config()
	for _, n := range cfg.Nodes(s.cfg.Site) {
		if n.ID == id {
			if n.PeerAddr != addr {
				return fmt.Errorf("the cluster configuration lists %s at %s, want %s", id, n.PeerAddr, addr)
			}
			return nil
		}
	}
	return fmt.Errorf("the cluster configuration does not list %s", id)
}
