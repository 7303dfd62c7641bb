package clustertest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestReplacedNodeLeavesClusterGroup: n3 of a 3-node site dies and loses
// its data directory, and the machine is started again on an empty one,
// on the same host and ports, under the new id n4. Besides the site
// catalog and the shards, the cluster configuration group swaps n3 for n4:
// the configuration lists n4 in place of n3, and the group's raft
// membership holds n4 and no longer n3. Before, the configuration listed
// both at one peer address, raft refused to add n4 ("found duplicate
// address in configuration"), and the group's leader failed that way
// every second, for good, while n4 never received a configuration change.
func TestReplacedNodeLeavesClusterGroup(t *testing.T) {
	// The dead grace outlasts the test: n3 is replaced because n4 took
	// its address, not because the site gave it up.
	const grace = 10 * time.Minute
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = grace })
	n1, n3 := c.Node("n1"), c.Node("n3")
	site := n1.Cfg.Site
	poll.Until(t, time.Minute, "n3 in the cluster configuration group", func() error {
		return groupHolds(n1, site, map[string]bool{"n1": true, "n2": true, "n3": true})
	})

	c.Kill(n3)
	dir := n3.Cfg.DataDir
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fresh := Config(dir, "n4")
	fresh.Join, fresh.Faults, fresh.DeadGrace = []string{n1.Srv.GossipAddr()}, c.Net, grace
	fresh.ClientAddr, fresh.PeerAddr, fresh.GossipAddr = n3.clientAddr, n3.peerAddr, n3.gossipAddr
	n4 := c.start("n4", fresh)
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n4)
	c.next = 4
	c.mu.Unlock()

	want := map[string]bool{"n1": true, "n2": true, "n4": true}
	poll.Until(t, 2*time.Minute, "n4 in place of n3 in the cluster configuration and its group", func() error {
		if err := groupHolds(n1, site, want); err != nil {
			return err
		}
		// n4 follows the group: it has the leader's configuration.
		lead, _ := n1.Srv.Cluster().Config()
		if got, _ := n4.Srv.Cluster().Config(); got.Version != lead.Version {
			return fmt.Errorf("n4 has configuration version %d, n1 %d", got.Version, lead.Version)
		}
		return nil
	})
}

// groupHolds checks that n's copy of the cluster configuration lists
// exactly the nodes want of site, and that the group's raft membership
// holds exactly them.
func groupHolds(n *Node, site string, want map[string]bool) error {
	cfg, _ := n.Srv.Cluster().Config()
	listed := map[string]bool{}
	for _, node := range cfg.Nodes(site) {
		listed[node.ID] = true
	}
	if fmt.Sprint(listed) != fmt.Sprint(want) {
		return fmt.Errorf("the configuration lists %v, want %v", listed, want)
	}
	servers, err := n.Srv.Cluster().Servers()
	if err != nil {
		return err
	}
	members := map[string]bool{}
	for _, s := range servers {
		members[string(s.ID)] = true
	}
	wantMembers := map[string]bool{}
	for id := range want {
		wantMembers[string(cluster.ServerID(site, id))] = true
	}
	if fmt.Sprint(members) != fmt.Sprint(wantMembers) {
		return fmt.Errorf("the group's members are %v, want %v", members, wantMembers)
	}
	return nil
}
