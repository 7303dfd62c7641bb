package rpc

// SiteFaults drops a node's traffic to and from whole sites (kvctl debug
// partition / heal; test and demo only).
type SiteFaults interface {
	// PartitionSite cuts the node off from every node of site and returns
	// the sites it is now cut off from.
	PartitionSite(site string) ([]string, error)
	// Heal undoes every PartitionSite.
	Heal()
}
