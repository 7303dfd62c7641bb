package rpc

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
)

func TestAdminStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"nil", nil, codes.OK},
		{"no cluster", ErrNoCluster, codes.Unimplemented},
		{"node id", ErrNodeIDRequired, codes.InvalidArgument},
		{"no catalog leader", ErrNoCatalogLeader, codes.Unavailable},
		{"peer", peerUnavailable(errors.New("dial tcp: refused")), codes.Unavailable},
		{"remove: unknown node", catalog.ErrUnknownNode, codes.NotFound},
		{"remove: removed already", catalog.ErrNodeRemoved, codes.NotFound},
		{"remove: alive", catalog.ErrNodeNotDown, codes.FailedPrecondition},
		{"remove: replicas", catalog.ErrNodeHasReplicas, codes.FailedPrecondition},
		{"remove: catalog voter", catalog.ErrCatalogVoter, codes.FailedPrecondition},
		{"shared: unknown keyspace", router.ErrUnknownKeyspace, codes.NotFound},
		{"shared: shard stopped", shard.ErrStopped, codes.Unavailable},
		{"shared: corrupt replica", shard.ErrCorrupt, codes.Unavailable},
		{"anything else", errors.New("boom"), codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(adminStatus(tc.err)); got != tc.want {
				t.Fatalf("code %v, want %v", got, tc.want)
			}
		})
	}
}
