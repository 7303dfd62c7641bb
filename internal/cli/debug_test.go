package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/server"
)

func TestIntegrationDebugPartitionAndHeal(t *testing.T) {
	cc := cluster.Config{Version: 1, Sites: map[string]cluster.Site{
		"local": {Name: "local", Order: 0}, "s2": {Name: "s2", Order: 1},
	}, Keyspaces: map[string]cluster.Keyspace{cluster.DefaultKeyspace: {Name: cluster.DefaultKeyspace, Shards: 4}}}
	run, _ := startServerWith(t, func(cfg *server.Config) {
		cfg.DebugFaults = true
		cfg.FixedCluster = func() (cluster.Config, <-chan struct{}) { return cc, nil }
	})
	r := mustOK(t, run("", "debug", "partition", "--site", "s2"))
	if want := "node n1 of local now drops traffic to and from: s2\n"; r.stdout != want {
		t.Fatalf("debug partition: %q, want %q", r.stdout, want)
	}
	r = mustOK(t, run("", "-o", "json", "debug", "partition", "--site", "s2"))
	var doc struct {
		Nodes []jsonDebugNode `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Nodes) != 1 || strings.Join(doc.Nodes[0].PartitionedSites, ",") != "s2" {
		t.Fatalf("debug partition -o json: %v\n%s", err, r.stdout)
	}
	for _, args := range [][]string{{"--site", "local"}, {"--site", "nope"}, {}} {
		if r := run("", append([]string{"debug", "partition"}, args...)...); r.code != ExitUsage {
			t.Errorf("debug partition %q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r = mustOK(t, run("", "debug", "heal"))
	if want := "node n1 of local carries traffic to and from every site\n"; r.stdout != want {
		t.Fatalf("debug heal: %q, want %q", r.stdout, want)
	}
}

func TestIntegrationDebugWithoutDebugFaults(t *testing.T) {
	run, _ := startServer(t)
	r := run("", "debug", "heal")
	if r.code != ExitError || !strings.Contains(r.stderr, "--debug-faults") {
		t.Fatalf("debug heal without --debug-faults: exit %d, stderr %q", r.code, r.stderr)
	}
}
