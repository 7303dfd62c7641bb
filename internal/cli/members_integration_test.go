package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/server"
)

// TestIntegrationMembersSaysReplicasPerShard: cluster members gives the
// replicas per shard the site places, on its last line and in its JSON
// document (the count itself: TestMembersGivesTheSitesReplicas,
// internal/server).
func TestIntegrationMembersSaysReplicasPerShard(t *testing.T) {
	run, _ := startServerWith(t, func(cfg *server.Config) { cfg.Replicas = 5 })
	if r := mustOK(t, run("", "cluster", "members")); !strings.Contains(r.stdout, "catalog leader n1, 5 replicas per shard") {
		t.Fatalf("cluster members:\n%s", r.stdout)
	}
	var doc struct {
		ReplicasPerShard int `json:"replicas_per_shard"`
	}
	r := mustOK(t, run("", "-o", "json", "cluster", "members"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.ReplicasPerShard != 5 {
		t.Fatalf("cluster members -o json: replicas_per_shard %d (%v)\n%s", doc.ReplicasPerShard, err, r.stdout)
	}
}
