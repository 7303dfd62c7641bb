package clienttest

import (
	"context"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
)

// Site and NodeID are what the fake reports as its site and node.
const (
	Site   = "test"
	NodeID = "fake"
)

// DefaultScanPage is the fake's page size for scans with no limit.
const DefaultScanPage = 10

// Server is a running fake node. Its methods are safe for concurrent use.
type Server struct {
	kvv1.UnimplementedKVServer
	adminv1.UnimplementedAdminServer

	addr string

	mu struct {
		sync.Mutex
		keyspaces map[string]bool
		data      map[string][]*kvv1.VersionedValue // FloorKey -> versions, newest first
		applied   map[string]*kvv1.Version          // request id -> outcome
		hlc       uint64
		fail      []codes.Code
		failData  []codes.Code
		lose      int
		block     bool
		blockFrom int // data calls numbered from it block (0: none)
		calls     int
		dataCalls int // calls with a request header (not admin calls)
		putIDs    []*kvv1.RequestID
		sessions  [][]byte

		// The site reported by Members, Shards and Drain; nil members or
		// shards mean the default (see SetMembers and SetShards).
		members   []*adminv1.Member
		shards    []*adminv1.ShardInfo
		epoch     uint64
		drainStep uint32
		drains    []*adminv1.DrainRequest
		recovers  []*adminv1.RecoverShardRequest
	}
}

// Start runs a fake node with the keyspace "default" on 127.0.0.1 until the
// test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{}
	s.mu.keyspaces = map[string]bool{"default": true}
	s.mu.data = map[string][]*kvv1.VersionedValue{}
	s.mu.applied = map[string]*kvv1.Version{}
	s.mu.hlc = causal.MakeHLC(1_700_000_000_000, 0)
	s.mu.epoch = 1
	s.mu.drainStep = 1
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.addr = lis.Addr().String()
	gs := grpc.NewServer()
	kvv1.RegisterKVServer(gs, s)
	adminv1.RegisterAdminServer(gs, s)
	go func() { _ = gs.Serve(lis) }()
	tb.Cleanup(gs.Stop)
	return s
}

// DeadAddr returns a loopback address nobody listens on.
func DeadAddr(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// SilentAddr returns a loopback address that takes connections and
// answers nothing, as a node stopped with SIGSTOP does: the kernel
// completes each TCP handshake, but nobody accepts the connection, so a
// gRPC connection to it never gets ready. It stops listening when the
// test ends.
func SilentAddr(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { lis.Close() })
	return lis.Addr().String()
}

// Addr returns the fake's client address.
func (s *Server) Addr() string { return s.addr }

// AddKeyspace makes keyspace ks known; requests naming an unknown keyspace
// fail with NotFound.
func (s *Server) AddKeyspace(ks string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.keyspaces[ks] = true
}

// FailNext makes the next calls (of any method) fail with these codes, one
// per call.
func (s *Server) FailNext(cs ...codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.fail = append(s.mu.fail, cs...)
}

// FailNextData is FailNext for data calls only (those with a request
// header): admin calls, such as a route-table refresh still in flight from
// an earlier client, leave them for the data call they are meant for.
func (s *Server) FailNextData(cs ...codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.failData = append(s.mu.failData, cs...)
}

// LoseReplies makes the next n applied mutations answer Unavailable, as if
// their replies were lost.
func (s *Server) LoseReplies(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.lose = n
}

// Block makes calls wait until their context ends (on) or answer (off).
func (s *Server) Block(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.block = on
}

// BlockFrom makes the nth data call from now, and every later one, wait
// until its context ends (n = 1: the next data call). Admin calls (which
// the client makes in the background) neither count nor block.
func (s *Server) BlockFrom(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.blockFrom = s.mu.dataCalls + n
}

// Calls returns the number of calls received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.calls
}

// Sessions returns the session tokens of the data requests received, in
// order.
func (s *Server) Sessions() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.mu.sessions...)
}

// PutRequestIDs returns the request ids of every Put attempt received.
func (s *Server) PutRequestIDs() []*kvv1.RequestID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*kvv1.RequestID, len(s.mu.putIDs))
	for i, id := range s.mu.putIDs {
		out[i] = proto.Clone(id).(*kvv1.RequestID)
	}
	return out
}

// Versions returns the stored versions of key in keyspace, newest first.
func (s *Server) Versions(keyspace, key string) []*kvv1.VersionedValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.mu.data[causal.FloorKey(keyspace, []byte(key))]
	out := make([]*kvv1.VersionedValue, len(vs))
	for i, v := range vs {
		out[i] = proto.Clone(v).(*kvv1.VersionedValue)
	}
	return out
}

// enterLocked records a call and returns its injected or validation
// failure, if any. h is nil for admin calls. REQUIRES: s.mu.
func (s *Server) enterLocked(ctx context.Context, h *kvv1.RequestHeader) error {
	s.mu.calls++
	if h != nil {
		s.mu.dataCalls++
		s.mu.sessions = append(s.mu.sessions, h.GetSession())
	}
	if s.mu.block || (h != nil && s.mu.blockFrom > 0 && s.mu.dataCalls >= s.mu.blockFrom) {
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return status.FromContextError(ctx.Err()).Err()
	}
	if len(s.mu.fail) > 0 {
		c := s.mu.fail[0]
		s.mu.fail = s.mu.fail[1:]
		return status.Errorf(c, "injected %v", c)
	}
	if h != nil && len(s.mu.failData) > 0 {
		c := s.mu.failData[0]
		s.mu.failData = s.mu.failData[1:]
		return status.Errorf(c, "injected %v", c)
	}
	if h != nil {
		if _, err := causal.DecodeSession(h.GetSession()); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if ks := keyspaceOf(h); !s.mu.keyspaces[ks] {
			return status.Errorf(codes.NotFound, "unknown keyspace %q", ks)
		}
	}
	return nil
}

func keyspaceOf(h *kvv1.RequestHeader) string {
	if h.GetKeyspace() == "" {
		return "default"
	}
	return h.GetKeyspace()
}

func checkKey(key []byte) error {
	if len(key) == 0 {
		return status.Error(codes.InvalidArgument, "empty key")
	}
	return nil
}

// reply returns a response header whose session observed v of key.
func reply(h *kvv1.RequestHeader, key []byte, v *kvv1.Version) *kvv1.ResponseHeader {
	sess, _ := causal.DecodeSession(h.GetSession())
	if v != nil {
		sess.Observe(keyspaceOf(h), key, causal.Version{HLC: v.GetHlc(), Site: v.GetSite()})
	}
	return &kvv1.ResponseHeader{Session: sess.Encode(), Site: Site, NodeId: NodeID}
}

// outcomeLocked returns the outcome of an already applied mutation.
// REQUIRES: s.mu.
func (s *Server) outcomeLocked(id *kvv1.RequestID) (*kvv1.Version, bool) {
	if id == nil {
		return nil, false
	}
	v, ok := s.mu.applied[id.String()]
	return v, ok
}

// writeLocked applies a mutation and returns its version and whether its
// reply is to be lost. REQUIRES: s.mu.
func (s *Server) writeLocked(h *kvv1.RequestHeader, key, value []byte, tomb bool, id *kvv1.RequestID) (*kvv1.Version, error) {
	s.mu.hlc++
	v := &kvv1.Version{Hlc: s.mu.hlc, Site: Site}
	fk := causal.FloorKey(keyspaceOf(h), key)
	s.mu.data[fk] = append([]*kvv1.VersionedValue{{Version: v, Value: value, Tombstone: tomb}}, s.mu.data[fk]...)
	if id != nil {
		s.mu.applied[id.String()] = v
	}
	if s.mu.lose > 0 {
		s.mu.lose--
		return nil, status.Error(codes.Unavailable, "reply lost")
	}
	return v, nil
}

// newestLocked returns the newest version of key. REQUIRES: s.mu.
func (s *Server) newestLocked(h *kvv1.RequestHeader, key []byte) *kvv1.VersionedValue {
	if vs := s.mu.data[causal.FloorKey(keyspaceOf(h), key)]; len(vs) > 0 {
		return vs[0]
	}
	return nil
}

// Put implements kvv1.KVServer.
func (s *Server) Put(ctx context.Context, r *kvv1.PutRequest) (*kvv1.PutResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.putIDs = append(s.mu.putIDs, r.GetOptions().GetRequestId())
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	v, ok := s.outcomeLocked(r.GetOptions().GetRequestId())
	if !ok {
		var err error
		if v, err = s.writeLocked(r.GetHeader(), r.GetKey(), r.GetValue(), false, r.GetOptions().GetRequestId()); err != nil {
			return nil, err
		}
	}
	return &kvv1.PutResponse{Header: reply(r.GetHeader(), r.GetKey(), v), Version: v}, nil
}

// Get implements kvv1.KVServer.
func (s *Server) Get(ctx context.Context, r *kvv1.GetRequest) (*kvv1.GetResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	resp := &kvv1.GetResponse{}
	if n := s.newestLocked(r.GetHeader(), r.GetKey()); n != nil {
		resp.Version, resp.Found, resp.Value = n.GetVersion(), !n.GetTombstone(), n.GetValue()
	}
	resp.Header = reply(r.GetHeader(), r.GetKey(), resp.Version)
	return resp, nil
}

// Delete implements kvv1.KVServer.
func (s *Server) Delete(ctx context.Context, r *kvv1.DeleteRequest) (*kvv1.DeleteResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	n := s.newestLocked(r.GetHeader(), r.GetKey())
	existed := n != nil && !n.GetTombstone()
	v, ok := s.outcomeLocked(r.GetOptions().GetRequestId())
	if !ok {
		var err error
		if v, err = s.writeLocked(r.GetHeader(), r.GetKey(), nil, true, r.GetOptions().GetRequestId()); err != nil {
			return nil, err
		}
	}
	return &kvv1.DeleteResponse{Header: reply(r.GetHeader(), r.GetKey(), v), Version: v, Existed: existed}, nil
}

// BatchGet implements kvv1.KVServer.
func (s *Server) BatchGet(ctx context.Context, r *kvv1.BatchGetRequest) (*kvv1.BatchGetResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	resp := &kvv1.BatchGetResponse{Header: reply(r.GetHeader(), nil, nil)}
	for _, k := range r.GetKeys() {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		kv := &kvv1.KeyValue{Key: k}
		if n := s.newestLocked(r.GetHeader(), k); n != nil {
			kv.Version, kv.Found, kv.Value = n.GetVersion(), !n.GetTombstone(), n.GetValue()
		}
		resp.Items = append(resp.Items, kv)
	}
	return resp, nil
}

// Scan implements kvv1.KVServer. Pages hold DefaultScanPage items unless
// the request sets a limit; the continuation is the last key returned.
func (s *Server) Scan(ctx context.Context, r *kvv1.ScanRequest) (*kvv1.ScanResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	if len(r.GetPrefix()) > 0 && (len(r.GetStart()) > 0 || len(r.GetEnd()) > 0) {
		return nil, status.Error(codes.InvalidArgument, "prefix excludes start and end")
	}
	limit := int(r.GetLimit())
	if limit == 0 {
		limit = DefaultScanPage
	}
	ksPrefix := causal.FloorKey(keyspaceOf(r.GetHeader()), nil)
	var keys []string
	for fk, vs := range s.mu.data {
		k, ok := strings.CutPrefix(fk, ksPrefix)
		if !ok || vs[0].GetTombstone() || !strings.HasPrefix(k, string(r.GetPrefix())) {
			continue
		}
		if k < string(r.GetStart()) || (len(r.GetEnd()) > 0 && k >= string(r.GetEnd())) {
			continue
		}
		if len(r.GetContinuation()) > 0 && k <= string(r.GetContinuation()) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	resp := &kvv1.ScanResponse{Header: reply(r.GetHeader(), nil, nil)}
	for i, k := range keys {
		if i == limit {
			resp.Continuation = []byte(keys[i-1])
			break
		}
		n := s.mu.data[ksPrefix+k][0]
		kv := &kvv1.KeyValue{Key: []byte(k), Found: true, Version: n.GetVersion()}
		if !r.GetKeysOnly() {
			kv.Value = n.GetValue()
		}
		resp.Items = append(resp.Items, kv)
	}
	return resp, nil
}

// CompareAndSwap implements kvv1.KVServer.
func (s *Server) CompareAndSwap(ctx context.Context, r *kvv1.CompareAndSwapRequest) (*kvv1.CompareAndSwapResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	if v, ok := s.outcomeLocked(r.GetOptions().GetRequestId()); ok {
		// A retry of an applied swap gets the first outcome.
		return &kvv1.CompareAndSwapResponse{Header: reply(r.GetHeader(), r.GetKey(), v), Version: v}, nil
	}
	n := s.newestLocked(r.GetHeader(), r.GetKey())
	found := n != nil && !n.GetTombstone()
	conflict := func(c codes.Code) error {
		st, err := status.New(c, "compare-and-swap failed").WithDetails(&kvv1.CasConflict{Found: found, Current: n.GetVersion()})
		if err != nil {
			return err
		}
		return st.Err()
	}
	switch e := r.GetExpect().(type) {
	case *kvv1.CompareAndSwapRequest_ExpectAbsent:
		if found {
			return nil, conflict(codes.AlreadyExists)
		}
	case *kvv1.CompareAndSwapRequest_ExpectedVersion:
		if !found {
			return nil, conflict(codes.NotFound)
		}
		if !proto.Equal(e.ExpectedVersion, n.GetVersion()) {
			return nil, conflict(codes.FailedPrecondition)
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "no expectation")
	}
	v, err := s.writeLocked(r.GetHeader(), r.GetKey(), r.GetValue(), r.GetDelete(), r.GetOptions().GetRequestId())
	if err != nil {
		return nil, err
	}
	return &kvv1.CompareAndSwapResponse{Header: reply(r.GetHeader(), r.GetKey(), v), Version: v}, nil
}

// History implements kvv1.KVServer.
func (s *Server) History(ctx context.Context, r *kvv1.HistoryRequest) (*kvv1.HistoryResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	vs := s.mu.data[causal.FloorKey(keyspaceOf(r.GetHeader()), r.GetKey())]
	limit := int(r.GetLimit())
	if limit == 0 {
		limit = 10
	}
	vs = vs[:min(limit, len(vs))]
	var newest *kvv1.Version
	if len(vs) > 0 {
		newest = vs[0].GetVersion()
	}
	return &kvv1.HistoryResponse{Header: reply(r.GetHeader(), r.GetKey(), newest), Versions: vs}, nil
}

// Status implements adminv1.AdminServer: one shard of each keyspace, led
// by the fake.
func (s *Server) Status(ctx context.Context, _ *adminv1.StatusRequest) (*adminv1.StatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, nil); err != nil {
		return nil, err
	}
	resp := &adminv1.StatusResponse{Site: Site, NodeId: NodeID, Version: "fake", ClientAddr: s.addr}
	for ks := range s.mu.keyspaces {
		resp.Keyspaces = append(resp.Keyspaces, ks)
	}
	sort.Strings(resp.Keyspaces)
	for _, ks := range resp.Keyspaces {
		resp.Shards = append(resp.Shards, &adminv1.ShardStatus{Keyspace: ks, State: "Leader", Leader: NodeID, Term: 1,
			CommitIndex: s.mu.hlc & 0xffff, AppliedIndex: s.mu.hlc & 0xffff})
	}
	return resp, nil
}

// Snapshot implements adminv1.AdminServer: one snapshot per keyspace.
func (s *Server) Snapshot(ctx context.Context, r *adminv1.SnapshotRequest) (*adminv1.SnapshotResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, nil); err != nil {
		return nil, err
	}
	if r.GetKeyspace() == "" {
		return &adminv1.SnapshotResponse{Snapshots: uint32(len(s.mu.keyspaces))}, nil
	}
	if !s.mu.keyspaces[r.GetKeyspace()] {
		return nil, status.Errorf(codes.NotFound, "unknown keyspace %q", r.GetKeyspace())
	}
	return &adminv1.SnapshotResponse{Snapshots: 1}, nil
}

// SetMembers replaces the nodes the fake reports as its site (through
// Members) and that Drain accepts. Until it is called the site is the fake
// alone, alive, with one replica per keyspace. The catalog leader reported
// is the first member.
func (s *Server) SetMembers(ms ...*adminv1.Member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.members = make([]*adminv1.Member, len(ms))
	for i, m := range ms {
		s.mu.members[i] = proto.Clone(m).(*adminv1.Member)
	}
}

// SiteMembers returns the members as the fake currently sees them
// (draining flags and replica counts included).
func (s *Server) SiteMembers() []*adminv1.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.membersLocked()
	out := make([]*adminv1.Member, len(ms))
	for i, m := range ms {
		out[i] = proto.Clone(m).(*adminv1.Member)
	}
	return out
}

// SetShards replaces the shards the fake reports through Shards (and
// RecoverShard recovers). Until it is called there is one shard per
// keyspace with one voting replica on the fake, which leads it. Draining
// does not change the shards reported.
func (s *Server) SetShards(shards ...*adminv1.ShardInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.shards = make([]*adminv1.ShardInfo, len(shards))
	for i, sh := range shards {
		s.mu.shards[i] = proto.Clone(sh).(*adminv1.ShardInfo)
	}
}

// SetDrainStep sets how many replicas each Members call moves off every
// draining member (1 unless set; 0 makes draining never progress).
func (s *Server) SetDrainStep(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.drainStep = uint32(max(n, 0))
}

// PlacementEpoch returns the placement epoch the fake reports; it starts
// at 1 and every Drain call increments it.
func (s *Server) PlacementEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.epoch
}

// Drains returns the Drain requests received, in order.
func (s *Server) Drains() []*adminv1.DrainRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*adminv1.DrainRequest, len(s.mu.drains))
	for i, r := range s.mu.drains {
		out[i] = proto.Clone(r).(*adminv1.DrainRequest)
	}
	return out
}

// membersLocked returns the site's members, materialising the default
// site on first use. REQUIRES: s.mu.
func (s *Server) membersLocked() []*adminv1.Member {
	if s.mu.members == nil {
		s.mu.members = []*adminv1.Member{{
			Site: Site, NodeId: NodeID, State: "alive", ClientAddr: s.addr,
			Replicas: uint32(len(s.mu.keyspaces)),
		}}
	}
	return s.mu.members
}

// Members implements adminv1.AdminServer. Every call first moves the
// drain step's worth of replicas off each draining member.
func (s *Server) Members(ctx context.Context, _ *adminv1.MembersRequest) (*adminv1.MembersResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, nil); err != nil {
		return nil, err
	}
	ms := s.membersLocked()
	resp := &adminv1.MembersResponse{PlacementEpoch: s.mu.epoch}
	for _, m := range ms {
		if m.Draining {
			m.Replicas -= min(m.Replicas, s.mu.drainStep)
		}
		resp.Members = append(resp.Members, proto.Clone(m).(*adminv1.Member))
	}
	if len(ms) > 0 {
		resp.CatalogLeader = ms[0].NodeId
	}
	return resp, nil
}

// Shards implements adminv1.AdminServer.
func (s *Server) Shards(ctx context.Context, r *adminv1.ShardsRequest) (*adminv1.ShardsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, nil); err != nil {
		return nil, err
	}
	if ks := r.GetKeyspace(); ks != "" && !s.mu.keyspaces[ks] {
		return nil, status.Errorf(codes.NotFound, "unknown keyspace %q", ks)
	}
	shards := s.mu.shards
	if shards == nil {
		var kss []string
		for ks := range s.mu.keyspaces {
			kss = append(kss, ks)
		}
		sort.Strings(kss)
		for _, ks := range kss {
			idx := s.mu.hlc & 0xffff
			shards = append(shards, &adminv1.ShardInfo{Keyspace: ks, Leader: NodeID, Replicas: []*adminv1.ShardReplica{
				{NodeId: NodeID, Voter: true, State: "Leader", CommitIndex: idx, AppliedIndex: idx},
			}})
		}
	}
	resp := &adminv1.ShardsResponse{PlacementEpoch: s.mu.epoch}
	for _, sh := range shards {
		if r.GetKeyspace() == "" || sh.GetKeyspace() == r.GetKeyspace() {
			resp.Shards = append(resp.Shards, proto.Clone(sh).(*adminv1.ShardInfo))
		}
	}
	return resp, nil
}

// Drain implements adminv1.AdminServer: it sets the member's draining
// flag (clears it with undo) and increments the placement epoch. Replicas
// then leave the member as Members is called (see SetDrainStep).
func (s *Server) Drain(ctx context.Context, r *adminv1.DrainRequest) (*adminv1.DrainResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, nil); err != nil {
		return nil, err
	}
	s.mu.drains = append(s.mu.drains, proto.Clone(r).(*adminv1.DrainRequest))
	if r.GetNodeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "node_id is required")
	}
	for _, m := range s.membersLocked() {
		if m.NodeId == r.GetNodeId() {
			m.Draining = !r.GetUndo()
			s.mu.epoch++
			return &adminv1.DrainResponse{PlacementEpoch: s.mu.epoch}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "unknown node %q", r.GetNodeId())
}

// RecoverRequests returns the RecoverShard requests received, in order.
func (s *Server) RecoverRequests() []*adminv1.RecoverShardRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*adminv1.RecoverShardRequest, len(s.mu.recovers))
	for i, r := range s.mu.recovers {
		out[i] = proto.Clone(r).(*adminv1.RecoverShardRequest)
	}
	return out
}

// RecoverShard implements adminv1.AdminServer over the shards of
// SetShards and the members of SetMembers: a shard that has a leader is
// refused (nothing to recover), and so is a node that holds no replica of
// it or is not alive. The report takes each replica's state and indexes
// from the shard's ShardReplica (the commit index as the last index, the
// term 1) and its liveness from the members. A forced recovery leaves the
// node the shard's only replica, as its leader, and increments the
// placement epoch.
func (s *Server) RecoverShard(ctx context.Context, r *adminv1.RecoverShardRequest) (*adminv1.RecoverShardResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(ctx, nil); err != nil {
		return nil, err
	}
	s.mu.recovers = append(s.mu.recovers, proto.Clone(r).(*adminv1.RecoverShardRequest))
	switch {
	case r.GetKeyspace() == "":
		return nil, status.Error(codes.InvalidArgument, "keyspace is required")
	case !s.mu.keyspaces[r.GetKeyspace()]:
		return nil, status.Errorf(codes.NotFound, "unknown keyspace %q", r.GetKeyspace())
	case r.GetNodeId() == "":
		return nil, status.Error(codes.InvalidArgument, "node_id is required")
	}
	var sh *adminv1.ShardInfo
	for _, x := range s.mu.shards {
		if x.GetKeyspace() == r.GetKeyspace() && x.GetShard() == r.GetShard() {
			sh = x
		}
	}
	if sh == nil {
		return nil, status.Errorf(codes.NotFound, "unknown shard %s/%d", r.GetKeyspace(), r.GetShard())
	}
	if sh.GetLeader() != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "nothing to recover: %s/%d has a leader, %s", r.GetKeyspace(), r.GetShard(), sh.GetLeader())
	}
	alive := map[string]string{}
	for _, m := range s.membersLocked() {
		alive[m.GetNodeId()] = m.GetState()
	}
	resp := &adminv1.RecoverShardResponse{Keyspace: r.GetKeyspace(), Shard: r.GetShard(), NodeId: r.GetNodeId(), Generation: 1}
	found := false
	for _, rep := range sh.GetReplicas() {
		rr := &adminv1.RecoveryReplica{
			NodeId: rep.GetNodeId(), Voter: rep.GetVoter(), Alive: alive[rep.GetNodeId()] == "alive", MemberState: alive[rep.GetNodeId()],
			State: rep.GetState(), LastIndex: rep.GetCommitIndex(), CommitIndex: rep.GetCommitIndex(), AppliedIndex: rep.GetAppliedIndex(),
		}
		if rr.MemberState == "" {
			rr.MemberState = "unknown"
		}
		if rr.LastIndex > 0 {
			rr.Term, rr.LastLogTerm = 1, 1
		}
		if rep.GetVoter() {
			resp.Voters = append(resp.Voters, rep.GetNodeId())
		}
		if rep.GetNodeId() == r.GetNodeId() {
			found = true
			resp.Replicas = append([]*adminv1.RecoveryReplica{rr}, resp.Replicas...)
			if !rr.Alive {
				return nil, status.Errorf(codes.FailedPrecondition, "%s is not alive", r.GetNodeId())
			}
			continue
		}
		resp.Lost = append(resp.Lost, rep.GetNodeId())
		resp.Replicas = append(resp.Replicas, rr)
	}
	if !found {
		return nil, status.Errorf(codes.FailedPrecondition, "%s holds no replica of %s/%d", r.GetNodeId(), r.GetKeyspace(), r.GetShard())
	}
	resp.PlacementEpoch = s.mu.epoch
	if r.GetForce() {
		s.mu.epoch++
		sh.Leader = r.GetNodeId()
		sh.Replicas = []*adminv1.ShardReplica{{NodeId: r.GetNodeId(), Voter: true, State: "Leader"}}
		resp.Recovered, resp.PlacementEpoch = true, s.mu.epoch
	}
	return resp, nil
}
