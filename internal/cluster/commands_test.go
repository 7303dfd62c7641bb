package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

func TestApply(t *testing.T) {
	cfg := Config{Sites: map[string]Site{}, Keyspaces: map[string]Keyspace{}}
	apply := func(cmd Command) error {
		t.Helper()
		next, err := Apply(cfg, cmd)
		if err == nil {
			cfg = next
		}
		return err
	}
	node := func(site, id string) *Node { return &Node{ID: id, Site: site, PeerAddr: site + id + ":1"} }
	for i, n := range []*Node{node("s1", "n1"), node("s1", "n2"), node("s2", "n1")} {
		if err := apply(Command{Op: OpAddNode, Node: n, DefaultShards: 8, ClusterID: uint64(100 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The first registration names the cluster; later ones keep its id.
	if cfg.ID != 100 || cfg.Clone().ID != 100 {
		t.Fatalf("cluster id %d, want 100", cfg.ID)
	}
	if !cfg.Sites["s1"].Nodes["n1"].Voter || cfg.Sites["s1"].Nodes["n2"].Voter || !cfg.Sites["s2"].Nodes["n1"].Voter {
		t.Fatalf("voters: %+v", cfg.Sites)
	}
	if ks, _ := cfg.Keyspace(DefaultKeyspace); ks.Shards != 8 || !slices.Equal(ks.Sites, []string{"s1", "s2"}) {
		t.Fatalf("default keyspace %+v", ks)
	}
	for _, tc := range []struct {
		name string
		cmd  Command
		want error
	}{
		{"create", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "orders", Shards: 4, Sites: []string{"s2"}}}, nil},
		{"exists", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "orders", Shards: 4, Sites: []string{"s2"}}}, ErrExists},
		{"default exists", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: DefaultKeyspace, Shards: 4, Sites: []string{"s2"}}}, ErrExists},
		{"bad name", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "Bad!", Shards: 4, Sites: []string{"s2"}}}, ErrInvalid},
		{"no shards", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "x", Sites: []string{"s2"}}}, ErrInvalid},
		{"unknown site", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "x", Shards: 1, Sites: []string{"s9"}}}, ErrInvalid},
		{"site twice", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "x", Shards: 1, Sites: []string{"s1", "s1"}}}, ErrInvalid},
		{"no sites", Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "x", Shards: 1}}, ErrInvalid},
		{"set sites", Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "orders", Sites: []string{"s2", "s1"}}}, nil},
		{"set sites of missing", Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "nope", Sites: []string{"s1"}}}, ErrNotFound},
		{"set sites of default", Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: DefaultKeyspace, Sites: []string{"s1"}}}, ErrInvalid},
		{"unknown op", Command{Op: "drop_everything"}, ErrUnknownCommand},
	} {
		if err := apply(tc.cmd); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	ks, _ := cfg.Keyspace("orders")
	if !slices.Equal(ks.Chain("s1"), []string{"s1", "s2"}) {
		t.Fatalf("chain of s1: %v", ks.Chain("s1"))
	}
	held, elsewhere := cfg.Held("s1")
	if held["orders"] != 4 || held[DefaultKeyspace] != 8 || len(elsewhere) != 0 {
		t.Fatalf("held %v elsewhere %v", held, elsewhere)
	}
	_, _ = Apply(cfg, Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "orders", Sites: []string{"s9"}}})
	if ks, _ := cfg.Keyspace("orders"); !slices.Equal(ks.Sites, []string{"s2", "s1"}) {
		t.Fatalf("a refused change modified the configuration: %v", ks.Sites)
	}
}

func TestDecodeCommand(t *testing.T) {
	b, err := encodeCommand(Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "a", Shards: 1, Sites: []string{"s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if cmd, err := decodeCommand(b); err != nil || cmd.Keyspace.Name != "a" {
		t.Fatalf("%v %v", cmd, err)
	}
	for _, bad := range []string{"", "{", `{"format":2,"op":"add_node"}`} {
		if _, err := decodeCommand([]byte(bad)); !errors.Is(err, ErrUnknownCommand) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestKeptStateChecksum: the kept configuration round-trips; a changed
// digit that leaves valid JSON fails its checksum; a file of an earlier
// release (the configuration alone) is read as it is.
func TestKeptStateChecksum(t *testing.T) {
	cfg := Config{Version: 7, ID: 42, Sites: map[string]Site{"s1": {Name: "s1", Nodes: map[string]Node{"n1": {ID: "n1", Site: "s1", PeerAddr: "a:1", Voter: true}}}},
		Keyspaces: map[string]Keyspace{DefaultKeyspace: {Name: DefaultKeyspace, Shards: 16}}}
	b, err := encodeState(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeState(b)
	if err != nil || back.ID != 42 || back.Keyspaces[DefaultKeyspace].Shards != 16 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	changed := bytes.Replace(b, []byte(`"shards": 16`), []byte(`"shards": 17`), 1)
	if bytes.Equal(changed, b) {
		t.Fatalf("no shard count in %s", b)
	}
	if got, err := decodeState(changed); err == nil {
		t.Fatalf("a changed shard count was accepted: %+v", got.Keyspaces)
	}
	legacy, _ := json.MarshalIndent(cfg, "", "  ")
	if got, err := decodeState(legacy); err != nil || got.Keyspaces[DefaultKeyspace].Shards != 16 {
		t.Fatalf("an earlier release's file: %+v, %v", got, err)
	}
}

// TestSiteIncarnationIsKept: the first registration with an incarnation
// records it for the site; a node of the site that knows none yet, or
// the same one, is registered; a node of another incarnation (it
// bootstrapped a new site under the name) is refused, whatever its id.
func TestSiteIncarnationIsKept(t *testing.T) {
	cfg := Config{Sites: map[string]Site{}, Keyspaces: map[string]Keyspace{}}
	add := func(id, peer string, inc uint64) error {
		next, err := Apply(cfg, Command{Op: OpAddNode, Node: &Node{ID: id, Site: "s1", PeerAddr: peer}, DefaultShards: 4, Incarnation: inc})
		if err == nil {
			cfg = next
		}
		return err
	}
	if err := add("n1", "a:1", 0); err != nil {
		t.Fatal(err)
	}
	if err := add("n1", "a:1", 7); err != nil || cfg.Sites["s1"].Incarnation != 7 {
		t.Fatalf("first incarnation: %v, recorded %d; want 7", err, cfg.Sites["s1"].Incarnation)
	}
	for _, ok := range []struct {
		id  string
		inc uint64
	}{{"n2", 0}, {"n2", 7}, {"n1", 7}} {
		if err := add(ok.id, "b:1", ok.inc); err != nil {
			t.Fatalf("%s of incarnation %d: %v", ok.id, ok.inc, err)
		}
	}
	for _, id := range []string{"n1", "n3"} {
		if err := add(id, "c:1", 8); !errors.Is(err, ErrExists) {
			t.Fatalf("%s of another incarnation: %v, want ErrExists", id, err)
		}
	}
	if cfg.Sites["s1"].Incarnation != 7 || cfg.Sites["s1"].Nodes["n1"].PeerAddr != "b:1" {
		t.Fatalf("after the refusals: %+v", cfg.Sites["s1"])
	}
}

// TestAddNodeReplaces: a registration that names the nodes of its site at
// its peer address (Replaced) drops them, and the site's vote passes to
// the new node if one of them held it; a registration without the list
// (a log written by an earlier release) applies as it did, keeping both,
// and a listed node no longer at the address stays.
func TestAddNodeReplaces(t *testing.T) {
	base := Config{Sites: map[string]Site{}, Keyspaces: map[string]Keyspace{}}
	var err error
	for _, n := range []Node{{ID: "n1", Site: "s1", PeerAddr: "h1:1"}, {ID: "n2", Site: "s1", PeerAddr: "h2:1"}, {ID: "n3", Site: "s1", PeerAddr: "h3:1"}} {
		if base, err = Apply(base, Command{Op: OpAddNode, Node: &n, DefaultShards: 8}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(cfg Config) (out []string) {
		for _, n := range cfg.Nodes("s1") {
			out = append(out, n.ID)
		}
		return out
	}
	n4 := Node{ID: "n4", Site: "s1", PeerAddr: "h3:1"}
	if got := Replaced(base, n4); !slices.Equal(got, []string{"n3"}) {
		t.Fatalf("Replaced(n4) = %v, want [n3]", got)
	}
	cfg, err := Apply(base, Command{Op: OpAddNode, Node: &n4, Replaces: Replaced(base, n4)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(cfg); !slices.Equal(got, []string{"n1", "n2", "n4"}) {
		t.Fatalf("after n4 replaced n3: %v", got)
	}
	old, err := Apply(base, Command{Op: OpAddNode, Node: &n4})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(old); !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
		t.Fatalf("a registration without Replaces: %v, want every node kept", got)
	}
	// n3 moved to another address before the entry applied: it stays.
	moved, err := Apply(base, Command{Op: OpAddNode, Node: &Node{ID: "n3", Site: "s1", PeerAddr: "h9:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = Apply(moved, Command{Op: OpAddNode, Node: &n4, Replaces: []string{"n3"}}); err != nil {
		t.Fatal(err)
	}
	if got := ids(cfg); !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
		t.Fatalf("a replaced node at another address: %v, want it kept", got)
	}
	// The site's voter replaced: its vote passes to the new node.
	n5 := Node{ID: "n5", Site: "s1", PeerAddr: "h1:1"}
	if cfg, err = Apply(base, Command{Op: OpAddNode, Node: &n5, Replaces: Replaced(base, n5)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Sites["s1"].Nodes["n1"]; ok || !cfg.Sites["s1"].Nodes["n5"].Voter {
		t.Fatalf("n5 in place of the voter n1: %+v", cfg.Sites["s1"].Nodes)
	}
}

func TestApplyRemoveSite(t *testing.T) {
	cfg := Config{Sites: map[string]Site{}, Keyspaces: map[string]Keyspace{}}
	apply := func(cmd Command) error {
		t.Helper()
		next, err := Apply(cfg, cmd)
		if err == nil {
			cfg = next
		}
		return err
	}
	for i, site := range []string{"s1", "s2", "s3"} {
		if err := apply(Command{Op: OpAddNode, Node: &Node{ID: "n1", Site: site, PeerAddr: site + ":1"}, DefaultShards: 4, ClusterID: 7, Incarnation: uint64(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ks := range []Keyspace{{Name: "all", Shards: 2, Sites: []string{"s3", "s1", "s2"}}, {Name: "only3", Shards: 1, Sites: []string{"s3"}}, {Name: "other", Shards: 1, Sites: []string{"s1", "s2"}}} {
		if err := apply(Command{Op: OpCreateKeyspace, Keyspace: &ks}); err != nil {
			t.Fatal(err)
		}
	}
	// A keyspace s3 holds alone would be left on no site.
	if err := apply(Command{Op: OpRemoveSite, Site: "s3"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "only3") {
		t.Fatalf("removing the only site of a keyspace: %v", err)
	}
	if _, ok := cfg.Sites["s3"]; !ok || cfg.Removed != nil {
		t.Fatalf("a refused removal changed the configuration: %+v", cfg)
	}
	if err := apply(Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "only3", Sites: []string{"s3", "s2"}}}); err != nil {
		t.Fatal(err)
	}
	if err := apply(Command{Op: OpRemoveSite, Site: "s3"}); err != nil {
		t.Fatal(err)
	}
	if got := cfg.SiteNames(); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("sites after removing s3: %v", got)
	}
	for name, want := range map[string][]string{DefaultKeyspace: {"s1", "s2"}, "all": {"s1", "s2"}, "only3": {"s2"}, "other": {"s1", "s2"}} {
		if ks, _ := cfg.Keyspace(name); !slices.Equal(ks.Sites, want) {
			t.Errorf("keyspace %s on %v, want %v", name, ks.Sites, want)
		}
	}
	if r, ok := cfg.Removed["s3"]; !ok || r.Incarnation != 12 {
		t.Fatalf("removed sites: %+v", cfg.Removed)
	}
	if c := cfg.Clone(); c.Removed["s3"] != cfg.Removed["s3"] {
		t.Fatalf("clone lost the removed sites: %+v", c.Removed)
	}
	// The name is never taken back: not by a node of the old incarnation,
	// a new one, or a keyspace.
	for _, inc := range []uint64{12, 99, 0} {
		if err := apply(Command{Op: OpAddNode, Node: &Node{ID: "n9", Site: "s3", PeerAddr: "x:1"}, Incarnation: inc}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "removed from the cluster") {
			t.Fatalf("a node of removed site s3 (incarnation %d): %v", inc, err)
		}
	}
	if err := apply(Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "new", Shards: 1, Sites: []string{"s1", "s3"}}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("a keyspace on a removed site: %v", err)
	}
	if err := apply(Command{Op: OpRemoveSite, Site: "s3"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing s3 again: %v", err)
	}
	if err := apply(Command{Op: OpRemoveSite, Site: "s9"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing an unknown site: %v", err)
	}
	if err := apply(Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "only3", Sites: []string{"s1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := apply(Command{Op: OpRemoveSite, Site: "s2"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(Command{Op: OpRemoveSite, Site: "s1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("removing the last site: %v", err)
	}
	// The configuration keeps the removed sites across its encodings.
	b, err := encodeState(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Removed) != 2 || back.Removed["s3"].Incarnation != 12 {
		t.Fatalf("decoded removed sites: %+v", back.Removed)
	}
}

// TestSetKeyspaceSitesRecordsJoins: a site added to a keyspace after its
// creation is recorded with the configuration version of the change that
// added it (the raft index of its entry); a site of the keyspace's
// creation is not; a site that leaves forgets its join, and one added back
// joins again at the later version. Removing a site from the cluster
// drops its joins too, and a clone does not share them.
func TestSetKeyspaceSitesRecordsJoins(t *testing.T) {
	f := &fsm{cfg: Config{Sites: map[string]Site{}, Keyspaces: map[string]Keyspace{}}, onChange: func(Config) {}}
	index := uint64(0)
	apply := func(cmd Command) {
		t.Helper()
		b, err := encodeCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		index += 10
		if err, ok := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b}).(error); ok {
			t.Fatal(err)
		}
	}
	for i, site := range []string{"s1", "s2", "s3", "s4"} {
		apply(Command{Op: OpAddNode, Node: &Node{ID: "n1", Site: site, PeerAddr: site + ":1"}, DefaultShards: 4, ClusterID: 7, Incarnation: uint64(10 + i)})
	}
	apply(Command{Op: OpCreateKeyspace, Keyspace: &Keyspace{Name: "ks", Shards: 2, Sites: []string{"s1", "s2"}}})
	if j := f.config().Keyspaces["ks"].Joined; j != nil {
		t.Fatalf("joins at creation: %v", j)
	}
	apply(Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "ks", Sites: []string{"s1", "s2", "s3"}}})
	added := index
	if j := f.config().Keyspaces["ks"].Joined; len(j) != 1 || j["s3"] != added {
		t.Fatalf("joins after adding s3 at %d: %v", added, j)
	}
	// A new order of the same sites adds nobody.
	apply(Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "ks", Sites: []string{"s3", "s1", "s2"}}})
	if j := f.config().Keyspaces["ks"].Joined; len(j) != 1 || j["s3"] != added {
		t.Fatalf("joins after a new order: %v", j)
	}
	clone := f.config()
	apply(Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "ks", Sites: []string{"s1", "s2"}}})
	if j := f.config().Keyspaces["ks"].Joined; j != nil {
		t.Fatalf("joins after s3 left: %v", j)
	}
	if j := clone.Keyspaces["ks"].Joined; j["s3"] != added {
		t.Fatalf("a later change modified an earlier configuration's joins: %v", j)
	}
	apply(Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: "ks", Sites: []string{"s1", "s2", "s3", "s4"}}})
	again := index
	if j := f.config().Keyspaces["ks"].Joined; len(j) != 2 || j["s3"] != again || j["s4"] != again {
		t.Fatalf("joins after s3 and s4 were added at %d: %v", again, j)
	}
	apply(Command{Op: OpRemoveSite, Site: "s4"})
	if j := f.config().Keyspaces["ks"].Joined; len(j) != 1 || j["s3"] != again {
		t.Fatalf("joins after s4 left the cluster: %v", j)
	}
	b, err := EncodeConfig(f.config())
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeConfig(b)
	if err != nil || back.Keyspaces["ks"].Joined["s3"] != again {
		t.Fatalf("joins through the encoding: %v %v", back.Keyspaces["ks"].Joined, err)
	}
}
