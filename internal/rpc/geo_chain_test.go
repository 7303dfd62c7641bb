package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/router"
)

// fakeChain is a ChainStatus whose Repair fails with err.
type fakeChain struct{ err error }

func (fakeChain) Lag(string) SiteLag             { return SiteLag{} }
func (fakeChain) Unreached(string) time.Duration { return 0 }
func (c fakeChain) Repair(context.Context, string, *uint32, func(*adminv1.RepairProgress)) error {
	return c.err
}

// repairStream is the server side of a Repair call whose caller waits.
type repairStream struct{ grpc.ServerStream }

func (repairStream) Context() context.Context           { return context.Background() }
func (repairStream) Send(*adminv1.RepairProgress) error { return nil }

// TestRepairErrorCodes: an unknown keyspace or shard is NotFound, as from
// every other call; other refusals of the request are InvalidArgument.
func TestRepairErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{fmt.Errorf("%w %q", router.ErrUnknownKeyspace, "nope"), codes.NotFound},
		{fmt.Errorf("%w 7 of keyspace %q: it has shards 0 to 1", ErrUnknownShard, "orders"), codes.NotFound},
		{errors.New(`keyspace "orders" is not held by site s1`), codes.InvalidArgument},
	} {
		g := NewGeo(GeoDeps{Site: "s1", Chain: fakeChain{c.err}}, nil)
		err := g.Repair(&adminv1.RepairRequest{Keyspace: "nope"}, repairStream{})
		if got := status.Code(err); got != c.want {
			t.Errorf("Repair failing with %v: %v, want %v", c.err, err, c.want)
		}
	}
}
