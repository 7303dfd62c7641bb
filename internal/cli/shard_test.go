package cli

import (
	"encoding/json"
	"strings"
	"testing"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client/clienttest"
)

// lostSite returns a kvctl runner bound to a fake site of three nodes of
// which n2 and n3 are gone: shard default/0 has no leader (n1 survives),
// users/1 is led by n1.
func lostSite(t *testing.T) (*clienttest.Server, func(stdin string, args ...string) result) {
	t.Helper()
	f, run := fakeKVCtl(t)
	f.SetMembers(
		&adminv1.Member{Site: "s1", NodeId: "n1", State: "alive"},
		&adminv1.Member{Site: "s1", NodeId: "n2", State: "dead"},
	)
	f.AddKeyspace("users")
	f.SetShards(
		&adminv1.ShardInfo{Keyspace: "default", Shard: 0, Replicas: []*adminv1.ShardReplica{
			{NodeId: "n1", Voter: true, State: "Candidate", CommitIndex: 40, AppliedIndex: 39},
			{NodeId: "n2", Voter: true, State: "unreachable"},
			{NodeId: "n3", Voter: true, State: "unreachable"},
		}},
		&adminv1.ShardInfo{Keyspace: "users", Shard: 1, Leader: "n1", Replicas: []*adminv1.ShardReplica{
			{NodeId: "n1", Voter: true, State: "Leader", CommitIndex: 7, AppliedIndex: 7},
		}},
	)
	return f, run
}

// TestShardRecoverDryRun: without --force, shard recover prints the group,
// what may be lost and how to force, changes nothing and exits 6.
func TestShardRecoverDryRun(t *testing.T) {
	f, run := lostSite(t)
	r := run("", "shard", "recover", "--shard", "0", "--node", "n1")
	if r.code != ExitNotForced {
		t.Fatalf("dry run: exit %d, stderr %q", r.code, r.stderr)
	}
	checkErrLine(t, r, "dry run, nothing changed: to make n1 the only voter of default/0 and give up n2, n3, run again with --force")
	rows := fields(r.stdout)
	want := [][]string{
		{"NODE", "ROLE", "MEMBER", "STATE", "TERM", "LAST", "INDEX", "LAST", "TERM", "COMMIT", "APPLIED"},
		{"n1", "voter", "alive", "Candidate", "1", "40", "1", "40", "39"},
		{"n2", "voter", "dead", "unreachable", "0", "0", "0", "0", "0"},
		{"n3", "voter", "unknown", "unreachable", "0", "0", "0", "0", "0"},
	}
	for i := range want {
		if i >= len(rows) || strings.Join(rows[i], " ") != strings.Join(want[i], " ") {
			t.Fatalf("line %d = %q, want %q\n%s", i, rows[min(i, len(rows)-1)], want[i], r.stdout)
		}
	}
	for _, s := range []string{
		"raft voters as n1 knows them: n1, n2, n3",
		"n1's replica: log up to index 40 (term 1), committed up to 40 as far as it knows, applied up to 39",
		"entries committed by the lost voters (n2, n3) but not stored on n1 are lost; acknowledged writes after index 40 could be lost",
		"dry run: a forced recovery makes n1 the only voter of shard default/0",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("dry run output lacks %q:\n%s", s, r.stdout)
		}
	}
	reqs := f.RecoverRequests()
	if len(reqs) != 1 || reqs[0].GetForce() || reqs[0].GetKeyspace() != "default" || reqs[0].GetShard() != 0 || reqs[0].GetNodeId() != "n1" {
		t.Fatalf("requests %v", reqs)
	}
	if f.PlacementEpoch() != 1 {
		t.Fatal("a dry run changed the placement")
	}

	// JSON: one document, dry_run set, the same exit code.
	r = run("", "-o", "json", "shard", "recover", "--shard", "0", "--node", "n1")
	if r.code != ExitNotForced {
		t.Fatalf("dry run -o json: exit %d", r.code)
	}
	var doc struct {
		DryRun       bool     `json:"dry_run"`
		Recovered    bool     `json:"recovered"`
		Lost         []string `json:"lost"`
		MayLoseAfter uint64   `json:"may_lose_after_index"`
		Replicas     []struct {
			NodeID    string `json:"node_id"`
			Alive     bool   `json:"alive"`
			LastIndex uint64 `json:"last_index"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if !doc.DryRun || doc.Recovered || strings.Join(doc.Lost, ",") != "n2,n3" || doc.MayLoseAfter != 40 ||
		len(doc.Replicas) != 3 || doc.Replicas[0].NodeID != "n1" || !doc.Replicas[0].Alive || doc.Replicas[0].LastIndex != 40 {
		t.Fatalf("-o json = %+v", doc)
	}
}

func TestShardRecoverForce(t *testing.T) {
	f, run := lostSite(t)
	r := mustOK(t, run("", "shard", "recover", "--shard", "0", "--node", "n1", "--force"))
	if !strings.Contains(r.stdout, "recovered: n1 is the only voter of shard default/0 (generation 1, placement epoch 2); gave up n2, n3") {
		t.Fatalf("forced output:\n%s", r.stdout)
	}
	if reqs := f.RecoverRequests(); len(reqs) != 1 || !reqs[0].GetForce() {
		t.Fatalf("requests %v", reqs)
	}
	// Recovered: it has a leader now, so there is nothing to recover.
	r = run("", "shard", "recover", "--shard", "0", "--node", "n1", "--force")
	if r.code != ExitError {
		t.Fatalf("second recovery: exit %d, stderr %q", r.code, r.stderr)
	}
	checkErrLine(t, r, "nothing to recover: default/0 has a leader, n1 (FailedPrecondition)")
}

// TestShardRecoverRefusals: the server's refusals reach the operator as
// one line with their exit code; nothing is printed on stdout.
func TestShardRecoverRefusals(t *testing.T) {
	_, run := lostSite(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--shard", "1", "--node", "n1", "--keyspace", "users"}, ExitError, "nothing to recover: users/1 has a leader, n1 (FailedPrecondition)"},
		{[]string{"--shard", "0", "--node", "n4"}, ExitError, "n4 holds no replica of default/0 (FailedPrecondition)"},
		{[]string{"--shard", "0", "--node", "n2"}, ExitError, "n2 is not alive (FailedPrecondition)"},
		{[]string{"--shard", "9", "--node", "n1"}, ExitNotFound, "unknown shard default/9 (NotFound)"},
		{[]string{"--shard", "0", "--node", "n1", "--keyspace", "nope"}, ExitNotFound, `unknown keyspace "nope" (NotFound)`},
	} {
		r := run("", append([]string{"shard", "recover"}, tc.args...)...)
		if r.code != tc.code || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tc.args, r.code, r.stdout, r.stderr)
			continue
		}
		checkErrLine(t, r, tc.want)
	}
}

func TestShardRecoverUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"shard"}, "needs a subcommand"},
		{[]string{"shard", "recover", "--node", "n1"}, "--shard is required"},
		{[]string{"shard", "recover", "--shard", "1"}, "--node is required"},
		{[]string{"shard", "recover", "--shard", "1", "--node", ""}, "--node is required"},
		{[]string{"shard", "recover", "--shard", "-1", "--node", "n1"}, `invalid argument "-1" for "--shard"`},
		{[]string{"shard", "recover", "--shard", "x", "--node", "n1"}, `invalid argument "x" for "--shard"`},
		{[]string{"shard", "recover", "--shard", "1", "--node", "n1", "extra"}, `unknown command "extra"`},
		{[]string{"shard", "recover", "--shard", "1", "--node", "n1", "--force=maybe"}, `invalid argument "maybe" for "--force"`},
	} {
		r := kvctl(t, "", nil, append([]string{"--endpoints", "127.0.0.1:1", "--timeout", "1s"}, tc.args...)...)
		if r.code != ExitUsage || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tc.args, r.code, r.stdout, r.stderr)
			continue
		}
		checkErrLine(t, r, tc.want)
	}
}
