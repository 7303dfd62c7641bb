package client

import (
	"context"
	"fmt"
	"github.com/causeway-db/causeway/internal/causal"
	"iter"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// maxScanPage is the largest page the server returns.
const maxScanPage = 10000

// Item is one key as read by Get, BatchGet or Scan.
type Item struct {
	Key []byte
	// Value is empty when Found is false or the scan asked for keys only.
	Value []byte
	// Version is the version read; for a missing key it is the version of
	// its tombstone, or zero if the key was never written.
	Version Version
	// Found reports whether the key holds a live value.
	Found bool
}

// Put writes value under key and returns the new version.
func (c *Client) Put(ctx context.Context, key, value []byte, opts ...Option) (Version, error) {
	o := c.options(opts)
	o.mutation = true
	req := &kvv1.PutRequest{Key: key, Value: value, Options: c.writeOptions(o)}
	var resp *kvv1.PutResponse
	var sent *causal.Session
	err := c.invokeKV(ctx, o, &routeKey{o.keyspace, key, true}, func(ctx context.Context, kv kvv1.KVClient, to dest) (_ *kvv1.ResponseHeader, err error) {
		req.Header, sent = c.writeHeader(o.keyspace, to)
		resp, err = kv.Put(ctx, req)
		return resp.GetHeader(), err
	})
	if err != nil {
		return Version{}, fmt.Errorf("client: put: %w", err)
	}
	v := fromProtoVersion(resp.GetVersion())
	c.mergeReply(resp.GetHeader(), o.keyspace, observed{key, v})
	c.writeDone(sent)
	return v, nil
}

// Get reads the newest visible version of key. A missing (never written or
// deleted) key is not an error: the Item has Found false.
func (c *Client) Get(ctx context.Context, key []byte, opts ...Option) (Item, error) {
	o := c.options(opts)
	o.read = true
	req := &kvv1.GetRequest{Key: key, Consistency: o.protoConsistency()}
	var resp *kvv1.GetResponse
	err := c.invokeKV(ctx, o, o.strongRoute(key), func(ctx context.Context, kv kvv1.KVClient, to dest) (_ *kvv1.ResponseHeader, err error) {
		req.Header = c.readHeader(o.keyspace, to, key)
		resp, err = kv.Get(ctx, req)
		return resp.GetHeader(), err
	})
	if err != nil {
		return Item{}, fmt.Errorf("client: get: %w", err)
	}
	it := Item{Key: key, Value: resp.GetValue(), Version: fromProtoVersion(resp.GetVersion()), Found: resp.GetFound()}
	c.mergeReply(resp.GetHeader(), o.keyspace, observed{key, it.Version})
	return it, nil
}

// Delete writes a tombstone for key. It returns the tombstone's version and
// whether a live value existed before.
func (c *Client) Delete(ctx context.Context, key []byte, opts ...Option) (v Version, existed bool, err error) {
	o := c.options(opts)
	o.mutation = true
	req := &kvv1.DeleteRequest{Key: key, Options: c.writeOptions(o)}
	var resp *kvv1.DeleteResponse
	var sent *causal.Session
	err = c.invokeKV(ctx, o, &routeKey{o.keyspace, key, true}, func(ctx context.Context, kv kvv1.KVClient, to dest) (_ *kvv1.ResponseHeader, err error) {
		req.Header, sent = c.writeHeader(o.keyspace, to)
		resp, err = kv.Delete(ctx, req)
		return resp.GetHeader(), err
	})
	if err != nil {
		return Version{}, false, fmt.Errorf("client: delete: %w", err)
	}
	v = fromProtoVersion(resp.GetVersion())
	c.mergeReply(resp.GetHeader(), o.keyspace, observed{key, v})
	c.writeDone(sent)
	return v, resp.GetExisted(), nil
}

// BatchGet reads several keys of one keyspace. It returns one Item per key,
// in the order of keys.
func (c *Client) BatchGet(ctx context.Context, keys [][]byte, opts ...Option) ([]Item, error) {
	o := c.options(opts)
	o.read = true
	req := &kvv1.BatchGetRequest{Keys: keys, Consistency: o.protoConsistency()}
	var resp *kvv1.BatchGetResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		req.Header = c.readHeader(o.keyspace, o.at(ep), keys...)
		resp, err = c.kv[ep].BatchGet(ctx, req)
		if err == nil {
			c.noteSite(ep, resp.GetHeader().GetSite())
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: batch get: %w", err)
	}
	return c.items(o.keyspace, resp.GetHeader(), resp.GetItems()), nil
}

// GetTxn reads keys (of one keyspace, on any shards) as one causally
// consistent snapshot: it holds everything this client's session wrote or
// read, and never a version without the versions it depends on. Missing
// keys come back with Found false. Consistency options do not apply (the
// snapshot is causal+). See docs/consistency.md.
func (c *Client) GetTxn(ctx context.Context, keys [][]byte, opts ...Option) ([]Item, error) {
	items, _, err := c.GetTxnAt(ctx, keys, opts...)
	return items, err
}

// GetTxnAt is GetTxn that also returns the snapshot's HLC (a local HLC of
// the site that served it).
func (c *Client) GetTxnAt(ctx context.Context, keys [][]byte, opts ...Option) ([]Item, uint64, error) {
	o := c.options(opts)
	o.read = true
	req := &kvv1.GetTxnRequest{Keys: keys}
	var resp *kvv1.GetTxnResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		req.Header = c.readHeader(o.keyspace, o.at(ep), keys...)
		resp, err = c.kv[ep].GetTxn(ctx, req)
		if err == nil {
			c.noteSite(ep, resp.GetHeader().GetSite())
		}
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("client: get txn: %w", err)
	}
	return c.items(o.keyspace, resp.GetHeader(), resp.GetItems()), resp.GetSnapshotHlc(), nil
}

// ScanOptions select the keys of a scan: either those starting with Prefix,
// or the range [Start, End) (an empty End means no upper bound). With
// neither, the whole keyspace is scanned.
type ScanOptions struct {
	Prefix []byte
	Start  []byte
	End    []byte
	// Limit is, for Scan, the page size (0 means the server default of
	// 1000; the server allows at most 10000); for ScanAll, the total number
	// of items to return (0 means all).
	Limit int
	// KeysOnly leaves the values out.
	KeysOnly bool
	// Continuation resumes a scan from the token of a previous page; the
	// other fields must repeat those of the first page's request.
	Continuation []byte
}

// ScanPage is one page of a scan.
type ScanPage struct {
	// Items are live keys in ascending byte order.
	Items []Item
	// Continuation fetches the next page (in ScanOptions.Continuation); it
	// is empty when the scan is complete.
	Continuation []byte
}

// Scan returns one page of live keys in ascending byte order. Use ScanAll
// to follow the continuation tokens.
func (c *Client) Scan(ctx context.Context, so ScanOptions, opts ...Option) (ScanPage, error) {
	o := c.options(opts)
	o.read = true
	if len(so.Prefix) > 0 && (len(so.Start) > 0 || len(so.End) > 0) {
		return ScanPage{}, fmt.Errorf("client: scan: %w", invalidArgument("prefix cannot be combined with start or end"))
	}
	if so.Limit < 0 {
		return ScanPage{}, fmt.Errorf("client: scan: %w", invalidArgument("negative limit %d", so.Limit))
	}
	req := &kvv1.ScanRequest{
		Prefix:       so.Prefix,
		Start:        so.Start,
		End:          so.End,
		Limit:        uint32(min(so.Limit, 1<<32-1)),
		KeysOnly:     so.KeysOnly,
		Continuation: so.Continuation,
		Consistency:  o.protoConsistency(),
	}
	// The key range whose floors the scan needs.
	start, end := so.Start, so.End
	if len(so.Prefix) > 0 {
		start, end = so.Prefix, prefixEnd(so.Prefix)
	}
	var resp *kvv1.ScanResponse
	err := c.invoke(ctx, o, func(ctx context.Context, ep int) (err error) {
		req.Header = c.scanHeader(o.keyspace, o.at(ep), start, end)
		resp, err = c.kv[ep].Scan(ctx, req)
		if err == nil {
			c.noteSite(ep, resp.GetHeader().GetSite())
		}
		return err
	})
	if err != nil {
		return ScanPage{}, fmt.Errorf("client: scan: %w", err)
	}
	return ScanPage{Items: c.items(o.keyspace, resp.GetHeader(), resp.GetItems()), Continuation: resp.GetContinuation()}, nil
}

// ScanAll iterates over the scan's live keys in ascending byte order,
// fetching pages as needed, until so.Limit items (0 means no limit) or the
// end. An error ends the iteration: it is yielded with a zero Item.
//
//	for it, err := range c.ScanAll(ctx, client.ScanOptions{Prefix: []byte("user/")}) {
//		if err != nil {
//			return err
//		}
//		fmt.Printf("%s=%s\n", it.Key, it.Value)
//	}
func (c *Client) ScanAll(ctx context.Context, so ScanOptions, opts ...Option) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		total := so.Limit
		page := so
		// The page size stays the same for every page: the server may
		// require continued requests to repeat the first one.
		page.Limit = min(max(total, 0), maxScanPage)
		n := 0
		for {
			p, err := c.Scan(ctx, page, opts...)
			if err != nil {
				yield(Item{}, err)
				return
			}
			for _, it := range p.Items {
				if total > 0 && n >= total {
					return
				}
				if !yield(it, nil) {
					return
				}
				n++
			}
			if len(p.Continuation) == 0 || (total > 0 && n >= total) {
				return
			}
			page.Continuation = p.Continuation
		}
	}
}

// Expect is the expectation of a compare-and-swap: a version
// (ExpectVersion) or absence (ExpectAbsent). The zero Expect is invalid.
type Expect struct {
	version Version
	absent  bool
}

// ExpectVersion expects the key's current version to be v.
func ExpectVersion(v Version) Expect { return Expect{version: v} }

// ExpectAbsent expects the key to be absent (never written, or deleted).
func ExpectAbsent() Expect { return Expect{absent: true} }

// Absent reports whether e expects absence.
func (e Expect) Absent() bool { return e.absent }

// Version returns the expected version; zero if e expects absence.
func (e Expect) Version() Version { return e.version }

// CompareAndSwap writes value under key if the key's current version is
// as expected, and returns the new version. If it is not, the error is a
// *ConflictError (errors.Is(err, ErrConflict)) with the current version.
func (c *Client) CompareAndSwap(ctx context.Context, key []byte, expect Expect, value []byte, opts ...Option) (Version, error) {
	return c.cas(ctx, key, expect, value, false, opts)
}

// CompareAndDelete is CompareAndSwap writing a tombstone instead of a value.
func (c *Client) CompareAndDelete(ctx context.Context, key []byte, expect Expect, opts ...Option) (Version, error) {
	return c.cas(ctx, key, expect, nil, true, opts)
}

func (c *Client) cas(ctx context.Context, key []byte, expect Expect, value []byte, del bool, opts []Option) (Version, error) {
	o := c.options(opts)
	o.mutation = true
	req := &kvv1.CompareAndSwapRequest{Key: key, Value: value, Delete: del, Options: c.writeOptions(o)}
	switch {
	case expect.absent:
		req.Expect = &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}
	case !expect.version.IsZero():
		req.Expect = &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: toProtoVersion(expect.version)}
	default:
		return Version{}, fmt.Errorf("client: compare-and-swap: %w", invalidArgument("no expectation: use ExpectVersion with a non-zero version, or ExpectAbsent"))
	}
	var resp *kvv1.CompareAndSwapResponse
	var sent *causal.Session
	err := c.invokeKV(ctx, o, &routeKey{o.keyspace, key, true}, func(ctx context.Context, kv kvv1.KVClient, to dest) (_ *kvv1.ResponseHeader, err error) {
		req.Header, sent = c.writeHeader(o.keyspace, to)
		resp, err = kv.CompareAndSwap(ctx, req)
		return resp.GetHeader(), err
	})
	if err != nil {
		if conflict := conflictFrom(err); conflict != nil {
			c.observe(o.keyspace, key, conflict.Current)
			return Version{}, conflict
		}
		return Version{}, fmt.Errorf("client: compare-and-swap: %w", err)
	}
	v := fromProtoVersion(resp.GetVersion())
	c.mergeReply(resp.GetHeader(), o.keyspace, observed{key, v})
	c.writeDone(sent)
	return v, nil
}

// HistoryEntry is one retained version of a key.
type HistoryEntry struct {
	Version Version
	// Value is empty for a tombstone.
	Value []byte
	// Tombstone reports whether this version is a delete.
	Tombstone bool
}

// History lists up to limit retained versions of key, newest first (limit 0
// means the server default of 10; the server allows at most 1000). A key
// never written has an empty history.
func (c *Client) History(ctx context.Context, key []byte, limit int, opts ...Option) ([]HistoryEntry, error) {
	o := c.options(opts)
	o.read = true
	if limit < 0 {
		return nil, fmt.Errorf("client: history: %w", invalidArgument("negative limit %d", limit))
	}
	req := &kvv1.HistoryRequest{Key: key, Limit: uint32(min(limit, 1<<32-1)), Consistency: o.protoConsistency()}
	var resp *kvv1.HistoryResponse
	err := c.invokeKV(ctx, o, o.strongRoute(key), func(ctx context.Context, kv kvv1.KVClient, to dest) (_ *kvv1.ResponseHeader, err error) {
		req.Header = c.readHeader(o.keyspace, to, key)
		resp, err = kv.History(ctx, req)
		return resp.GetHeader(), err
	})
	if err != nil {
		return nil, fmt.Errorf("client: history: %w", err)
	}
	out := make([]HistoryEntry, 0, len(resp.GetVersions()))
	for _, vv := range resp.GetVersions() {
		out = append(out, HistoryEntry{Version: fromProtoVersion(vv.GetVersion()), Value: vv.GetValue(), Tombstone: vv.GetTombstone()})
	}
	if len(out) > 0 {
		c.mergeReply(resp.GetHeader(), o.keyspace, observed{key, out[0].Version})
	} else {
		c.mergeReply(resp.GetHeader(), o.keyspace)
	}
	return out, nil
}

// strongRoute routes a STRONG read of key to its shard leader; CAUSAL
// reads stay on the current endpoint, where any replica serves them.
func (o callOptions) strongRoute(key []byte) *routeKey {
	if o.consistency != Strong {
		return nil
	}
	return &routeKey{o.keyspace, key, false}
}

func (c *Client) writeOptions(o callOptions) *kvv1.WriteOptions {
	return &kvv1.WriteOptions{
		Durability: o.protoDurability(),
		MinSites:   o.minSites,
		RequestId:  c.requestID(),
	}
}

// items converts a reply's items and merges what the reply observed.
func (c *Client) items(keyspace string, h *kvv1.ResponseHeader, kvs []*kvv1.KeyValue) []Item {
	out := make([]Item, 0, len(kvs))
	var seen []observed
	if len(h.GetSession()) == 0 {
		seen = make([]observed, 0, len(kvs))
	}
	for _, kv := range kvs {
		it := Item{Key: kv.GetKey(), Value: kv.GetValue(), Version: fromProtoVersion(kv.GetVersion()), Found: kv.GetFound()}
		if seen != nil {
			seen = append(seen, observed{it.Key, it.Version})
		}
		out = append(out, it)
	}
	c.mergeReply(h, keyspace, seen...)
	return out
}

// prefixEnd returns the smallest key after every key with prefix p, or nil
// if there is none (p is all 0xff bytes).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
