package geo

import (
	"slices"
	"testing"

	"github.com/causeway-db/causeway/internal/cluster"
)

// TestJoinSenders: a site added to a keyspace after its creation waits
// for the join repair of every site that held the keyspace before it; a
// site added with it or after it has nothing of the keyspace's past to
// send, and a site that left the keyspace is no longer waited for.
func TestJoinSenders(t *testing.T) {
	ks := cluster.Keyspace{Name: "ks", Shards: 4, Sites: []string{"s1", "s2", "s3", "s4", "s5"},
		Joined: map[string]uint64{"s3": 10, "s4": 10, "s5": 12}}
	for _, tc := range []struct {
		site    string
		version uint64
		senders []string
	}{
		{"s1", 0, nil},                               // held it from its creation
		{"s3", 10, []string{"s1", "s2"}},             // not s4 (same change), nor s5 (later)
		{"s4", 10, []string{"s1", "s2"}},             //
		{"s5", 12, []string{"s1", "s2", "s3", "s4"}}, // s3 and s4 joined before it
		{"s9", 0, nil},                               // not a site of the keyspace
	} {
		v, senders := joinSenders(ks, tc.site)
		if v != tc.version || !slices.Equal(senders, tc.senders) {
			t.Errorf("joinSenders(%s) = %d %v, want %d %v", tc.site, v, senders, tc.version, tc.senders)
		}
	}
	if v := joinMarkFor(ks, "s3", "s1"); v != 10 {
		t.Errorf("s1's mark for s3: %d, want 10", v)
	}
	if v := joinMarkFor(ks, "s3", "s5"); v != 0 {
		t.Errorf("s5's mark for s3: %d, want 0 (s5 joined later)", v)
	}
	// s2 leaves while s3 joins: s3 waits for s1 alone.
	ks.Sites = []string{"s1", "s3", "s4", "s5"}
	if v, senders := joinSenders(ks, "s3"); v != 10 || !slices.Equal(senders, []string{"s1"}) {
		t.Errorf("after s2 left: joinSenders(s3) = %d %v, want 10 [s1]", v, senders)
	}
	marks := map[string]uint64{"s1": 10, "s2": 4}
	if o := missingMark(marks, 10, []string{"s1"}); o != "" {
		t.Errorf("missing %q with every mark there", o)
	}
	if o := missingMark(marks, 10, []string{"s1", "s2"}); o != "s2" {
		t.Errorf("missing %q, want s2 (its mark is of an earlier join)", o)
	}
}
