package rpc

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// DefaultKeyspace is used when a request names none.
const DefaultKeyspace = "default"

// Config configures the services.
type Config struct {
	// Site and NodeID identify this node in responses and versions.
	Site   string
	NodeID string
	// Limits bounds request sizes.
	Limits Limits
	// CausalWait is the longest a read waits for this node to catch up
	// with the session's floor before failing with a retryable error.
	CausalWait time.Duration
	// FollowerWait is how long a follower waits for a floor before it
	// forwards the read to the shard leader instead.
	FollowerWait time.Duration
	// LeaderWait is how long a request waits for a shard to elect a leader.
	LeaderWait time.Duration
}

// KV implements kvv1.KVServer.
type KV struct {
	kvv1.UnimplementedKVServer
	cfg     Config
	router  *router.Router
	pool    *peer.Pool
	clock   *causal.Clock
	log     *slog.Logger
	metrics *Metrics

	// Mutations that arrive without a request id get one from this node
	// (reqPrefix, reqSeq), so that retrying them inside the site (after a
	// leadership change, or on another node) applies them once.
	reqPrefix string
	reqSeq    atomic.Uint64
}

// NewKV returns the data service. pool reaches the other nodes of the site.
func NewKV(cfg Config, r *router.Router, pool *peer.Pool, clock *causal.Clock, logger *slog.Logger, m *Metrics) *KV {
	if cfg.FollowerWait <= 0 {
		cfg.FollowerWait = 100 * time.Millisecond
	}
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 5 * time.Second
	}
	var nonce [8]byte
	_, _ = crand.Read(nonce[:])
	return &KV{cfg: cfg, router: r, pool: pool, clock: clock, log: logger, metrics: m,
		reqPrefix: fmt.Sprintf("kvd/%s/%s/%x", cfg.Site, cfg.NodeID, nonce)}
}

// withRequestID returns o with a request id, assigning one of this node's
// when the client sent none.
func (s *KV) withRequestID(o *kvv1.WriteOptions) *kvv1.WriteOptions {
	if o != nil && o.RequestId != nil {
		return o
	}
	out := &kvv1.WriteOptions{}
	if o != nil {
		out.Durability, out.MinSites = o.Durability, o.MinSites
	}
	out.RequestId = &kvv1.RequestID{ClientId: s.reqPrefix, Seq: s.reqSeq.Add(1)}
	return out
}

// call is the per-request context: the keyspace, the session the request
// carried (only the floors this request needs), and what this request
// observed, which the reply returns for the client to merge.
type call struct {
	keyspace string
	session  *causal.Session
	observed causal.Session
}

// observe records that the request saw version v of key (in shard sh).
func (c *call) observe(sh placement.Shard, key []byte, v causal.Version) {
	c.session.ObserveShard(c.keyspace, key, sh.ID, v)
	c.observed.ObserveShard(c.keyspace, key, sh.ID, v)
}

// merge folds what a forwarded request observed into c.
func (c *call) merge(o *causal.Session) {
	c.session.Merge(o)
	c.observed.Merge(o)
}

func (s *KV) begin(h *kvv1.RequestHeader) (*call, error) {
	c := &call{keyspace: DefaultKeyspace, session: &causal.Session{}}
	if h == nil {
		return c, nil
	}
	if h.Keyspace != "" {
		c.keyspace = h.Keyspace
	}
	sess, err := causal.DecodeSession(h.Session)
	if err != nil {
		return nil, err
	}
	c.session = sess
	return c, nil
}

// respHeader returns the reply header. For a request that carried a
// partial session (the floors it needed, as the Go client sends), the
// token carries only what this request observed: the versions it read or
// wrote, with their shards, and their largest HLC, for the client to
// merge. Otherwise it carries the whole session updated with them.
func (s *KV) respHeader(c *call) *kvv1.ResponseHeader {
	tok := c.observed.Encode()
	if !c.session.Partial {
		tok = c.session.Encode()
	}
	return &kvv1.ResponseHeader{Session: tok, Site: s.cfg.Site, NodeId: s.cfg.NodeID}
}

// Put implements kvv1.KVServer.
func (s *KV) Put(ctx context.Context, req *kvv1.PutRequest) (resp *kvv1.PutResponse, err error) {
	defer s.metrics.observe("put", time.Now(), &err)
	c, sh, err := s.prepareWrite(req.Header, req.Key, req.Options)
	req.Options = s.withRequestID(req.Options)
	if err == nil {
		err = s.cfg.Limits.Value(req.Value)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	var res causal.Version
	err = s.onLeader(ctx, sh, func(g *shard.Group) (err error) {
		res, err = s.write(ctx, c, sh, g, &peerv1.Write{Key: req.Key, Value: req.Value}, req.Options)
		return err
	}, func(kv kvv1.KVClient, fctx context.Context) (err error) {
		resp, err = kv.Put(fctx, req)
		return err
	})
	if err != nil || resp != nil {
		return resp, toStatus(err)
	}
	return &kvv1.PutResponse{Header: s.respHeader(c), Version: versionPB(res)}, nil
}

// Delete implements kvv1.KVServer.
func (s *KV) Delete(ctx context.Context, req *kvv1.DeleteRequest) (resp *kvv1.DeleteResponse, err error) {
	defer s.metrics.observe("delete", time.Now(), &err)
	c, sh, err := s.prepareWrite(req.Header, req.Key, req.Options)
	req.Options = s.withRequestID(req.Options)
	if err != nil {
		return nil, toStatus(err)
	}
	var existed bool
	var v causal.Version
	err = s.onLeader(ctx, sh, func(g *shard.Group) (err error) {
		v, err = s.writeExisted(ctx, c, sh, g, &peerv1.Write{Key: req.Key, Tombstone: true}, req.Options, &existed)
		return err
	}, func(kv kvv1.KVClient, fctx context.Context) (err error) {
		resp, err = kv.Delete(fctx, req)
		return err
	})
	if err != nil || resp != nil {
		return resp, toStatus(err)
	}
	return &kvv1.DeleteResponse{Header: s.respHeader(c), Version: versionPB(v), Existed: existed}, nil
}

// CompareAndSwap implements kvv1.KVServer.
func (s *KV) CompareAndSwap(ctx context.Context, req *kvv1.CompareAndSwapRequest) (resp *kvv1.CompareAndSwapResponse, err error) {
	defer s.metrics.observe("cas", time.Now(), &err)
	c, sh, err := s.prepareWrite(req.Header, req.Key, req.Options)
	req.Options = s.withRequestID(req.Options)
	if err == nil && !req.Delete {
		err = s.cfg.Limits.Value(req.Value)
	}
	w := &peerv1.Write{Key: req.Key, Value: req.Value, Tombstone: req.Delete}
	switch e := req.Expect.(type) {
	case *kvv1.CompareAndSwapRequest_ExpectedVersion:
		if e.ExpectedVersion == nil || e.ExpectedVersion.Hlc == 0 {
			err = errors.Join(err, fmt.Errorf("%w: expected_version must be a version returned by the server", ErrBadRequest))
		} else {
			w.Condition = &peerv1.Condition{Kind: peerv1.Condition_KIND_VERSION, Hlc: e.ExpectedVersion.Hlc, Site: e.ExpectedVersion.Site}
		}
	case *kvv1.CompareAndSwapRequest_ExpectAbsent:
		if !e.ExpectAbsent {
			err = errors.Join(err, fmt.Errorf("%w: expect_absent must be true when set", ErrBadRequest))
		}
		w.Condition = &peerv1.Condition{Kind: peerv1.Condition_KIND_ABSENT}
	default:
		err = errors.Join(err, fmt.Errorf("%w: compare-and-swap needs expected_version or expect_absent", ErrBadRequest))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	var v causal.Version
	err = s.onLeader(ctx, sh, func(g *shard.Group) (err error) {
		if err := s.casFailFast(g, c, sh, w); err != nil {
			return err
		}
		v, err = s.write(ctx, c, sh, g, w, req.Options)
		return err
	}, func(kv kvv1.KVClient, fctx context.Context) (err error) {
		resp, err = kv.CompareAndSwap(fctx, req)
		return err
	})
	if err != nil {
		var ce *condError
		if errors.As(err, &ce) {
			return nil, ce.status
		}
		return nil, toStatus(err)
	}
	if resp != nil {
		return resp, nil
	}
	return &kvv1.CompareAndSwapResponse{Header: s.respHeader(c), Version: versionPB(v)}, nil
}

// casFailFast rejects a version-conditioned swap without a raft round trip
// when this replica already holds a newer version than the expected one.
// Versions only grow, so the swap could never succeed; every other case is
// decided in the log.
func (s *KV) casFailFast(g *shard.Group, c *call, sh placement.Shard, w *peerv1.Write) error {
	if w.Condition.Kind != peerv1.Condition_KIND_VERSION {
		return nil
	}
	want := causal.Version{HLC: w.Condition.Hlc, Site: w.Condition.Site}
	var cur storage.Record
	var found bool
	if err := g.Read(func(st *storage.ShardTx) (err error) {
		cur, found, err = st.Latest(w.Key, true)
		return err
	}); err != nil || !found || !want.Less(cur.Version) {
		return nil
	}
	c.observe(sh, w.Key, cur.Version)
	return &condError{status: casStatus(fsm.Result{Err: fsm.ErrVersionMismatch, Current: cur.Version, CurrentFound: !cur.Tombstone})}
}

// prepareWrite validates a mutation and finds its shard.
func (s *KV) prepareWrite(h *kvv1.RequestHeader, key []byte, o *kvv1.WriteOptions) (*call, placement.Shard, error) {
	c, err := s.begin(h)
	if err != nil {
		return nil, placement.Shard{}, err
	}
	if err := s.cfg.Limits.Key(key); err != nil {
		return nil, placement.Shard{}, err
	}
	if err := s.cfg.Limits.WriteOptions(o, 1); err != nil {
		return nil, placement.Shard{}, err
	}
	sh, err := s.router.Shard(c.keyspace, key)
	return c, sh, err
}

type condError struct{ status error }

func (e *condError) Error() string { return e.status.Error() }

func (s *KV) write(ctx context.Context, c *call, sh placement.Shard, g *shard.Group, w *peerv1.Write, o *kvv1.WriteOptions) (causal.Version, error) {
	var existed bool
	return s.writeExisted(ctx, c, sh, g, w, o, &existed)
}

// writeExisted proposes one write. The clock first observes everything the
// session has seen, so the new version is newer than all of it (monotonic
// writes, writes-follow-reads).
func (s *KV) writeExisted(ctx context.Context, c *call, sh placement.Shard, g *shard.Group, w *peerv1.Write, o *kvv1.WriteOptions, existed *bool) (causal.Version, error) {
	s.clock.Observe(c.session.MaxHLC)
	w.Hlc = s.clock.Now()
	w.Site = s.cfg.Site
	if o != nil && o.RequestId != nil {
		w.ClientId, w.Seq = o.RequestId.ClientId, o.RequestId.Seq
	}
	res, err := g.Propose(ctx, &peerv1.Command{Op: &peerv1.Command_Write{Write: w}})
	if err != nil {
		return causal.Version{}, err
	}
	if res.Err != nil {
		if !res.Current.IsZero() {
			c.observe(sh, w.Key, res.Current)
		}
		return causal.Version{}, &condError{status: casStatus(res)}
	}
	c.observe(sh, w.Key, res.Version)
	*existed = res.Existed
	return res.Version, nil
}

// Get implements kvv1.KVServer.
func (s *KV) Get(ctx context.Context, req *kvv1.GetRequest) (resp *kvv1.GetResponse, err error) {
	defer s.metrics.observe("get", time.Now(), &err)
	c, err := s.begin(req.Header)
	if err == nil {
		err = errors.Join(s.cfg.Limits.Key(req.Key), Consistency(req.Consistency))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	item, err := s.get(ctx, c, req.Key, req.Consistency, false)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvv1.GetResponse{Header: s.respHeader(c), Found: item.Found, Value: item.Value, Version: item.Version}, nil
}

// BatchGet implements kvv1.KVServer.
func (s *KV) BatchGet(ctx context.Context, req *kvv1.BatchGetRequest) (resp *kvv1.BatchGetResponse, err error) {
	defer s.metrics.observe("batch_get", time.Now(), &err)
	c, err := s.begin(req.Header)
	if err == nil {
		err = Consistency(req.Consistency)
	}
	if err == nil && len(req.Keys) > s.cfg.Limits.MaxBatchKeys {
		err = fmt.Errorf("%w: %d keys exceeds the batch limit of %d", ErrBadRequest, len(req.Keys), s.cfg.Limits.MaxBatchKeys)
	}
	for i := 0; err == nil && i < len(req.Keys); i++ {
		if err = s.cfg.Limits.Key(req.Keys[i]); err != nil {
			err = fmt.Errorf("key %d: %w", i, err)
		}
	}
	if err != nil {
		return nil, toStatus(err)
	}
	resp = &kvv1.BatchGetResponse{Items: make([]*kvv1.KeyValue, len(req.Keys))}
	for i, k := range req.Keys {
		if resp.Items[i], err = s.get(ctx, c, k, req.Consistency, false); err != nil {
			return nil, toStatus(err)
		}
	}
	resp.Header = s.respHeader(c)
	return resp, nil
}

// get reads one key under the requested consistency and records what the
// session saw.
func (s *KV) get(ctx context.Context, c *call, key []byte, cons kvv1.Consistency, keysOnly bool) (*kvv1.KeyValue, error) {
	sh, err := s.router.Shard(c.keyspace, key)
	if err != nil {
		return nil, err
	}
	g, addr, err := s.readTarget(ctx, c, sh, key, cons)
	if err != nil {
		return nil, err
	}
	if addr != "" {
		return s.remoteGet(ctx, c, sh, addr, key, cons)
	}
	var rec storage.Record
	var found bool
	if err := g.Read(func(st *storage.ShardTx) error {
		rec, found, err = st.Latest(key, keysOnly)
		return err
	}); err != nil {
		return nil, err
	}
	item := &kvv1.KeyValue{Key: key}
	if found {
		c.observe(sh, key, rec.Version)
		item.Version = versionPB(rec.Version)
		item.Found = !rec.Tombstone
		item.Value = rec.Value
	}
	return item, nil
}

// Scan implements kvv1.KVServer: each shard contributes up to limit keys
// from the range, and the merge keeps the first limit.
func (s *KV) Scan(ctx context.Context, req *kvv1.ScanRequest) (resp *kvv1.ScanResponse, err error) {
	defer s.metrics.observe("scan", time.Now(), &err)
	c, err := s.begin(req.Header)
	if err != nil {
		return nil, toStatus(err)
	}
	sr, err := s.cfg.Limits.Scan(req)
	if err != nil {
		return nil, toStatus(err)
	}
	shards, err := s.router.Shards(c.keyspace)
	if err != nil {
		return nil, toStatus(err)
	}
	type shardRecord struct {
		storage.Record
		shard uint32
	}
	var all []shardRecord
	more := false
	for _, sh := range shards {
		recs, m, err := s.scanShard(ctx, c, sh, sr, req.KeysOnly, req.Consistency)
		if err != nil {
			return nil, toStatus(err)
		}
		for _, r := range recs {
			all = append(all, shardRecord{r, sh.ID})
		}
		more = more || m
	}
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i].Key, all[j].Key) < 0 })
	if len(all) > sr.limit {
		all, more = all[:sr.limit], true
	}
	// The session records each shard's newest returned version as the
	// shard's floor rather than one floor per scanned key.
	resp = &kvv1.ScanResponse{Items: make([]*kvv1.KeyValue, len(all))}
	for i, r := range all {
		resp.Items[i] = &kvv1.KeyValue{Key: r.Key, Found: true, Value: r.Value, Version: versionPB(r.Version)}
		c.observed.ObserveShardHLC(c.keyspace, r.shard, r.Version.HLC)
	}
	if more && len(all) > 0 {
		resp.Continuation = EncodeContinuation(all[len(all)-1].Key)
	}
	resp.Header = s.respHeader(c)
	return resp, nil
}

// History implements kvv1.KVServer.
func (s *KV) History(ctx context.Context, req *kvv1.HistoryRequest) (resp *kvv1.HistoryResponse, err error) {
	defer s.metrics.observe("history", time.Now(), &err)
	c, err := s.begin(req.Header)
	if err == nil {
		err = errors.Join(s.cfg.Limits.Key(req.Key), Consistency(req.Consistency))
	}
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = 10
	case limit > s.cfg.Limits.MaxHistory:
		err = errors.Join(err, fmt.Errorf("%w: history limit %d exceeds %d", ErrBadRequest, limit, s.cfg.Limits.MaxHistory))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	sh, err := s.router.Shard(c.keyspace, req.Key)
	if err != nil {
		return nil, toStatus(err)
	}
	g, addr, err := s.readTarget(ctx, c, sh, req.Key, req.Consistency)
	if err != nil {
		return nil, toStatus(err)
	}
	if addr != "" {
		kv, err := s.pool.KV(addr)
		if err != nil {
			return nil, toStatus(err)
		}
		fwd := &kvv1.HistoryRequest{
			Header: &kvv1.RequestHeader{Keyspace: c.keyspace, Session: c.session.ForRead(c.keyspace, [][]byte{req.Key}, shardIs(sh)).Encode()},
			Key:    req.Key, Limit: req.Limit, Consistency: req.Consistency,
		}
		resp, err := kv.History(forwardCtx(ctx), fwd)
		if err != nil {
			return nil, remoteErr(err)
		}
		if err := s.mergeSession(c, resp.Header); err != nil {
			return nil, toStatus(err)
		}
		resp.Header = s.respHeader(c)
		return resp, nil
	}
	var recs []storage.Record
	if err := g.Read(func(st *storage.ShardTx) error {
		recs, err = st.History(req.Key, limit)
		return err
	}); err != nil {
		return nil, toStatus(err)
	}
	resp = &kvv1.HistoryResponse{Versions: make([]*kvv1.VersionedValue, len(recs))}
	for i, r := range recs {
		resp.Versions[i] = &kvv1.VersionedValue{Version: versionPB(r.Version), Value: r.Value, Tombstone: r.Tombstone}
	}
	if len(recs) > 0 {
		c.observe(sh, req.Key, recs[0].Version)
	}
	resp.Header = s.respHeader(c)
	return resp, nil
}
