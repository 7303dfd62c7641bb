package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/clustertest"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestIntegrationMultiNodeSite runs cluster members, cluster shards and
// node drain against a real four-node site (replication factor 3), through
// every node's client address.
func TestIntegrationMultiNodeSite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-node site")
	}
	fastDrainPolls(t)
	c := clustertest.New(t, 4, nil)
	var eps []string
	for _, n := range c.Live() {
		eps = append(eps, n.Srv.ClientAddr())
	}
	env := map[string]string{EnvEndpoints: strings.Join(eps, ",")}
	run := func(args ...string) result {
		t.Helper()
		return kvctl(t, "", env, args...)
	}
	replicas := c.Live()[0].Cfg.Replicas
	shardsPerKeyspace := int(c.Live()[0].Cfg.Shards)

	type member struct {
		NodeID     string `json:"node_id"`
		State      string `json:"state"`
		Draining   bool   `json:"draining"`
		Replicas   int    `json:"replicas"`
		ClientAddr string `json:"client_addr"`
	}
	members := func() (doc struct {
		PlacementEpoch uint64   `json:"placement_epoch"`
		CatalogLeader  string   `json:"catalog_leader"`
		Members        []member `json:"members"`
	}) {
		t.Helper()
		r := mustOK(t, run("-o", "json", "cluster", "members"))
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("cluster members -o json: %v\n%s", err, r.stdout)
		}
		return doc
	}
	type shardsDoc struct {
		PlacementEpoch uint64 `json:"placement_epoch"`
		Shards         []struct {
			Keyspace string `json:"keyspace"`
			Shard    uint32 `json:"shard"`
			Leader   string `json:"leader"`
			Replicas []struct {
				NodeID string `json:"node_id"`
				Role   string `json:"role"`
				State  string `json:"state"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	// checkShards reports whether every shard has `replicas` voters, none
	// on node not, and exactly one of them, the shard's leader, in state
	// Leader.
	checkShards := func(doc shardsDoc, not string) error {
		if len(doc.Shards) != shardsPerKeyspace {
			return fmt.Errorf("%d shards, want %d", len(doc.Shards), shardsPerKeyspace)
		}
		for _, sh := range doc.Shards {
			leaders := 0
			for _, r := range sh.Replicas {
				if r.Role != "voter" || r.NodeID == not {
					return fmt.Errorf("shard %s/%d: replica %+v", sh.Keyspace, sh.Shard, r)
				}
				if r.State == "Leader" {
					leaders++
					if r.NodeID != sh.Leader {
						return fmt.Errorf("shard %s/%d: %s is in state Leader, the leader is %q", sh.Keyspace, sh.Shard, r.NodeID, sh.Leader)
					}
				} else if r.State != "Follower" {
					return fmt.Errorf("shard %s/%d: replica %+v", sh.Keyspace, sh.Shard, r)
				}
			}
			if len(sh.Replicas) != replicas || leaders != 1 {
				return fmt.Errorf("shard %s/%d: %d replicas, %d leaders: %+v", sh.Keyspace, sh.Shard, len(sh.Replicas), leaders, sh.Replicas)
			}
		}
		return nil
	}
	// eventuallyShards polls cluster shards until checkShards holds: raft
	// states settle shortly after the placement map does.
	eventuallyShards := func(not string) shardsDoc {
		t.Helper()
		var doc shardsDoc
		poll.Every(100*time.Millisecond).Until(t, 30*time.Second, "cluster shards to settle", func() error {
			doc = shardsDoc{}
			r := mustOK(t, run("-o", "json", "cluster", "shards", "--keyspace", "default"))
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatalf("cluster shards -o json: %v\n%s", err, r.stdout)
			}
			if err := checkShards(doc, not); err != nil {
				return fmt.Errorf("%w\n%s", err, r.stdout)
			}
			return nil
		})
		return doc
	}

	// Members: four alive nodes holding every replica between them.
	doc := members()
	if len(doc.Members) != 4 || doc.CatalogLeader == "" || doc.PlacementEpoch == 0 {
		t.Fatalf("cluster members = %+v", doc)
	}
	total := 0
	for i, m := range doc.Members {
		if m.NodeID != fmt.Sprint("n", i+1) || m.State != "alive" || m.Draining || m.Replicas == 0 || m.ClientAddr != eps[i] {
			t.Fatalf("member %d = %+v (client address want %s)", i, m, eps[i])
		}
		total += m.Replicas
	}
	if total%(shardsPerKeyspace*replicas) != 0 {
		t.Fatalf("members hold %d replicas in all, not a multiple of %d shards x R=%d", total, shardsPerKeyspace, replicas)
	}
	out := mustOK(t, run("cluster", "members")).stdout
	for _, want := range []string{"NODE", "DRAINING", "REPLICAS", "GOSSIP", "alive", "catalog leader " + doc.CatalogLeader} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster members lacks %q:\n%s", want, out)
		}
	}

	// Shards: every shard with R voters and one leader.
	eventuallyShards("")
	out = mustOK(t, run("cluster", "shards")).stdout
	if !strings.Contains(out, "ROLE") || !strings.Contains(out, "voter") || strings.Contains(out, "learner") || strings.Contains(out, "unreachable") {
		t.Errorf("cluster shards:\n%s", out)
	}

	// Data written through one node stays readable while n4 drains.
	mustOK(t, run("put", "before-drain", "v"))

	r := run("node", "drain", "n9")
	if r.code != ExitNotFound {
		t.Fatalf("node drain n9: exit %d, stderr %q", r.code, r.stderr)
	}
	checkErrLine(t, r, `node "n9" not found`)

	// Drain n4 and wait: the other three take over its replicas, R stays 3.
	r = mustOK(t, run("node", "drain", "n4", "--wait", "--timeout", "2m"))
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "node n4 is draining (placement epoch ") || !strings.HasPrefix(lines[len(lines)-1], "n4: drained, 0 replicas left") {
		t.Fatalf("node drain n4 --wait printed:\n%s", r.stdout)
	}
	if strings.Contains(r.stderr, "warning") || strings.Contains(r.stdout, "instead of") {
		t.Fatalf("node drain n4 warned of too few nodes, with three left for R=3:\n%s%s", r.stdout, r.stderr)
	}
	t.Logf("node drain n4 --wait: %d lines, from %q to %q", len(lines), lines[0], lines[len(lines)-1])
	doc = members()
	for _, m := range doc.Members {
		if m.NodeID == "n4" && (!m.Draining || m.Replicas != 0) {
			t.Fatalf("n4 after drain --wait: %+v", m)
		}
	}
	c.WaitSettled(60*time.Second, "n4")
	eventuallyShards("n4")
	if got := mustOK(t, run("get", "--strong", "before-drain")).stdout; got != "v\n" {
		t.Fatalf("get after drain = %q", got)
	}

	// Undo: n4 is no longer draining and takes replicas again.
	r = mustOK(t, run("node", "drain", "n4", "--undo", "--wait"))
	if !strings.HasPrefix(r.stdout, "node n4 is no longer draining") {
		t.Fatalf("node drain n4 --undo printed %q", r.stdout)
	}
	poll.Every(100*time.Millisecond).Until(t, 60*time.Second, "n4 to take replicas after the undo", func() error {
		var n4 member
		for _, m := range members().Members {
			if m.NodeID == "n4" {
				n4 = m
			}
		}
		if n4.Draining || n4.Replicas == 0 {
			return fmt.Errorf("n4 is %+v", n4)
		}
		return nil
	})
	c.WaitSettled(60 * time.Second)
}
