package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/clustertest"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// removeTestGrace is the dead grace of TestIntegrationNodeRemove: well
// over what gossip takes to declare a killed node dead (about 3 s with the
// local profile, counted from the same moment), so that the node is seen
// dead while it still holds its replicas, and short enough to wait for
// their replacement.
const removeTestGrace = 15 * time.Second

// TestIntegrationNodeRemove runs node remove against a real four-node site
// (R=3, dead grace 15 s): an unknown node is not found and a live node is
// refused; a killed node is refused while the placement map still assigns
// it replicas, and removed once the site re-created them on the other
// nodes, after which cluster members no longer lists it and a second
// removal finds it removed already. The removed node started again on its
// data directory is told to stop (its fatal error says to wipe the
// directory and use a new --node-id), and started on an empty directory
// under its old id it is refused before it creates a file. The site stays
// settled and writable. The bite of guard node-remove-check: with it off,
// the live node is removed.
func TestIntegrationNodeRemove(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-node site")
	}
	c := clustertest.New(t, 4, func(cfg *server.Config) { cfg.DeadGrace = removeTestGrace })

	// The victim: the node that is not a voter of the site catalog (at
	// most three vote), so that its catalog seat plays no part.
	voters, victim, eps := catalogVotersAndVictim(t, c)
	alive := c.Node(voters[1])
	id, peerAddr := victim.ID, victim.Srv.PeerAddr()
	t.Logf("catalog voters %v; removing %s", voters, id)
	env := map[string]string{EnvEndpoints: strings.Join(eps, ",")}
	run := func(args ...string) result {
		t.Helper()
		return kvctl(t, "", env, args...)
	}
	type member struct {
		NodeID   string `json:"node_id"`
		State    string `json:"state"`
		Replicas int    `json:"replicas"`
	}
	members := func() []member {
		t.Helper()
		var doc struct {
			Members []member `json:"members"`
		}
		r := mustOK(t, run("-o", "json", "cluster", "members"))
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("cluster members -o json: %v\n%s", err, r.stdout)
		}
		return doc.Members
	}
	find := func(ms []member, id string) *member {
		for i := range ms {
			if ms[i].NodeID == id {
				return &ms[i]
			}
		}
		return nil
	}
	mustOK(t, run("put", "before-remove", "v"))

	// An unknown node: not found.
	r := run("node", "remove", "n9")
	if r.code != ExitNotFound || r.stdout != "" {
		t.Fatalf("node remove n9: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	checkErrLine(t, r, `catalog: unknown node "n9": the site catalog has no such node`)
	checkErrLine(t, r, "(NotFound)")

	// A live node: refused, and it stays.
	r = run("node", "remove", alive.ID)
	if r.code != ExitError || r.stdout != "" {
		t.Fatalf("node remove %s, which is alive: exit %d, stdout %q, stderr %q", alive.ID, r.code, r.stdout, r.stderr)
	}
	checkErrLine(t, r, "catalog: node is not down: gossip reports "+alive.ID+" alive")
	checkErrLine(t, r, "kvctl node drain "+alive.ID+" --wait")
	checkErrLine(t, r, "(FailedPrecondition)")
	if m := find(members(), alive.ID); m == nil || m.State != "alive" || m.Replicas == 0 {
		t.Fatalf("%s after the refused removal: %+v", alive.ID, m)
	}

	// Killed: refused while gossip has not declared it dead, then while
	// the map still assigns it replicas.
	held := find(members(), id).Replicas
	if held == 0 {
		t.Fatalf("%s holds no replica: the test shows nothing", id)
	}
	c.Kill(victim)
	poll.Every(100*time.Millisecond).Until(t, 60*time.Second, id+" declared dead by gossip", func() error {
		r = run("node", "remove", id)
		if r.code == ExitError && strings.Contains(r.stderr, "catalog: node is not down") {
			return errors.New(strings.TrimSpace(r.stderr))
		}
		return nil
	})
	if r.code != ExitError {
		t.Fatalf("node remove %s, dead with %d replicas (dead grace %v): exit %d, stdout %q, stderr %q", id, held, removeTestGrace, r.code, r.stdout, r.stderr)
	}
	checkErrLine(t, r, "catalog: node still holds shard replicas: the placement map assigns "+id)
	checkErrLine(t, r, "kvctl node drain "+id+" --wait")
	checkErrLine(t, r, "(FailedPrecondition)")
	t.Logf("refused while it holds replicas: %s", strings.TrimSpace(r.stderr))

	// Past the dead grace the site re-creates its replicas on the other
	// nodes; then the removal goes through.
	c.WaitSettled(90 * time.Second)
	r = mustOK(t, run("-o", "json", "node", "remove", id))
	var doc struct {
		NodeID         string `json:"node_id"`
		Removed        bool   `json:"removed"`
		PlacementEpoch uint64 `json:"placement_epoch"`
		PeerAddr       string `json:"peer_addr"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("node remove -o json: %v\n%s", err, r.stdout)
	}
	if doc.NodeID != id || !doc.Removed || doc.PlacementEpoch == 0 || doc.PeerAddr != peerAddr {
		t.Fatalf("node remove %s -o json = %+v (peer address want %s)", id, doc, peerAddr)
	}
	poll.Every(100*time.Millisecond).Until(t, 30*time.Second, "cluster members without "+id, func() error {
		ms := members()
		if m := find(ms, id); m != nil || len(ms) != 3 {
			return fmt.Errorf("members %+v", ms)
		}
		return nil
	})
	if out := mustOK(t, run("cluster", "members")).stdout; strings.Contains(out, id+" ") {
		t.Fatalf("cluster members lists %s after its removal:\n%s", id, out)
	}
	r = run("node", "remove", id)
	if r.code != ExitNotFound {
		t.Fatalf("node remove %s again: exit %d, stderr %q", id, r.code, r.stderr)
	}
	checkErrLine(t, r, fmt.Sprintf("%s was removed already (placement epoch %d) (NotFound)", id, doc.PlacementEpoch))

	// Started again on its data directory: the catalog leader tells it
	// that it was removed, and it stops; it is never registered again.
	c.Restart(victim, nil)
	poll.Every(50*time.Millisecond).Until(t, 60*time.Second, id+" told to stop", func() error {
		select {
		case <-victim.Srv.Fatal():
			return nil
		default:
			return fmt.Errorf("%s runs (ready: %v)", id, victim.Srv.Ready())
		}
	})
	err := victim.Srv.Ready()
	if !errors.Is(err, catalog.ErrNodeRemoved) {
		t.Fatalf("%s stopped with %v, want ErrNodeRemoved", id, err)
	}
	for _, want := range []string{"node " + id + " of site s1 was removed from its site for good", "wipe its data directory", "a new --node-id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the removed node's error %q does not say %q", err, want)
		}
	}
	t.Logf("the removed node, started again, stopped: %v", err)
	st, _ := c.Node(voters[0]).Srv.Catalog().State()
	if _, ok := st.Nodes[id]; ok || st.Removed[id].ID != id {
		t.Fatalf("after %s came back: registered %v, removed %+v", id, st.Nodes[id], st.Removed[id])
	}
	cfg := victim.Cfg
	c.Kill(victim)

	// Started on an empty data directory under its old id: refused before
	// it creates a file.
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Join = []string{c.Node(voters[0]).Srv.GossipAddr()}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatalf("%s started on an empty data directory under its removed id", id)
	}
	if !errors.Is(err, catalog.ErrNodeRemoved) || !strings.Contains(err.Error(), "start this node with a new --node-id") {
		t.Fatalf("start of a wiped %s: %v, want ErrNodeRemoved saying to use a new --node-id", id, err)
	}
	if entries, err := os.ReadDir(cfg.DataDir); err != nil || len(entries) > 0 {
		t.Fatalf("the refused start left %d entries in its data directory (err %v)", len(entries), err)
	}
	t.Logf("refused on an empty data directory: %v", err)

	c.WaitSettled(60 * time.Second)
	mustOK(t, run("put", "after-remove", "w"))
	if got := mustOK(t, run("get", "--strong", "before-remove")).stdout; got != "v\n" {
		t.Fatalf("get before-remove = %q", got)
	}
}

// TestIntegrationNodeRemoveAfterDrain: the other way to a removal, which
// the refusal suggests: a killed node within its dead grace (10 minutes
// here) is refused while it holds replicas; node drain --wait moves them
// off it although it is down; then node remove goes through, taking the
// node, a non-voting member of the site catalog's raft group, out of that
// group at once.
func TestIntegrationNodeRemoveAfterDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-node site")
	}
	fastDrainPolls(t)
	c := clustertest.New(t, 4, func(cfg *server.Config) { cfg.DeadGrace = 10 * time.Minute })
	_, victim, eps := catalogVotersAndVictim(t, c)
	id := victim.ID
	env := map[string]string{EnvEndpoints: strings.Join(eps, ",")}
	run := func(args ...string) result {
		t.Helper()
		return kvctl(t, "", env, args...)
	}

	c.Kill(victim)
	var r result
	poll.Every(100*time.Millisecond).Until(t, 60*time.Second, id+" declared dead by gossip", func() error {
		r = run("node", "remove", id)
		if r.code == ExitError && strings.Contains(r.stderr, "catalog: node is not down") {
			return errors.New(strings.TrimSpace(r.stderr))
		}
		return nil
	})
	if r.code != ExitError {
		t.Fatalf("node remove %s, dead within its grace: exit %d, stdout %q, stderr %q", id, r.code, r.stdout, r.stderr)
	}
	checkErrLine(t, r, "catalog: node still holds shard replicas")

	r = mustOK(t, run("node", "drain", id, "--wait", "--timeout", "2m"))
	if !strings.Contains(r.stdout, id+": drained, 0 replicas left") {
		t.Fatalf("node drain %s --wait printed:\n%s", id, r.stdout)
	}
	r = mustOK(t, run("node", "remove", id))
	if !strings.HasPrefix(r.stdout, "node "+id+" is removed from the site (placement epoch ") {
		t.Fatalf("node remove %s printed %q", id, r.stdout)
	}
	for _, n := range c.Live() {
		if v, _ := n.Srv.Catalog().Voters(); slices.Contains(v, id) {
			t.Fatalf("%s is a catalog voter on %s after its removal: %v", id, n.ID, v)
		}
	}
	c.WaitSettled(60 * time.Second)
}

// catalogVotersAndVictim waits until the site catalog of the four-node
// site c has three voters, and returns them, the node that does not vote
// (so that its catalog seat plays no part in a test that removes it) and
// the client addresses of the voters.
func catalogVotersAndVictim(t *testing.T, c *clustertest.Cluster) (voters []string, victim *clustertest.Node, eps []string) {
	t.Helper()
	poll.Every(50*time.Millisecond).Until(t, 60*time.Second, "three catalog voters", func() error {
		for _, n := range c.Live() {
			if n.Srv.Catalog().IsLeader() {
				voters, _ = n.Srv.Catalog().Voters()
				if len(voters) == 3 {
					return nil
				}
			}
		}
		return fmt.Errorf("catalog voters %v", voters)
	})
	for _, n := range c.Live() {
		if slices.Contains(voters, n.ID) {
			eps = append(eps, n.Srv.ClientAddr())
		} else {
			victim = n
		}
	}
	return voters, victim, eps
}
