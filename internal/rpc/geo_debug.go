package rpc

import (
	"fmt"

	"context"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// SiteFaults drops a node's traffic to and from whole sites (kvctl debug
// partition / heal; test and demo only).
type SiteFaults interface {
	// PartitionSite cuts the node off from every node of site and returns
	// the sites it is now cut off from.
	PartitionSite(site string) ([]string, error)
	// Heal undoes every PartitionSite.
	Heal()
}

// errNoFaults answers the debug commands of a node without a fault layer.
var errNoFaults = adminStatus(ErrNoDebugFaults)

// DebugPartition implements adminv1.GeoServer.
func (g *Geo) DebugPartition(_ context.Context, req *adminv1.DebugPartitionRequest) (*adminv1.DebugPartitionResponse, error) {
	if g.deps.Faults == nil {
		return nil, errNoFaults
	}
	if req.Site == "" {
		return nil, adminStatus(fmt.Errorf("%w: site is required", ErrBadRequest))
	}
	sites, err := g.deps.Faults.PartitionSite(req.Site)
	if err != nil {
		return nil, adminStatus(fmt.Errorf("%w: %v", ErrBadRequest, err))
	}
	return &adminv1.DebugPartitionResponse{PartitionedSites: sites}, nil
}

// DebugHeal implements adminv1.GeoServer.
func (g *Geo) DebugHeal(context.Context, *adminv1.DebugHealRequest) (*adminv1.DebugHealResponse, error) {
	if g.deps.Faults == nil {
		return nil, errNoFaults
	}
	g.deps.Faults.Heal()
	return &adminv1.DebugHealResponse{}, nil
}
