package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client/clienttest"
	"github.com/causeway-db/causeway/internal/poll"
)

// fakeSite returns a kvctl runner bound to a fake node reporting a site of
// three nodes, n2 holding five replicas.
func fakeSite(t *testing.T) (*clienttest.Server, func(stdin string, args ...string) result) {
	t.Helper()
	f, run := fakeKVCtl(t)
	f.SetMembers(
		&adminv1.Member{Site: "s1", NodeId: "n1", State: "alive", ClientAddr: "127.0.0.1:7379", PeerAddr: "127.0.0.1:7381", GossipAddr: "127.0.0.1:7382", Replicas: 6},
		&adminv1.Member{Site: "s1", NodeId: "n2", State: "alive", ClientAddr: "127.0.0.1:7389", PeerAddr: "127.0.0.1:7391", GossipAddr: "127.0.0.1:7392", Replicas: 5},
		&adminv1.Member{Site: "s1", NodeId: "n3", State: "unknown", ClientAddr: "127.0.0.1:7399", PeerAddr: "127.0.0.1:7401", Replicas: 4},
	)
	f.AddKeyspace("users")
	f.SetShards(
		&adminv1.ShardInfo{Keyspace: "default", Shard: 0, Leader: "n1", Replicas: []*adminv1.ShardReplica{
			{NodeId: "n1", Voter: true, State: "Leader", CommitIndex: 12, AppliedIndex: 12},
			{NodeId: "n2", Voter: true, State: "Follower", CommitIndex: 12, AppliedIndex: 11},
			{NodeId: "n3", Voter: false, State: "unreachable"},
		}},
		&adminv1.ShardInfo{Keyspace: "users", Shard: 1, Leader: "n2", Replicas: []*adminv1.ShardReplica{
			{NodeId: "n2", Voter: true, State: "Leader", CommitIndex: 7, AppliedIndex: 7},
		}},
		&adminv1.ShardInfo{Keyspace: "users", Shard: 2},
	)
	return f, run
}

// fastDrainPolls makes node drain --wait poll every few milliseconds for
// the test.
func fastDrainPolls(t *testing.T) {
	old := drainPollInterval
	drainPollInterval = 5 * time.Millisecond
	t.Cleanup(func() { drainPollInterval = old })
}

// fields splits the lines of a table into whitespace-separated fields.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func TestClusterMembers(t *testing.T) {
	_, run := fakeSite(t)
	rows := fields(mustOK(t, run("", "cluster", "members")).stdout)
	want := [][]string{
		{"NODE", "SITE", "STATE", "DRAINING", "REPLICAS", "CLIENT", "PEER", "GOSSIP"},
		{"n1", "s1", "alive", "no", "6", "127.0.0.1:7379", "127.0.0.1:7381", "127.0.0.1:7382"},
		{"n2", "s1", "alive", "no", "5", "127.0.0.1:7389", "127.0.0.1:7391", "127.0.0.1:7392"},
		{"n3", "s1", "unknown", "no", "4", "127.0.0.1:7399", "127.0.0.1:7401", "-"},
		{},
		{"placement", "epoch", "1,", "catalog", "leader", "n1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("cluster members printed %d lines, want %d:\n%q", len(rows), len(want), rows)
	}
	for i := range want {
		if strings.Join(rows[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q", i, rows[i], want[i])
		}
	}

	var doc struct {
		PlacementEpoch uint64 `json:"placement_epoch"`
		CatalogLeader  string `json:"catalog_leader"`
		Members        []struct {
			NodeID     string `json:"node_id"`
			Site       string `json:"site"`
			State      string `json:"state"`
			Draining   bool   `json:"draining"`
			Replicas   int    `json:"replicas"`
			ClientAddr string `json:"client_addr"`
			PeerAddr   string `json:"peer_addr"`
			GossipAddr string `json:"gossip_addr"`
		} `json:"members"`
	}
	r := mustOK(t, run("", "-o", "json", "cluster", "members"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("cluster members -o json: %v\n%s", err, r.stdout)
	}
	if doc.PlacementEpoch != 1 || doc.CatalogLeader != "n1" || len(doc.Members) != 3 {
		t.Fatalf("cluster members -o json = %+v", doc)
	}
	if m := doc.Members[1]; m.NodeID != "n2" || m.Site != "s1" || m.State != "alive" || m.Draining || m.Replicas != 5 ||
		m.ClientAddr != "127.0.0.1:7389" || m.PeerAddr != "127.0.0.1:7391" || m.GossipAddr != "127.0.0.1:7392" {
		t.Fatalf("member n2 = %+v", m)
	}
}

func TestClusterMembersDefaultSite(t *testing.T) {
	f, run := fakeKVCtl(t)
	out := mustOK(t, run("", "cluster", "members")).stdout
	if !strings.Contains(out, clienttest.NodeID+"  ") || !strings.Contains(out, f.Addr()) || !strings.Contains(out, "catalog leader "+clienttest.NodeID) {
		t.Fatalf("cluster members of the fake alone:\n%s", out)
	}
}

func TestClusterShards(t *testing.T) {
	_, run := fakeSite(t)
	rows := fields(mustOK(t, run("", "cluster", "shards")).stdout)
	want := [][]string{
		{"KEYSPACE", "SHARD", "LEADER", "NODE", "ROLE", "STATE", "COMMIT", "APPLIED"},
		{"default", "0", "n1", "n1", "voter", "Leader", "12", "12"},
		{"default", "0", "n1", "n2", "voter", "Follower", "12", "11"},
		{"default", "0", "n1", "n3", "learner", "unreachable", "0", "0"},
		{"users", "1", "n2", "n2", "voter", "Leader", "7", "7"},
		{"users", "2", "-", "-", "-", "-", "-", "-"},
		{},
		{"placement", "epoch", "1,", "3", "shards"},
	}
	if len(rows) != len(want) {
		t.Fatalf("cluster shards printed %d lines, want %d:\n%q", len(rows), len(want), rows)
	}
	for i := range want {
		if strings.Join(rows[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q", i, rows[i], want[i])
		}
	}

	type replica struct {
		NodeID       string `json:"node_id"`
		Role         string `json:"role"`
		State        string `json:"state"`
		CommitIndex  uint64 `json:"commit_index"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	var doc struct {
		Keyspace       string `json:"keyspace"`
		PlacementEpoch uint64 `json:"placement_epoch"`
		Shards         []struct {
			Keyspace string    `json:"keyspace"`
			Shard    uint32    `json:"shard"`
			Leader   string    `json:"leader"`
			Replicas []replica `json:"replicas"`
		} `json:"shards"`
	}
	r := mustOK(t, run("", "-o", "json", "cluster", "shards", "--keyspace", "default"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("cluster shards -o json: %v\n%s", err, r.stdout)
	}
	if doc.Keyspace != "default" || doc.PlacementEpoch != 1 || len(doc.Shards) != 1 || doc.Shards[0].Leader != "n1" || len(doc.Shards[0].Replicas) != 3 {
		t.Fatalf("cluster shards --keyspace default -o json = %+v", doc)
	}
	if got := doc.Shards[0].Replicas[1]; got != (replica{"n2", "voter", "Follower", 12, 11}) {
		t.Fatalf("replica n2 = %+v", got)
	}
	if got := doc.Shards[0].Replicas[2]; got.Role != "learner" || got.State != "unreachable" {
		t.Fatalf("replica n3 = %+v", got)
	}
	if !strings.Contains(mustOK(t, run("", "-o", "json", "cluster", "shards", "--keyspace", "users")).stdout, `"replicas": []`) {
		t.Error("a shard without replicas is not an empty JSON list")
	}

	r = run("", "cluster", "shards", "--keyspace", "nope")
	if r.code != ExitNotFound || r.stdout != "" {
		t.Fatalf("cluster shards of an unknown keyspace: exit %d, stdout %q", r.code, r.stdout)
	}
	checkErrLine(t, r, `unknown keyspace "nope" (NotFound)`)
}

func TestNodeDrain(t *testing.T) {
	f, run := fakeSite(t)
	r := mustOK(t, run("", "node", "drain", "n2"))
	if r.stdout != "node n2 is draining (placement epoch 2)\n" {
		t.Fatalf("node drain n2 printed %q", r.stdout)
	}
	if m := f.SiteMembers()[1]; !m.GetDraining() {
		t.Fatalf("n2 after drain: %v", m)
	}
	var doc struct {
		NodeID         string  `json:"node_id"`
		Draining       bool    `json:"draining"`
		PlacementEpoch uint64  `json:"placement_epoch"`
		Waited         bool    `json:"waited"`
		Replicas       *uint32 `json:"replicas"`
	}
	r = mustOK(t, run("", "-o", "json", "node", "drain", "n2", "--undo"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("node drain --undo -o json: %v\n%s", err, r.stdout)
	}
	if doc.NodeID != "n2" || doc.Draining || doc.PlacementEpoch != 3 || doc.Waited || doc.Replicas != nil {
		t.Fatalf("node drain --undo -o json = %+v", doc)
	}
	if m := f.SiteMembers()[1]; m.GetDraining() {
		t.Fatalf("n2 after undo: %v", m)
	}

	// --undo --wait returns at once: one call, no polling.
	calls := f.Calls()
	r = mustOK(t, run("", "node", "drain", "n1", "--undo", "--wait"))
	if r.stdout != "node n1 is no longer draining (placement epoch 4)\n" || f.Calls() != calls+1 {
		t.Fatalf("node drain --undo --wait: %q after %d calls", r.stdout, f.Calls()-calls)
	}

	r = run("", "node", "drain", "n9")
	if r.code != ExitNotFound || r.stdout != "" {
		t.Fatalf("node drain of an unknown node: exit %d, stdout %q", r.code, r.stdout)
	}
	checkErrLine(t, r, `node "n9" not found in the site of the node that answered; kvctl cluster members lists the site's nodes`)
	if got := f.Drains(); got[len(got)-1].GetNodeId() != "n9" {
		t.Fatalf("last drain request = %v", got[len(got)-1])
	}
}

func TestNodeDrainWait(t *testing.T) {
	fastDrainPolls(t)
	f, run := fakeSite(t)
	f.SetDrainStep(2)
	r := mustOK(t, run("", "node", "drain", "n2", "--wait"))
	want := "node n2 is draining (placement epoch 2)\n" +
		"n2: 3 replicas left\n" +
		"n2: 1 replica left\n" +
		"n2: drained, 0 replicas left (placement epoch 2)\n"
	if r.stdout != want {
		t.Fatalf("node drain --wait printed\n%s\nwant\n%s", r.stdout, want)
	}

	// JSON: one document on stdout, progress on stderr.
	f.SetDrainStep(3)
	r = run("", "-o", "json", "node", "drain", "n1", "--wait")
	var doc struct {
		NodeID   string  `json:"node_id"`
		Draining bool    `json:"draining"`
		Waited   bool    `json:"waited"`
		Replicas *uint32 `json:"replicas"`
	}
	if r.code != ExitOK {
		t.Fatalf("node drain --wait -o json: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("node drain --wait -o json: %v\n%s", err, r.stdout)
	}
	if doc.NodeID != "n1" || !doc.Draining || !doc.Waited || doc.Replicas == nil || *doc.Replicas != 0 {
		t.Fatalf("node drain --wait -o json = %+v", doc)
	}
	if r.stderr != "n1: 3 replicas left\nn1: drained, 0 replicas left (placement epoch 3)\n" {
		t.Fatalf("node drain --wait -o json progress on stderr = %q", r.stderr)
	}
}

func TestNodeDrainWaitTimeout(t *testing.T) {
	fastDrainPolls(t)
	f, run := fakeSite(t)
	f.SetDrainStep(0) // never progresses
	start := time.Now()
	r := run("", "node", "drain", "n3", "--wait", "--timeout", "300ms")
	if r.code != ExitUnavailable {
		t.Fatalf("node drain --wait that cannot finish: exit %d, stderr %q", r.code, r.stderr)
	}
	checkErrLine(t, r, "timed out after 300ms waiting for node n3 to drain (replicas left: 4)")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("--timeout 300ms took %v", d)
	}
	if !strings.HasPrefix(r.stdout, "node n3 is draining") || !strings.Contains(r.stdout, "n3: 4 replicas left\n") {
		t.Fatalf("stdout %q", r.stdout)
	}
}

func TestNodeDrainWaitUndone(t *testing.T) {
	fastDrainPolls(t)
	f, run := fakeSite(t)
	f.SetDrainStep(0)
	done := make(chan result)
	go func() { done <- run("", "node", "drain", "n2", "--wait", "--timeout", "20s") }()
	poll.Every(time.Millisecond).Until(t, 10*time.Second, "n2 to start draining", poll.True(func() bool { return f.SiteMembers()[1].GetDraining() }))
	// Someone else undoes the drain while kvctl waits.
	ms := f.SiteMembers()
	ms[1].Draining = false
	f.SetMembers(ms...)
	r := <-done
	if r.code != ExitError {
		t.Fatalf("drain undone while waiting: exit %d, stderr %q", r.code, r.stderr)
	}
	checkErrLine(t, r, "node n2 is no longer draining (undone by someone else?) with 5 replicas left")
}

func TestSiteUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"node"},
		{"node", "drain"},
		{"node", "drain", "a", "b"},
		{"node", "drain", ""},
		{"node", "drain", "n1", "--bogus"},
		{"cluster", "members", "x"},
		{"cluster", "shards", "x"},
	} {
		r := kvctl(t, "", nil, append([]string{"--endpoints", "127.0.0.1:1", "--timeout", "1s"}, args...)...)
		if r.code != ExitUsage || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestNodeRemoveUsageErrors: node remove takes exactly one non-empty NODE;
// anything else is a usage error (exit 2) that says what is wrong and
// points at the command's help, before any call.
func TestNodeRemoveUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing NODE", []string{"node", "remove"}, "kvctl node remove needs NODE, the id of the node to remove (kvctl cluster members lists the site's nodes)"},
		{"extra argument", []string{"node", "remove", "n3", "n4"}, `kvctl node remove takes one NODE, got 2 arguments: ["n3" "n4"]`},
		{"empty NODE", []string{"node", "remove", ""}, "NODE is empty"},
		{"unknown flag", []string{"node", "remove", "n3", "--force"}, "unknown flag: --force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A dead endpoint: none of these may get as far as a call.
			r := kvctl(t, "", nil, append([]string{"--endpoints", "127.0.0.1:1", "--timeout", "1s"}, tc.args...)...)
			if r.code != ExitUsage || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			checkErrLine(t, r, tc.want)
			checkErrLine(t, r, "(see 'kvctl node remove --help')")
		})
	}
	r := kvctl(t, "", nil, "node", "remove", "--help")
	if r.code != ExitOK || !strings.Contains(r.stdout, "kvctl node remove NODE") || !strings.Contains(r.stdout, "--dead-grace") {
		t.Fatalf("node remove --help: exit %d, stdout %q", r.code, r.stdout)
	}
}
