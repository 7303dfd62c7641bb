package peer

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// errBadDigest: another node answered ReplicaDigest with a digest this
// build cannot read.
var errBadDigest = errors.New("peer: malformed replica digest")

// ReplicaDigest implements peerv1.NodeServer. A node that does not host
// the shard will never have a digest of it: it answers STATE_UNKNOWN.
func (s *Service) ReplicaDigest(ctx context.Context, req *peerv1.ReplicaDigestRequest) (*peerv1.ReplicaDigestResponse, error) {
	sh, err := shardOf(req.Shard)
	if err != nil {
		return nil, err
	}
	g := s.local.Group(sh)
	if g == nil {
		return &peerv1.ReplicaDigestResponse{State: peerv1.ReplicaDigestResponse_STATE_UNKNOWN}, nil
	}
	d, st := g.ReplicaDigest(req.Index)
	switch st {
	case shard.DigestReady:
		return &peerv1.ReplicaDigestResponse{State: peerv1.ReplicaDigestResponse_STATE_READY, Digest: digestPB(d)}, nil
	case shard.DigestPending:
		return &peerv1.ReplicaDigestResponse{State: peerv1.ReplicaDigestResponse_STATE_PENDING}, nil
	}
	return &peerv1.ReplicaDigestResponse{State: peerv1.ReplicaDigestResponse_STATE_UNKNOWN}, nil
}

// CheckReplicas implements peerv1.NodeServer: the receiving node must lead
// the shard.
func (s *Service) CheckReplicas(ctx context.Context, req *peerv1.CheckReplicasRequest) (*peerv1.CheckReplicasResponse, error) {
	g, err := s.group(req.Shard)
	if err != nil {
		return nil, err
	}
	if err := g.RequestCheck(); errors.Is(err, shard.ErrNotLeader) {
		return nil, toStatus(fmt.Errorf("%w: %s is led by %q", ErrNotLeader, g.ID(), g.Leader()))
	} else if err != nil {
		return nil, toStatus(unavailable(err))
	}
	return &peerv1.CheckReplicasResponse{}, nil
}

// Digests implements shard.Peers over the Node service.
type Digests struct {
	Pool *Pool
}

var _ shard.Peers = Digests{}

func shardRef(id storage.ShardID) *peerv1.ShardRef {
	return &peerv1.ShardRef{Keyspace: id.Keyspace, Shard: id.Shard}
}

// ReplicaDigest implements shard.Peers. A node of an earlier release has
// no digests: DigestUnknown.
func (x Digests) ReplicaDigest(ctx context.Context, addr string, id storage.ShardID, index uint64) (storage.Digest, shard.DigestState, error) {
	c, err := x.Pool.Node(addr)
	if err != nil {
		return storage.Digest{}, 0, err
	}
	resp, err := c.ReplicaDigest(ctx, &peerv1.ReplicaDigestRequest{Shard: shardRef(id), Index: index})
	if status.Code(err) == codes.Unimplemented {
		return storage.Digest{}, shard.DigestUnknown, nil // a node of an earlier release
	}
	if err != nil {
		return storage.Digest{}, 0, err
	}
	switch resp.State {
	case peerv1.ReplicaDigestResponse_STATE_READY:
		d, err := digestOf(resp.Digest)
		if err != nil {
			return storage.Digest{}, 0, fmt.Errorf("replica digest of %s at %d from %s: %w", id, index, addr, err)
		}
		return d, shard.DigestReady, nil
	case peerv1.ReplicaDigestResponse_STATE_PENDING:
		return storage.Digest{}, shard.DigestPending, nil
	case peerv1.ReplicaDigestResponse_STATE_UNKNOWN:
		return storage.Digest{}, shard.DigestUnknown, nil
	}
	return storage.Digest{}, 0, fmt.Errorf("%w: state %v", errBadDigest, resp.State)
}

// CheckReplicas implements shard.Peers. A leader of an earlier release,
// which has no checks, is not asked again.
func (x Digests) CheckReplicas(ctx context.Context, addr string, id storage.ShardID) error {
	c, err := x.Pool.Node(addr)
	if err != nil {
		return err
	}
	_, err = c.CheckReplicas(ctx, &peerv1.CheckReplicasRequest{Shard: shardRef(id)})
	if status.Code(err) == codes.Unimplemented {
		return nil
	}
	return err
}

func digestPB(d storage.Digest) *peerv1.Digest {
	return &peerv1.Digest{Index: d.Index, MaxHlc: d.MaxHLC, Entries: d.Entries, Slots: d.Slots[:], Requests: d.Requests, Origins: d.Origins, Outbound: d.Outbound}
}

func digestOf(p *peerv1.Digest) (storage.Digest, error) {
	if p == nil || len(p.Slots) != storage.DigestSlots {
		return storage.Digest{}, fmt.Errorf("%w: want %d slots", errBadDigest, storage.DigestSlots)
	}
	d := storage.Digest{Index: p.Index, MaxHLC: p.MaxHlc, Entries: p.Entries, Requests: p.Requests, Origins: p.Origins, Outbound: p.Outbound}
	copy(d.Slots[:], p.Slots)
	return d, nil
}
