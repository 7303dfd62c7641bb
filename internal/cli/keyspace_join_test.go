package cli

import (
	"testing"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// TestJoinLine: kvctl keyspace show/list print a site's join of a
// keyspace with its progress when the answering node is of that site.
func TestJoinLine(t *testing.T) {
	for _, tc := range []struct {
		j    *adminv1.KeyspaceJoin
		want string
	}{
		{&adminv1.KeyspaceJoin{Site: "s2", ConfigVersion: 41},
			"keyspace orders: site s2 joined at configuration version 41: ask a node of site s2 for its progress"},
		{&adminv1.KeyspaceJoin{Site: "s2", ConfigVersion: 41, Known: true, Complete: true, ShardsComplete: 16, Shards: 16},
			"keyspace orders: site s2 joined at configuration version 41: complete"},
		{&adminv1.KeyspaceJoin{Site: "s2", ConfigVersion: 41, Known: true, ShardsComplete: 9, Shards: 16, Waiting: "shard 3 waits for site s1"},
			"keyspace orders: site s2 joined at configuration version 41: 9 of 16 shards complete, shard 3 waits for site s1; its reads of the keyspace are refused until all are"},
	} {
		if got := joinLine("orders", tc.j); got != tc.want {
			t.Errorf("joinLine:\n got %s\nwant %s", got, tc.want)
		}
	}
}
