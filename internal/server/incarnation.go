package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/membership"
)

// initIncarnation sets the node's site incarnation before any raft group
// opens (docs/adr/029): the one raft.db records; a new one, recorded
// first, for a node that bootstraps a new site (a new data directory and
// no --join); otherwise none yet, and the node adopts, and records, the
// first one a request of the site's groups carries. Raft traffic of the
// site's groups between nodes of different incarnations is refused
// (transport, incarnation.go): a node that lost its data and was started
// again as the first node of a site bootstraps a new site, which must not
// mix its raft logs with the old one's, whose members still send to its
// address.
func (s *Server) initIncarnation(fresh bool) error {
	v, err := s.logDB.SiteIncarnation()
	if err != nil {
		return fmt.Errorf("site incarnation: %w", err)
	}
	if v == 0 && fresh && len(s.cfg.Join) == 0 {
		if v, err = newIncarnation(); err != nil {
			return err
		}
		if err := s.logDB.SetSiteIncarnation(v); err != nil {
			return fmt.Errorf("site incarnation: %w", err)
		}
		s.log.Info("bootstrapping a new site: no data directory and no --join", "incarnation", fmt.Sprintf("%016x", v))
	}
	if v != 0 {
		s.network.SetIncarnation(v)
		s.announceIncarnation(v)
		return nil
	}
	s.network.OnIncarnation(func(v uint64) error {
		if err := s.logDB.SetSiteIncarnation(v); err != nil {
			return err
		}
		go s.announceIncarnation(v)
		return nil
	})
	return nil
}

// announceIncarnation puts the node's site incarnation into its gossip
// meta: the nodes of another incarnation of the site take it for a node
// that is not alive (siteMembers).
func (s *Server) announceIncarnation(v uint64) {
	s.updateMeta("the site incarnation", func(m *membership.Meta) { m.Incarnation = v })
}

// updateMeta changes the node's gossip meta with f and announces it; what
// names the change in a failure's warning. Changes are applied one at a
// time, each to the meta the last one left.
func (s *Server) updateMeta(what string, f func(*membership.Meta)) {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	meta := s.members.Local().Meta
	// Replicas travels only with an Incarnation: the meta gossip decoded
	// before this node had one lacks it.
	meta.Replicas = uint8(s.cfg.Replicas)
	f(&meta)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.members.UpdateMeta(ctx, meta); err != nil && !errors.Is(err, membership.ErrClosed) {
		s.log.Warn("announcing "+what+" in gossip", "err", err)
	}
}

// newIncarnation draws a random, non-zero site incarnation.
func newIncarnation() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("site incarnation: %w", err)
		}
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v, nil
		}
	}
}

// Metadata of every call a node makes to another through its pool
// (forwarded requests, peer RPCs, geo shipping): its site and site
// incarnation. A node refuses a call of its own site from another
// incarnation (incarnationUnary, incarnationStream).
const (
	mdSite        = "causeway-site"
	mdIncarnation = "causeway-incarnation"
)

// incarnationCtx adds the node's site and incarnation to an outgoing
// call's metadata.
func (s *Server) incarnationCtx(ctx context.Context) context.Context {
	v := s.network.Incarnation()
	if v == 0 {
		return metadata.AppendToOutgoingContext(ctx, mdSite, s.cfg.Site)
	}
	return metadata.AppendToOutgoingContext(ctx, mdSite, s.cfg.Site, mdIncarnation, strconv.FormatUint(v, 16))
}

// stampUnary and stampStream are the pool's client interceptors.
func (s *Server) stampUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(s.incarnationCtx(ctx), method, req, reply, cc, opts...)
}

func (s *Server) stampStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(s.incarnationCtx(ctx), desc, cc, method, opts...)
}

// checkIncarnation refuses a call from a node of this site whose
// incarnation is not this node's (guard site-incarnation): a request
// forwarded by, or a peer RPC of, the old site to a node that lost its
// data and bootstrapped a new one at its address (or the reverse). The
// refusal is Unavailable: for the caller that node is not a member of its
// site, and a forwarded request is retried elsewhere.
func (s *Server) checkIncarnation(ctx context.Context) error {
	if guards.Off(guards.SiteIncarnation) {
		return nil
	}
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil
	}
	site, inc := md.Get(mdSite), md.Get(mdIncarnation)
	if len(site) == 0 || site[0] != s.cfg.Site || len(inc) == 0 {
		return nil
	}
	theirs, err := strconv.ParseUint(inc[0], 16, 64)
	local := s.network.Incarnation()
	if err != nil || local == 0 || theirs == local {
		return nil
	}
	s.network.CountIncarnationRefusal()
	return status.Error(codes.Unavailable, fmt.Sprintf("this node of site %s belongs to another incarnation of the site (%016x, the caller's %016x): "+
		"one of the two lost its data and bootstrapped a new site; see \"A damaged data directory\" in docs/operations.md", s.cfg.Site, local, theirs))
}

// incarnationUnary and incarnationStream are the server interceptors of
// the peer and client APIs.
func (s *Server) incarnationUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.checkIncarnation(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) incarnationStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.checkIncarnation(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}
