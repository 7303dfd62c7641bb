package placement

import (
	"fmt"
	"testing"
)

func TestShardOfStableAndSpread(t *testing.T) {
	// Pinned values: changing the hash would orphan existing data.
	for key, want := range map[string]uint32{"": 5, "greeting": 6, "user:42": 2} {
		if got := ShardOf([]byte(key), 16); got != want {
			t.Errorf("ShardOf(%q) = %d, want %d", key, got, want)
		}
	}
	counts := make([]int, DefaultShards)
	const n = 16000
	for i := 0; i < n; i++ {
		counts[ShardOf([]byte(fmt.Sprintf("key%08d", i)), DefaultShards)]++
	}
	for s, c := range counts {
		if c < n/DefaultShards/2 || c > 2*n/DefaultShards {
			t.Errorf("shard %d got %d of %d keys", s, c, n)
		}
	}
}
