package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/clustertest"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestIntegrationUnknownNamesExitNotFound: every command that names a
// keyspace, shard or node the site does not have exits with code 1 (not
// found), as kvctl --help documents, on a real node; a cas of an unknown
// keyspace is no compare-and-swap conflict (3).
func TestIntegrationUnknownNamesExitNotFound(t *testing.T) {
	run, _ := startServer(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keyspace", "show", "nope"}, `"nope"`},
		{[]string{"keyspace", "set-sites", "nope", "--sites", "local"}, `"nope"`},
		{[]string{"--keyspace", "nope", "get", "k"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "put", "k", "v"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "del", "k"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "scan"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "history", "k"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "txn-get", "a", "b"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "cas", "k", "v", "--expect-absent"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "cluster", "shards"}, `unknown keyspace "nope"`},
		{[]string{"--keyspace", "nope", "admin", "snapshot"}, `unknown keyspace "nope"`},
		{[]string{"cluster", "repair", "--keyspace", "nope"}, `unknown keyspace "nope"`},
		{[]string{"cluster", "repair", "--keyspace", "default", "--shard", "99"}, `unknown shard 99 of keyspace "default"`},
		{[]string{"shard", "recover", "--keyspace", "nope", "--shard", "0", "--node", "n1"}, `unknown keyspace "nope"`},
		{[]string{"shard", "recover", "--shard", "99", "--node", "n1"}, `unknown shard 99`},
		{[]string{"shard", "recover", "--shard", "0", "--node", "nosuch"}, `unknown node "nosuch"`},
		{[]string{"node", "drain", "nosuch"}, `node "nosuch" not found`},
		{[]string{"node", "remove", "nosuch"}, `unknown node "nosuch"`},
	} {
		r := run("", c.args...)
		if r.code != ExitNotFound || !strings.Contains(r.stderr, c.want) {
			t.Errorf("kvctl %s: exit %d, stderr %q; want exit %d naming %s", strings.Join(c.args, " "), r.code, r.stderr, ExitNotFound, c.want)
		}
	}
}

// TestIntegrationDrainWarnsOfTooFewNodes: draining a node of a three-node
// site (three replicas per shard) leaves two nodes for every shard, and
// one while another node is dead: node drain says so, on stderr before it
// starts, in its output and in its JSON document, and drains all the
// same. (TestIntegrationMultiNodeSite: no warning with enough nodes.)
func TestIntegrationDrainWarnsOfTooFewNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node site")
	}
	c := clustertest.New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = time.Hour })
	if r := c.Live()[0].Cfg.Replicas; r != 3 {
		t.Fatalf("replicas %d, want 3", r)
	}
	live := c.Live()
	dead, drained, kept := live[0], live[1], live[2]
	env := map[string]string{EnvEndpoints: kept.Srv.ClientAddr()}
	run := func(args ...string) result {
		t.Helper()
		return kvctl(t, "", env, args...)
	}

	// With every node alive, two are left for three replicas per shard.
	r := run("node", "drain", drained.ID)
	if r.code != ExitOK {
		t.Fatalf("drain: exit %d %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"kvctl: warning: with " + drained.ID + " drained the site has 2 live nodes",
		"for 3 replicas per shard (kvd --replicas): the shards of keyspace default will run with 2 replicas instead of 3",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("drain stderr %q lacks %q", r.stderr, want)
		}
	}
	if r := mustOK(t, run("node", "drain", drained.ID, "--undo")); strings.Contains(r.stderr, "warning") {
		t.Errorf("drain --undo warned: %q", r.stderr)
	}

	c.Kill(dead)
	poll.Every(100*time.Millisecond).Until(t, 60*time.Second, dead.ID+" reported dead", func() error {
		var doc struct {
			Members []struct {
				NodeID   string `json:"node_id"`
				State    string `json:"state"`
				Draining bool   `json:"draining"`
			} `json:"members"`
		}
		r := run("-o", "json", "cluster", "members")
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			return fmt.Errorf("exit %d %q: %v", r.code, r.stderr, err)
		}
		for _, m := range doc.Members {
			if m.NodeID == dead.ID && m.State != "dead" || m.NodeID == drained.ID && m.Draining {
				return fmt.Errorf("%+v", m)
			}
		}
		return nil
	})

	r = run("node", "drain", drained.ID)
	if r.code != ExitOK {
		t.Fatalf("drain: exit %d %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"kvctl: warning: with " + drained.ID + " drained the site has 1 live node (" + kept.ID + ") that is not draining",
		dead.ID + " (dead)",
		"for 3 replicas per shard",
		"keyspace default will run with 1 replica instead of 3",
		"draining anyway",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("drain stderr %q lacks %q", r.stderr, want)
		}
	}
	if !strings.Contains(r.stdout, "is draining") || !strings.Contains(r.stdout, "shards will run with 1 replica instead of 3") {
		t.Errorf("drain stdout %q", r.stdout)
	}
	r = run("-o", "json", "node", "drain", drained.ID)
	var doc struct {
		Draining bool   `json:"draining"`
		Warning  string `json:"warning"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != ExitOK || !doc.Draining ||
		!strings.Contains(doc.Warning, "will run with 1 replica instead of 3") {
		t.Fatalf("drain -o json: exit %d, %+v (%v)\n%s%s", r.code, doc, err, r.stdout, r.stderr)
	}
}
