package rpc

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/fsm"
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
}

// KV implements kvv1.KVServer.
type KV struct {
	kvv1.UnimplementedKVServer
	cfg     Config
	router  *router.Router
	log     *slog.Logger
	metrics *Metrics

	// Mutations that arrive without a request id get one from this node
	// (reqPrefix, reqSeq), so that retrying them inside the site (after a
	// leadership change, or on another node) applies them once.
	reqPrefix string
	reqSeq    atomic.Uint64

	// draining is closed by Drain: call streams end (stream.go).
	draining  chan struct{}
	drainOnce sync.Once

	// large holds a slot for each GetTxn of more than largeKeys keys in
	// flight: 200 concurrent GetTxns of 1000 keys of 4 KiB took a node
	// from 120 MB to 4.3 GB resident. Later ones wait for a slot.
	large chan struct{}
}

// largeKeys is the key count above which a GetTxn takes a slot of KV.large;
// largeSlots is how many such requests a node serves at once.
const (
	largeKeys  = 100
	largeSlots = 16
)

// acquireLarge waits for a slot for a request of n keys (none below
// largeKeys) and returns its release.
func (s *KV) acquireLarge(ctx context.Context, n int) (func(), error) {
	if n <= largeKeys {
		return func() {}, nil
	}
	select {
	case s.large <- struct{}{}:
		return func() { <-s.large }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NewKV returns the data service; r orchestrates every request.
func NewKV(cfg Config, r *router.Router, logger *slog.Logger, m *Metrics) *KV {
	var nonce [8]byte
	_, _ = crand.Read(nonce[:])
	return &KV{cfg: cfg, router: r, log: logger, metrics: m, draining: make(chan struct{}), large: make(chan struct{}, largeSlots),
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

func (s *KV) begin(ctx context.Context, h *kvv1.RequestHeader) (*router.Call, error) {
	return s.beginFor(ctx, h, nil)
}

// beginFor is begin for a request about key alone (nil: any keys): of a
// partial session it decodes only the floors of key's shard
// (causal.DecodeSessionFor).
func (s *KV) beginFor(ctx context.Context, h *kvv1.RequestHeader, key []byte) (*router.Call, error) {
	c := &router.Call{Keyspace: DefaultKeyspace, Session: &causal.Session{}}
	if h == nil {
		return c, s.router.Arrive(ctx, c)
	}
	if h.Keyspace != "" {
		c.Keyspace = h.Keyspace
	}
	if len(h.Session) > 0 {
		s.metrics.tokenIn.Observe(float64(len(h.Session)))
	}
	var filter *causal.ShardFilter
	if key != nil {
		if sh, err := s.router.Shard(c.Keyspace, key); err == nil {
			filter = &causal.ShardFilter{Keyspace: c.Keyspace, Shard: sh.ID}
		}
	}
	sess, err := causal.DecodeSessionFor(h.Session, filter)
	if err != nil {
		return nil, err
	}
	c.Session = sess
	return c, s.router.Arrive(ctx, c)
}

// respHeader returns the reply header (see router.Call.Token).
func (s *KV) respHeader(c *router.Call) *kvv1.ResponseHeader {
	tok := c.Token()
	s.metrics.tokenOut.Observe(float64(len(tok)))
	return &kvv1.ResponseHeader{Session: tok, Site: s.cfg.Site, NodeId: s.cfg.NodeID}
}

// Put implements kvv1.KVServer.
func (s *KV) Put(ctx context.Context, req *kvv1.PutRequest) (resp *kvv1.PutResponse, err error) {
	defer s.metrics.observe("put", time.Now(), &err)
	c, sh, err := s.prepareWrite(ctx, req.Header, req.Key, req.Options)
	req.Options = s.withRequestID(req.Options)
	if err == nil {
		err = s.cfg.Limits.Value(req.Value)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	var res fsm.Result
	err = s.router.OnLeader(ctx, sh, func(g *shard.Group) (err error) {
		res, err = s.router.Propose(ctx, c, sh, g, &peerv1.Write{Key: req.Key, Value: req.Value}, req.Options)
		return err
	}, func(kv kvv1.KVClient, fctx context.Context) (err error) {
		resp, err = kv.Put(fctx, req)
		return err
	})
	if err != nil || resp != nil {
		return resp, toStatus(err)
	}
	return &kvv1.PutResponse{Header: s.respHeader(c), Version: router.VersionPB(res.Version)}, nil
}

// Delete implements kvv1.KVServer.
func (s *KV) Delete(ctx context.Context, req *kvv1.DeleteRequest) (resp *kvv1.DeleteResponse, err error) {
	defer s.metrics.observe("delete", time.Now(), &err)
	c, sh, err := s.prepareWrite(ctx, req.Header, req.Key, req.Options)
	req.Options = s.withRequestID(req.Options)
	if err != nil {
		return nil, toStatus(err)
	}
	var res fsm.Result
	err = s.router.OnLeader(ctx, sh, func(g *shard.Group) (err error) {
		res, err = s.router.Propose(ctx, c, sh, g, &peerv1.Write{Key: req.Key, Tombstone: true}, req.Options)
		return err
	}, func(kv kvv1.KVClient, fctx context.Context) (err error) {
		resp, err = kv.Delete(fctx, req)
		return err
	})
	if err != nil || resp != nil {
		return resp, toStatus(err)
	}
	return &kvv1.DeleteResponse{Header: s.respHeader(c), Version: router.VersionPB(res.Version), Existed: res.Existed}, nil
}

// CompareAndSwap implements kvv1.KVServer.
func (s *KV) CompareAndSwap(ctx context.Context, req *kvv1.CompareAndSwapRequest) (resp *kvv1.CompareAndSwapResponse, err error) {
	defer s.metrics.observe("cas", time.Now(), &err)
	c, sh, err := s.prepareWrite(ctx, req.Header, req.Key, req.Options)
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
		if req.Delete {
			err = errors.Join(err, fmt.Errorf("%w: delete with expect_absent deletes nothing (the key must be absent)", ErrBadRequest))
		}
		w.Condition = &peerv1.Condition{Kind: peerv1.Condition_KIND_ABSENT}
	default:
		err = errors.Join(err, fmt.Errorf("%w: compare-and-swap needs expected_version or expect_absent", ErrBadRequest))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.router.CheckJoined(ctx, c); err != nil {
		return nil, toStatus(err)
	}
	var res fsm.Result
	err = s.router.OnLeader(ctx, sh, func(g *shard.Group) (err error) {
		release, err := s.router.CASTurn(ctx, g, c, sh, w, req.Options)
		if err != nil {
			return err
		}
		defer release()
		res, err = s.router.Propose(ctx, c, sh, g, w, req.Options)
		return err
	}, func(kv kvv1.KVClient, fctx context.Context) (err error) {
		resp, err = kv.CompareAndSwap(fctx, req)
		return err
	})
	if err != nil {
		var ce *router.CondError
		if errors.As(err, &ce) {
			return nil, casStatus(ce.Result)
		}
		return nil, toStatus(err)
	}
	if resp != nil {
		return resp, nil
	}
	return &kvv1.CompareAndSwapResponse{Header: s.respHeader(c), Version: router.VersionPB(res.Version)}, nil
}

// prepareWrite validates a mutation and finds its shard.
func (s *KV) prepareWrite(ctx context.Context, h *kvv1.RequestHeader, key []byte, o *kvv1.WriteOptions) (*router.Call, placement.Shard, error) {
	c, err := s.begin(ctx, h)
	if err != nil {
		return nil, placement.Shard{}, err
	}
	if err := s.cfg.Limits.Key(key); err != nil {
		return nil, placement.Shard{}, err
	}
	if err := s.cfg.Limits.WriteOptions(o, 0); err != nil {
		return nil, placement.Shard{}, err
	}
	sh, err := s.router.Shard(c.Keyspace, key)
	return c, sh, err
}

// Get implements kvv1.KVServer.
func (s *KV) Get(ctx context.Context, req *kvv1.GetRequest) (resp *kvv1.GetResponse, err error) {
	defer s.metrics.observe("get", time.Now(), &err)
	c, err := s.beginFor(ctx, req.Header, req.Key)
	if err == nil {
		err = errors.Join(s.cfg.Limits.Key(req.Key), Consistency(req.Consistency))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	item, err := s.router.Get(ctx, c, req.Key, req.Consistency, false)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvv1.GetResponse{Header: s.respHeader(c), Found: item.Found, Value: item.Value, Version: item.Version}, nil
}

// BatchGet implements kvv1.KVServer.
func (s *KV) BatchGet(ctx context.Context, req *kvv1.BatchGetRequest) (resp *kvv1.BatchGetResponse, err error) {
	defer s.metrics.observe("batch_get", time.Now(), &err)
	err = s.checkKeys(req.Keys)
	if err == nil {
		err = Consistency(req.Consistency)
	}
	var c *router.Call
	if err == nil {
		c, err = s.begin(ctx, req.Header)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	resp = &kvv1.BatchGetResponse{Items: make([]*kvv1.KeyValue, len(req.Keys))}
	size := 0
	for i, k := range req.Keys {
		if resp.Items[i], err = s.router.Get(ctx, c, k, req.Consistency, false); err != nil {
			return nil, toStatus(err)
		}
		size += len(k) + len(resp.Items[i].GetValue())
		if err := s.cfg.Limits.Reply(i+1, size); err != nil {
			return nil, toStatus(err)
		}
	}
	resp.Header = s.respHeader(c)
	return resp, nil
}

// checkKeys validates the keys of a BatchGet or GetTxn.
func (s *KV) checkKeys(keys [][]byte) error {
	if len(keys) > s.cfg.Limits.MaxBatchKeys {
		return fmt.Errorf("%w: %d keys exceeds the batch limit of %d", ErrBadRequest, len(keys), s.cfg.Limits.MaxBatchKeys)
	}
	for i, k := range keys {
		if err := s.cfg.Limits.Key(k); err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
	}
	return nil
}

// GetTxn implements kvv1.KVServer.
func (s *KV) GetTxn(ctx context.Context, req *kvv1.GetTxnRequest) (resp *kvv1.GetTxnResponse, err error) {
	defer s.metrics.observe("get_txn", time.Now(), &err)
	err = s.checkKeys(req.Keys)
	var c *router.Call
	if err == nil {
		c, err = s.begin(ctx, req.Header)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	release, err := s.acquireLarge(ctx, len(req.Keys))
	if err != nil {
		return nil, toStatus(err)
	}
	items, snap, err := s.router.GetTxn(ctx, c, req.Keys, req.SnapshotHlc)
	release()
	if err != nil {
		return nil, toStatus(err)
	}
	size := 0
	for _, it := range items {
		size += len(it.GetKey()) + len(it.GetValue())
	}
	if err := s.cfg.Limits.Reply(len(items), size); err != nil {
		return nil, toStatus(err)
	}
	return &kvv1.GetTxnResponse{Header: s.respHeader(c), Items: items, SnapshotHlc: snap}, nil
}

// Scan implements kvv1.KVServer: each shard contributes up to limit keys
// from the range, and the merge keeps the first limit.
func (s *KV) Scan(ctx context.Context, req *kvv1.ScanRequest) (resp *kvv1.ScanResponse, err error) {
	defer s.metrics.observe("scan", time.Now(), &err)
	c, err := s.begin(ctx, req.Header)
	if err != nil {
		return nil, toStatus(err)
	}
	sr, err := s.cfg.Limits.Scan(req)
	if err != nil {
		return nil, toStatus(err)
	}
	shards, err := s.router.Shards(c.Keyspace)
	if err != nil {
		return nil, toStatus(err)
	}
	type shardRecord struct {
		storage.Record
		shard uint32
	}
	var all []shardRecord
	more := false
	// bound is the smallest last key of the shards that have more keys:
	// a shard's part stops at the limit or at storage.MaxScanPageBytes,
	// and the page must not go past a key a shard has not returned.
	var bound []byte
	for _, sh := range shards {
		recs, m, err := s.router.ScanShard(ctx, c, sh, router.ScanRange{Start: sr.start, End: sr.end, Limit: sr.limit}, req.KeysOnly, req.Consistency)
		if err != nil {
			return nil, toStatus(err)
		}
		for _, r := range recs {
			all = append(all, shardRecord{r, sh.ID})
		}
		if m && len(recs) > 0 {
			if last := recs[len(recs)-1].Key; bound == nil || bytes.Compare(last, bound) < 0 {
				bound = last
			}
		}
		more = more || m
	}
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i].Key, all[j].Key) < 0 })
	if bound != nil {
		n := sort.Search(len(all), func(i int) bool { return bytes.Compare(all[i].Key, bound) > 0 })
		all = all[:n]
	}
	if len(all) > sr.limit {
		all, more = all[:sr.limit], true
	}
	// The page holds at most storage.MaxScanPageBytes, and at least one
	// key.
	size := 0
	for i, r := range all {
		if size += storage.ScanSize(r.Record); i > 0 && size > storage.MaxScanPageBytes {
			all, more = all[:i], true
			break
		}
	}
	// The session records each shard's newest returned version as the
	// shard's floor rather than one floor per scanned key.
	resp = &kvv1.ScanResponse{Items: make([]*kvv1.KeyValue, len(all))}
	for i, r := range all {
		resp.Items[i] = &kvv1.KeyValue{Key: r.Key, Found: true, Value: r.Value, Version: router.VersionPB(r.Version)}
		c.Observed.ObserveShardVersion(c.Keyspace, r.shard, r.Version)
		c.ObserveStamp(r.Stamp)
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
	c, err := s.begin(ctx, req.Header)
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
	versions, err := s.router.History(ctx, c, req.Key, limit, s.cfg.Limits.MaxReplyBytes, req.Consistency)
	if err != nil {
		return nil, toStatus(err)
	}
	size := 0
	for _, v := range versions {
		size += len(v.GetValue())
	}
	if err := s.cfg.Limits.Reply(len(versions), size); err != nil {
		return nil, toStatus(err)
	}
	return &kvv1.HistoryResponse{Header: s.respHeader(c), Versions: versions}, nil
}
