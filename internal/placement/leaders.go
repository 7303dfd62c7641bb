package placement

import "sort"

// PreferredLeaders picks, for every shard, the voter that should lead it so
// that leadership is spread evenly over the nodes: shards are visited in
// order and each takes the voter currently preferred by the fewest shards
// (ties broken by the shard's rendezvous score, so the choice is stable).
// Shards without voters are left out. The result depends only on m.
func PreferredLeaders(m Map) map[Shard]NodeID {
	load := map[NodeID]int{}
	out := make(map[Shard]NodeID, len(m.Shards))
	for _, s := range m.SortedShards() {
		var voters []NodeID
		for _, r := range m.Shards[s] {
			if r.Voter {
				voters = append(voters, r.Node)
			}
		}
		if len(voters) == 0 {
			continue
		}
		prefix := shardHash(s)
		sort.Slice(voters, func(i, j int) bool {
			if load[voters[i]] != load[voters[j]] {
				return load[voters[i]] < load[voters[j]]
			}
			return score(prefix, voters[i]) > score(prefix, voters[j])
		})
		out[s] = voters[0]
		load[voters[0]]++
	}
	return out
}
