package cluster

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// Service serves the peer Cluster service of a node: joins and changes
// are carried out by the leader (forwarded there), Config answers from the
// node's copy.
type Service struct {
	peerv1.UnimplementedClusterServer
	c *Cluster
}

// NewService returns the peer Cluster service of c.
func NewService(c *Cluster) *Service { return &Service{c: c} }

// Join implements peerv1.ClusterServer.
func (s *Service) Join(ctx context.Context, req *peerv1.ClusterJoinRequest) (*peerv1.ClusterJoinResponse, error) {
	n := Node{ID: req.NodeId, Site: req.Site, PeerAddr: req.PeerAddr, ClientAddr: req.ClientAddr, GossipAddr: req.GossipAddr}
	cfg, err := s.c.HandleJoin(ctx, n, req.SiteIncarnation)
	if err != nil {
		return nil, toStatus(err)
	}
	b, err := EncodeConfig(cfg)
	if err != nil {
		return nil, err
	}
	id, addr := s.c.Leader()
	return &peerv1.ClusterJoinResponse{LeaderId: id, LeaderAddr: addr, Config: b}, nil
}

// Apply implements peerv1.ClusterServer. A refusal is an answer, not an
// RPC error.
func (s *Service) Apply(ctx context.Context, req *peerv1.ClusterApplyRequest) (*peerv1.ClusterApplyResponse, error) {
	cfg, err := s.c.Apply(ctx, req.Command)
	if err != nil {
		if kind := ErrorKind(err); kind != "" {
			return &peerv1.ClusterApplyResponse{Error: err.Error(), ErrorKind: kind}, nil
		}
		return nil, toStatus(err)
	}
	b, err := EncodeConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &peerv1.ClusterApplyResponse{Config: b}, nil
}

// Config implements peerv1.ClusterServer.
func (s *Service) Config(context.Context, *peerv1.ClusterConfigRequest) (*peerv1.ClusterConfigResponse, error) {
	cfg, _ := s.c.Config()
	b, err := EncodeConfig(cfg)
	if err != nil {
		return nil, err
	}
	id, _ := s.c.Leader()
	return &peerv1.ClusterConfigResponse{Config: b, LeaderId: id}, nil
}

func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, ErrNoLeader):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrUnknownCommand):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
