package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
)

// testConfig is a single-node site on loopback with fast raft timings.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.ClientAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Shards = 8
	cfg.Shard.HeartbeatTimeout = 100 * time.Millisecond
	cfg.Shard.ElectionTimeout = 100 * time.Millisecond
	cfg.Shard.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.Shard.CommitTimeout = 5 * time.Millisecond
	cfg.Shard.GCInterval = 0
	cfg.ShutdownGrace = 2 * time.Second
	cfg.PeerAddr = "127.0.0.1:0"
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.GossipProfile = "local"
	return cfg
}

type node struct {
	srv   *Server
	kv    kvv1.KVClient
	admin adminv1.AdminClient
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start runs a server on cfg and waits until every shard has a leader.
func start(t *testing.T, cfg Config) *node {
	t.Helper()
	return startLogged(t, cfg, quietLogger())
}

// startLogged is start with the server logging to logger.
func startLogged(t *testing.T, cfg Config, logger *slog.Logger) *node {
	t.Helper()
	srv, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitFor(t, 20*time.Second, "the node is ready", func() bool { return srv.Ready() == nil })
	return &node{srv: srv, kv: kvv1.NewKVClient(conn), admin: adminv1.NewAdminClient(conn)}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Every(5*time.Millisecond).Until(t, d, what, poll.True(cond))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func (n *node) put(t *testing.T, key, value string) *kvv1.PutResponse {
	t.Helper()
	resp, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Key: []byte(key), Value: []byte(value)})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return resp
}

func (n *node) get(t *testing.T, key string) *kvv1.GetResponse {
	t.Helper()
	resp, err := n.kv.Get(ctx(t), &kvv1.GetRequest{Key: []byte(key)})
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return resp
}

// getStrong reads key linearizably: after a restart that rebuilds the
// state from the raft log, a replica knows its leader before it has
// applied the log again, and only a STRONG read waits for that.
func (n *node) getStrong(t *testing.T, key string) *kvv1.GetResponse {
	t.Helper()
	resp, err := n.kv.Get(ctx(t), &kvv1.GetRequest{Key: []byte(key), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return resp
}

// appliedTotal sums the applied index of every shard: it changes iff
// something was written through raft.
func (n *node) appliedTotal() uint64 {
	var sum uint64
	for _, g := range n.srv.Groups() {
		sum += g.Status().AppliedIndex
	}
	return sum
}

// versionCount counts every stored version of every key (live, shadowed
// and tombstones) across all shards.
func (n *node) versionCount(t *testing.T) int {
	t.Helper()
	total := 0
	for _, g := range n.srv.Groups() {
		if err := g.Read(func(st *storage.ShardTx) error {
			recs, _, err := st.Scan(nil, nil, 1<<30, true)
			for _, r := range recs {
				h, herr := st.History(r.Key, 1<<30)
				if herr != nil {
					return herr
				}
				total += len(h)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return total
}

func TestAPIRoundTrip(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	p1 := n.put(t, "greeting", "hello")
	if p1.Version.GetHlc() == 0 || p1.Version.Site != "local" || len(p1.Header.Session) == 0 {
		t.Fatalf("put response %v", p1)
	}
	g := n.get(t, "greeting")
	if !g.Found || string(g.Value) != "hello" || g.Version.Hlc != p1.Version.Hlc {
		t.Fatalf("get = %v", g)
	}
	p2 := n.put(t, "greeting", "hi")
	if p2.Version.Hlc <= p1.Version.Hlc {
		t.Fatalf("versions not increasing: %d then %d", p1.Version.Hlc, p2.Version.Hlc)
	}
	// STRONG reads see the same data.
	sg, err := n.kv.Get(ctx(t), &kvv1.GetRequest{Key: []byte("greeting"), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
	if err != nil || string(sg.Value) != "hi" {
		t.Fatalf("strong get = %v, %v", sg, err)
	}
	d, err := n.kv.Delete(ctx(t), &kvv1.DeleteRequest{Key: []byte("greeting")})
	if err != nil || !d.Existed {
		t.Fatalf("delete = %v, %v", d, err)
	}
	if g := n.get(t, "greeting"); g.Found || g.Version.GetHlc() != d.Version.Hlc {
		t.Fatalf("get after delete = %v", g)
	}
	d2, err := n.kv.Delete(ctx(t), &kvv1.DeleteRequest{Key: []byte("greeting")})
	if err != nil || d2.Existed {
		t.Fatalf("second delete = %v, %v", d2, err)
	}
	h, err := n.kv.History(ctx(t), &kvv1.HistoryRequest{Key: []byte("greeting")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range h.Versions {
		if v.Tombstone {
			got = append(got, "-")
		} else {
			got = append(got, string(v.Value))
		}
	}
	if fmt.Sprint(got) != "[- - hi hello]" {
		t.Fatalf("history = %v", got)
	}
	h1, _ := n.kv.History(ctx(t), &kvv1.HistoryRequest{Key: []byte("greeting"), Limit: 1})
	if len(h1.Versions) != 1 || h1.Versions[0].Version.Hlc != d2.Version.Hlc {
		t.Fatalf("history limit 1 = %v", h1)
	}

	n.put(t, "a", "1")
	n.put(t, "b", "2")
	bg, err := n.kv.BatchGet(ctx(t), &kvv1.BatchGetRequest{Keys: [][]byte{[]byte("b"), []byte("missing"), []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bg.Items) != 3 || string(bg.Items[0].Value) != "2" || bg.Items[1].Found || string(bg.Items[2].Value) != "1" {
		t.Fatalf("batch get = %v", bg.Items)
	}
	// A snapshot holds what the session wrote (without a session, it may
	// be older: any consistent cut at least as new as the node was).
	pb, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Key: []byte("b"), Value: []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := n.kv.GetTxn(ctx(t), &kvv1.GetTxnRequest{Header: &kvv1.RequestHeader{Session: pb.Header.Session}, Keys: [][]byte{[]byte("b"), []byte("missing"), []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tx.Items) != 3 || string(tx.Items[0].Value) != "2" || tx.Items[1].Found || string(tx.Items[2].Value) != "1" || tx.SnapshotHlc == 0 {
		t.Fatalf("get txn = %v at %d", tx.Items, tx.SnapshotHlc)
	}

	// CAS: put-if-absent, swap on version, delete on version.
	c1, err := n.kv.CompareAndSwap(ctx(t), &kvv1.CompareAndSwapRequest{Key: []byte("lock"), Expect: &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}, Value: []byte("owner-1")})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := n.kv.CompareAndSwap(ctx(t), &kvv1.CompareAndSwapRequest{Key: []byte("lock"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: c1.Version}, Value: []byte("owner-2")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.kv.CompareAndSwap(ctx(t), &kvv1.CompareAndSwapRequest{Key: []byte("lock"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: c2.Version}, Delete: true}); err != nil {
		t.Fatal(err)
	}
	if g := n.get(t, "lock"); g.Found {
		t.Fatalf("lock still present: %v", g)
	}
	// The deleted key is absent again.
	if _, err := n.kv.CompareAndSwap(ctx(t), &kvv1.CompareAndSwapRequest{Key: []byte("lock"), Expect: &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}, Value: []byte("owner-3")}); err != nil {
		t.Fatal(err)
	}

	st, err := n.admin.Status(ctx(t), &adminv1.StatusRequest{})
	if err != nil || len(st.Shards) != 8 || st.Site != "local" || st.StorageBytes == 0 {
		t.Fatalf("status = %v, %v", st, err)
	}
}

func TestSessionTokenFlows(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	p, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Key: []byte("k"), Value: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	// A read carrying the writer's token returns it updated, and a later
	// write is newer than everything the token has seen (monotonic writes).
	g, err := n.kv.Get(ctx(t), &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: []byte("k")})
	if err != nil || string(g.Value) != "v1" || len(g.Header.Session) == 0 {
		t.Fatalf("get = %v, %v", g, err)
	}
	p2, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: g.Header.Session}, Key: []byte("other"), Value: []byte("x")})
	if err != nil || p2.Version.Hlc <= p.Version.Hlc {
		t.Fatalf("put after read: %v, %v", p2, err)
	}
}

// errCase is one bad request: it must fail with code and write nothing.
type errCase struct {
	name string
	code codes.Code
	call func(kvv1.KVClient) error
	// inLog: the request is decided by the replicated state machine, so it
	// takes a raft index without changing any data.
	inLog bool
}

func TestErrorContract(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Limits.MaxValueBytes = 1024
	n := start(t, cfg)
	existing := n.put(t, "exists", "v")
	big := bytes.Repeat([]byte("k"), 4097)
	c := context.Background()
	cases := []errCase{
		{"put empty key", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Put(c, &kvv1.PutRequest{Value: []byte("v")})
			return err
		}, false},
		{"put key over 4 KiB", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Put(c, &kvv1.PutRequest{Key: big, Value: []byte("v")})
			return err
		}, false},
		{"put value over limit", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Put(c, &kvv1.PutRequest{Key: []byte("big"), Value: make([]byte, 1025)})
			return err
		}, false},
		{"put unknown keyspace", codes.NotFound, func(kv kvv1.KVClient) error {
			_, err := kv.Put(c, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Keyspace: "nope"}, Key: []byte("k"), Value: []byte("v")})
			return err
		}, false},
		{"put malformed token", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Put(c, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: []byte("garbage")}, Key: []byte("k"), Value: []byte("v")})
			return err
		}, false},
		{"put bad durability", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Put(c, &kvv1.PutRequest{Key: []byte("k"), Value: []byte("v"), Options: &kvv1.WriteOptions{Durability: kvv1.Durability_DURABILITY_SITES, MinSites: 2}})
			return err
		}, false},
		{"delete empty key", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Delete(c, &kvv1.DeleteRequest{})
			return err
		}, false},
		{"delete malformed token", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Delete(c, &kvv1.DeleteRequest{Header: &kvv1.RequestHeader{Session: []byte{'C', 'S', 1, 0, 0, 0, 0, 0}}, Key: []byte("exists")})
			return err
		}, false},
		{"get empty key", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Get(c, &kvv1.GetRequest{})
			return err
		}, false},
		{"get unknown keyspace", codes.NotFound, func(kv kvv1.KVClient) error {
			_, err := kv.Get(c, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Keyspace: "nope"}, Key: []byte("k")})
			return err
		}, false},
		{"get key over 4 KiB", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Get(c, &kvv1.GetRequest{Key: big})
			return err
		}, false},
		{"batch get one bad key", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.BatchGet(c, &kvv1.BatchGetRequest{Keys: [][]byte{[]byte("a"), nil}})
			return err
		}, false},
		{"gettxn one bad key", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.GetTxn(c, &kvv1.GetTxnRequest{Keys: [][]byte{[]byte("a"), big}})
			return err
		}, false},
		{"gettxn malformed token", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.GetTxn(c, &kvv1.GetTxnRequest{Header: &kvv1.RequestHeader{Session: []byte("CS\x03garbage")}, Keys: [][]byte{[]byte("a")}})
			return err
		}, false},
		{"cas mismatch", codes.FailedPrecondition, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("exists"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: &kvv1.Version{Hlc: 1, Site: "local"}}, Value: []byte("x")})
			return err
		}, false},
		{"cas absent but exists", codes.AlreadyExists, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("exists"), Expect: &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}, Value: []byte("x")})
			return err
		}, true},
		{"cas on missing key", codes.NotFound, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("missing"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: existing.Version}, Value: []byte("x")})
			return err
		}, true},
		{"cas newer expected version", codes.FailedPrecondition, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("exists"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: &kvv1.Version{Hlc: existing.Version.Hlc + 1, Site: "local"}}, Value: []byte("x")})
			return err
		}, true},
		{"cas delete expecting absent", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("missing"), Expect: &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}, Delete: true})
			return err
		}, false},
		{"cas without expectation", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("exists"), Value: []byte("x")})
			return err
		}, false},
		{"cas value over limit", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("exists"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: existing.Version}, Value: make([]byte, 2000)})
			return err
		}, false},
		{"scan prefix and range", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Scan(c, &kvv1.ScanRequest{Prefix: []byte("a"), Start: []byte("b")})
			return err
		}, false},
		{"scan end before start", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Scan(c, &kvv1.ScanRequest{Start: []byte("b"), End: []byte("a")})
			return err
		}, false},
		{"scan malformed continuation", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Scan(c, &kvv1.ScanRequest{Continuation: []byte("nope")})
			return err
		}, false},
		{"scan limit too large", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Scan(c, &kvv1.ScanRequest{Limit: 1 << 20})
			return err
		}, false},
		{"scan unknown keyspace", codes.NotFound, func(kv kvv1.KVClient) error {
			_, err := kv.Scan(c, &kvv1.ScanRequest{Header: &kvv1.RequestHeader{Keyspace: "nope"}})
			return err
		}, false},
		{"history limit too large", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.History(c, &kvv1.HistoryRequest{Key: []byte("exists"), Limit: 5000})
			return err
		}, false},
		{"bad consistency", codes.InvalidArgument, func(kv kvv1.KVClient) error {
			_, err := kv.Get(c, &kvv1.GetRequest{Key: []byte("exists"), Consistency: 42})
			return err
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.appliedTotal()
			keysBefore := n.versionCount(t)
			err := tc.call(n.kv)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.code)
			}
			if msg := status.Convert(err).Message(); msg == "" {
				t.Fatal("empty error message")
			}
			if after := n.appliedTotal(); after != before && !tc.inLog {
				t.Fatalf("applied index moved from %d to %d: something was written", before, after)
			}
			if after := n.versionCount(t); after != keysBefore {
				t.Fatalf("stored versions went from %d to %d", keysBefore, after)
			}
		})
	}
	// The key of the failed writes still holds its value, untouched.
	if g := n.get(t, "exists"); string(g.Value) != "v" || g.Version.Hlc != existing.Version.Hlc {
		t.Fatalf("exists = %v", g)
	}
	for _, k := range []string{"big", "k", "missing"} {
		if g := n.get(t, k); g.Found {
			t.Fatalf("%q was written by a failed request", k)
		}
	}

	// A failed CAS carries the current version as a status detail.
	_, err := n.kv.CompareAndSwap(c, &kvv1.CompareAndSwapRequest{Key: []byte("exists"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: &kvv1.Version{Hlc: 1, Site: "local"}}, Value: []byte("x")})
	var conflict *kvv1.CasConflict
	for _, d := range status.Convert(err).Details() {
		if cc, ok := d.(*kvv1.CasConflict); ok {
			conflict = cc
		}
	}
	if conflict == nil || !conflict.Found || conflict.Current.GetHlc() != existing.Version.Hlc {
		t.Fatalf("conflict detail = %v", conflict)
	}
}

func TestScanPagination(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	const total = 3000
	var want []string
	for i := 0; i < total; i++ {
		k := fmt.Sprintf("user/%05d", i)
		n.put(t, k, "v"+k)
		want = append(want, k)
	}
	n.put(t, "other/1", "x")
	n.put(t, "user", "exact-prefix-key-before-range")
	for i := 0; i < total; i += 100 {
		if _, err := n.kv.Delete(ctx(t), &kvv1.DeleteRequest{Key: []byte(fmt.Sprintf("user/%05d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	var live []string
	for i, k := range want {
		if i%100 != 0 {
			live = append(live, k)
		}
	}

	scanAll := func(req *kvv1.ScanRequest) (keys []string, pages int) {
		for {
			resp, err := n.kv.Scan(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, it := range resp.Items {
				keys = append(keys, string(it.Key))
				if !req.KeysOnly && string(it.Value) != "v"+string(it.Key) {
					t.Fatalf("value of %q = %q", it.Key, it.Value)
				}
				if req.KeysOnly && it.Value != nil {
					t.Fatalf("keys-only scan returned a value for %q", it.Key)
				}
			}
			if len(resp.Continuation) == 0 {
				return keys, pages
			}
			if len(resp.Items) != int(req.Limit) {
				t.Fatalf("short page of %d items before the end", len(resp.Items))
			}
			req.Continuation = resp.Continuation
		}
	}
	keys, pages := scanAll(&kvv1.ScanRequest{Prefix: []byte("user/"), Limit: 250})
	if fmt.Sprint(keys) != fmt.Sprint(live) {
		t.Fatalf("prefix scan returned %d keys, want %d (first %v)", len(keys), len(live), keys[:min(5, len(keys))])
	}
	if pages < len(live)/250 {
		t.Fatalf("only %d pages", pages)
	}
	keys, _ = scanAll(&kvv1.ScanRequest{Start: []byte("user/01000"), End: []byte("user/01500"), Limit: 77, KeysOnly: true})
	var wantRange []string
	for _, k := range live {
		if k >= "user/01000" && k < "user/01500" {
			wantRange = append(wantRange, k)
		}
	}
	if fmt.Sprint(keys) != fmt.Sprint(wantRange) {
		t.Fatalf("range scan returned %d keys, want %d", len(keys), len(wantRange))
	}
	// Unbounded scan with the default limit sees everything, in order.
	resp, err := n.kv.Scan(ctx(t), &kvv1.ScanRequest{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Items) != len(live)+2 || string(resp.Items[0].Key) != "other/1" || string(resp.Items[1].Key) != "user" {
		t.Fatalf("full scan: %d items, first %q", len(resp.Items), resp.Items[0].Key)
	}
	// A continuation from another range is refused.
	first, _ := n.kv.Scan(ctx(t), &kvv1.ScanRequest{Prefix: []byte("user/"), Limit: 10})
	if _, err := n.kv.Scan(ctx(t), &kvv1.ScanRequest{Prefix: []byte("other/"), Continuation: first.Continuation}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("foreign continuation: %v", err)
	}
}

// TestScanPagesOfLargeValuesStayUnderTheMessageLimit: a page stops at
// storage.MaxScanPageBytes, below gRPC's default limit of 4 MiB, whatever
// its key limit, and its continuation resumes after its last key without
// skipping the keys of a shard that stopped early. Before, a page held up
// to its limit of keys whatever their values: 20 values of 512 KiB made a
// 10 MiB reply, which clients refused (RESOURCE_EXHAUSTED, retried until
// their deadline), so the scan never got past its first page.
func TestScanPagesOfLargeValuesStayUnderTheMessageLimit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Shards = 2
	n := start(t, cfg)
	// Shard 0 holds the large values and stops each page early; shard 1
	// holds small ones, all of which fit in a page.
	large := bytes.Repeat([]byte("v"), 512<<10)
	var want []string
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("s/%03d", i)
		v := []byte("small")
		if placement.ShardOf([]byte(k), cfg.Shards) == 0 {
			v = large
		}
		if _, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Key: []byte(k), Value: v}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		want = append(want, k)
	}
	var got []string
	req := &kvv1.ScanRequest{Prefix: []byte("s/")}
	for pages := 1; ; pages++ {
		resp, err := n.kv.Scan(ctx(t), req) // the client accepts gRPC's default 4 MiB
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		size := 0
		for _, it := range resp.Items {
			got = append(got, string(it.Key))
			if want := []byte("small"); !bytes.Equal(it.Value, want) && !bytes.Equal(it.Value, large) {
				t.Fatalf("value of %q: %d bytes", it.Key, len(it.Value))
			}
			size += storage.ScanSize(storage.Record{Key: it.Key, Value: it.Value, Version: causal.Version{Site: it.Version.GetSite()}})
		}
		if size > storage.MaxScanPageBytes {
			t.Fatalf("page %d holds %d bytes, more than %d", pages, size, storage.MaxScanPageBytes)
		}
		if len(resp.Continuation) == 0 {
			break
		}
		if pages > len(want) {
			t.Fatalf("no end after %d pages", pages)
		}
		req.Continuation = resp.Continuation
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scan returned %v, want %v", got, want)
	}
}

func TestRequestIDAppliesOnce(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	req := &kvv1.PutRequest{Key: []byte("k"), Value: []byte("v"), Options: &kvv1.WriteOptions{RequestId: &kvv1.RequestID{ClientId: "c1", Seq: 7}}}
	a, err := n.kv.Put(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.kv.Put(ctx(t), req) // a retry
	if err != nil {
		t.Fatal(err)
	}
	if a.Version.Hlc != b.Version.Hlc {
		t.Fatalf("retry got a new version: %v vs %v", a.Version, b.Version)
	}
	h, _ := n.kv.History(ctx(t), &kvv1.HistoryRequest{Key: []byte("k")})
	if len(h.Versions) != 1 {
		t.Fatalf("%d versions after a retried put", len(h.Versions))
	}
	req.Options.RequestId.Seq = 8
	c, err := n.kv.Put(ctx(t), req)
	if err != nil || c.Version.Hlc == a.Version.Hlc {
		t.Fatalf("new seq: %v, %v", c, err)
	}

	// A retried compare-and-swap that applied the first time gets the
	// first outcome, although its expected version is no longer the
	// newest (the swap itself made it old).
	cas := &kvv1.CompareAndSwapRequest{Key: []byte("k"), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: c.Version}, Value: []byte("swapped"),
		Options: &kvv1.WriteOptions{RequestId: &kvv1.RequestID{ClientId: "c1", Seq: 9}}}
	s1, err := n.kv.CompareAndSwap(ctx(t), cas)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := n.kv.CompareAndSwap(ctx(t), cas) // a retry
	if err != nil {
		t.Fatalf("retried swap that applied: %v", err)
	}
	if s1.Version.Hlc != s2.Version.Hlc {
		t.Fatalf("retried swap got a new version: %v vs %v", s1.Version, s2.Version)
	}
}

func TestSnapshotTruncateRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 4
	cfg.Shard.TrailingLogs = 16
	cfg.Shard.SnapshotThreshold = 64
	n := start(t, cfg)
	const total = 1500
	for i := 0; i < total; i++ {
		n.put(t, fmt.Sprintf("k%04d", i), fmt.Sprintf("v%d", i))
	}
	for i := 0; i < total; i += 3 {
		if _, err := n.kv.Delete(ctx(t), &kvv1.DeleteRequest{Key: []byte(fmt.Sprintf("k%04d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.admin.Snapshot(ctx(t), &adminv1.SnapshotRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, g := range n.srv.Groups() {
		st := g.Status()
		if st.LastSnapshotIndex == 0 || st.FirstLogIndex <= 1 {
			t.Fatalf("shard %s: snapshot %d, first log index %d: log not truncated", st.ID, st.LastSnapshotIndex, st.FirstLogIndex)
		}
	}
	// Writes after the snapshot live only in the log.
	n.put(t, "after-snapshot", "yes")
	n.srv.Stop()

	n2 := start(t, cfg)
	check := func(n *node) {
		for i := 0; i < total; i++ {
			g := n.get(t, fmt.Sprintf("k%04d", i))
			if deleted := i%3 == 0; g.Found == deleted || (!deleted && string(g.Value) != fmt.Sprintf("v%d", i)) {
				t.Fatalf("k%04d after restart: %v", i, g)
			}
		}
		if g := n.get(t, "after-snapshot"); string(g.Value) != "yes" {
			t.Fatalf("after-snapshot = %v", g)
		}
	}
	check(n2)
	// New writes after the restart get versions above the old ones.
	old := n2.get(t, "k0001").Version.Hlc
	if p := n2.put(t, "k0001", "new"); p.Version.Hlc <= old {
		t.Fatalf("version went backwards after restart: %d <= %d", p.Version.Hlc, old)
	}
}

func TestRefusesForeignDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "member.wal"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(testConfig(dir), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); !errors.Is(err, ErrForeignDataDir) {
		t.Fatalf("start on foreign dir: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "member.wal")); string(b) != "x" {
		t.Fatal("foreign file modified")
	}

	// A database of another node is refused too.
	dir2 := t.TempDir()
	n := start(t, testConfig(dir2))
	n.srv.Stop()
	cfg := testConfig(dir2)
	cfg.NodeID = "n2"
	srv2, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv2.Start(); !errors.Is(err, storage.ErrForeign) {
		t.Fatalf("start as another node: %v", err)
	}
	// A garbage database file is refused, not overwritten.
	dir3 := t.TempDir()
	garbage := bytes.Repeat([]byte("not a database "), 1000)
	if err := os.WriteFile(filepath.Join(dir3, raftFile), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir3, stateFile), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	srv3, _ := New(testConfig(dir3), quietLogger())
	if err := srv3.Start(); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("start on garbage db: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir3, stateFile)); !bytes.Equal(b, garbage) {
		t.Fatal("garbage database modified")
	}
}

func TestGarbageCollection(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Shard.VersionRetention = time.Millisecond
	cfg.Shard.RequestRetention = time.Millisecond
	n := start(t, cfg)
	for _, v := range []string{"1", "2", "3"} {
		n.put(t, "k", v)
	}
	n.put(t, "gone", "x")
	if _, err := n.kv.Delete(ctx(t), &kvv1.DeleteRequest{Key: []byte("gone")}); err != nil {
		t.Fatal(err)
	}
	history := func(k string) int {
		h, err := n.kv.History(ctx(t), &kvv1.HistoryRequest{Key: []byte(k)})
		if err != nil {
			t.Fatal(err)
		}
		return len(h.Versions)
	}
	waitFor(t, 10*time.Second, "old versions are collected", func() bool {
		for _, g := range n.srv.Groups() {
			if err := g.Collect(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		return history("k") == 1 && history("gone") == 0
	})
	if g := n.get(t, "k"); string(g.Value) != "3" {
		t.Fatalf("newest version lost: %v", g)
	}
	// Nothing left to collect: a pass writes nothing to the log.
	for _, g := range n.srv.Groups() {
		before := g.Status().AppliedIndex
		if err := g.Collect(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if after := g.Status().AppliedIndex; after != before {
			t.Errorf("shard %s: a pass with nothing to collect moved the applied index %d -> %d", g.ID(), before, after)
		}
	}
}

// copyDir copies a data directory (a crash image when the source is live).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRebuildStateAfterReboot: the state database is not fsynced, so after
// a machine restart with the node running it is rebuilt from the raft
// snapshots and logs instead of being read. Simulated by copying a running
// node's data directory, destroying the copy's state.db and starting it
// with another boot id.
func TestRebuildStateAfterReboot(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 4
	cfg.Shard.TrailingLogs = 8
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	for i := 0; i < 400; i++ {
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}
	for i := 0; i < 400; i += 5 {
		if _, err := n.kv.Delete(ctx(t), &kvv1.DeleteRequest{Key: []byte(fmt.Sprintf("k%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.admin.Snapshot(ctx(t), &adminv1.SnapshotRequest{}); err != nil {
		t.Fatal(err)
	}
	for i := 400; i < 500; i++ { // only in the raft log
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}

	crash := t.TempDir()
	copyDir(t, dir, crash)
	if _, err := os.Stat(filepath.Join(crash, stateFile+".open")); err != nil {
		t.Fatalf("a running node has no open marker: %v", err)
	}
	// Whatever a torn state.db holds, it must not be read.
	if err := os.WriteFile(filepath.Join(crash, stateFile), bytes.Repeat([]byte{0xAB}, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	n.srv.Stop()

	// Same boot (a process crash): a damaged state.db is not a torn one
	// but a disk fault; it is moved aside and rebuilt all the same (ADR
	// 021).
	sameDir := t.TempDir()
	copyDir(t, crash, sameDir)
	same := testConfig(sameDir)
	same.Shards, same.BootID = 4, "boot-1"
	n1 := start(t, same)
	if g := n1.getStrong(t, "k499"); string(g.Value) != "v499" {
		t.Fatalf("same boot, damaged state, after the rebuild: k499 = %v", g)
	}
	n1.srv.Stop()
	if _, err := os.Stat(filepath.Join(sameDir, stateFile+damagedSuffix)); err != nil {
		t.Fatalf("same boot: the damaged state.db was not kept aside: %v", err)
	}

	rebooted := testConfig(crash)
	rebooted.Shards, rebooted.BootID = 4, "boot-2"
	n2 := start(t, rebooted)
	for i := 0; i < 500; i++ {
		g := n2.getStrong(t, fmt.Sprintf("k%03d", i))
		deleted := i < 400 && i%5 == 0
		if g.Found == deleted || (!deleted && string(g.Value) != fmt.Sprint("v", i)) {
			t.Fatalf("k%03d after rebuild: %v", i, g)
		}
	}
	h, err := n2.kv.History(ctx(t), &kvv1.HistoryRequest{Key: []byte("k000")})
	if err != nil || len(h.Versions) != 2 || !h.Versions[0].Tombstone {
		t.Fatalf("history after rebuild: %v, %v", h, err)
	}
	// A clean stop removes the marker.
	n2.srv.Stop()
	if _, err := os.Stat(filepath.Join(crash, stateFile+".open")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker after clean stop: %v", err)
	}
}

// TestForeignSessionIsRefused: a session token that names a site this
// cluster does not have (for example the session file of a client that
// talked to another cluster before) is refused at once with
// FailedPrecondition and a message that says to start a new session,
// instead of waiting for a causal past that can never arrive until the
// request times out. A new session still works.
func TestForeignSessionIsRefused(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	foreign := (&causal.Session{Site: "elsewhere", MaxHLC: 1 << 50, Partial: true}).Encode()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.kv.Put(c, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: foreign}, Key: []byte("k"), Value: []byte("v")})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `site "elsewhere"`) || !strings.Contains(err.Error(), "new session") {
		t.Fatalf("put with another cluster's session: %v, want FailedPrecondition naming the site and a new session", err)
	}
	_, err = n.kv.Get(c, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: foreign}, Key: []byte("k")})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("get with another cluster's session: %v, want FailedPrecondition", err)
	}
	n.put(t, "k", "v")
}

// TestLostSessionIsRefused: a session that observed writes of this site
// which the site no longer holds (the node's data directory was deleted
// and the site started afresh under the same name, the usual fate of a
// kvctl session file) is refused at once with FailedPrecondition, instead
// of waiting for versions that can never be applied until the request
// times out. Without a session the key reads as absent.
func TestLostSessionIsRefused(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	resp := n.put(t, "k", "v")
	tok := resp.GetHeader().GetSession()
	if len(tok) == 0 {
		t.Fatal("no session token in the put's answer")
	}
	n.srv.Stop()

	fresh := start(t, testConfig(t.TempDir()))
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := fresh.kv.Get(c, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("k")})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "new session") {
		t.Fatalf("get with a session of the deleted data: %v, want FailedPrecondition saying to start a new session", err)
	}
	if g := fresh.get(t, "k"); g.Found {
		t.Fatalf("k found on a fresh site: %v", g)
	}
}

// TestRefusesDataDirInUse: a second kvd started on the data directory of
// a running one (other ports) is refused at once, before it joins gossip
// under the running node's id, and the running node keeps serving. Once
// the first stops, the directory can be used again.
func TestRefusesDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	n := start(t, testConfig(dir))
	n.put(t, "k", "v")
	srv2, err := New(testConfig(dir), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv2.Start(); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second start on a directory in use: %v", err)
	}
	if srv2.members != nil {
		t.Fatal("the refused node started gossip")
	}
	if g := n.get(t, "k"); string(g.Value) != "v" {
		t.Fatalf("the running node after the refused start: %v", g)
	}
	n.srv.Stop()
	n2 := start(t, testConfig(dir))
	if g := n2.getStrong(t, "k"); string(g.Value) != "v" {
		t.Fatalf("after a restart: %v", g)
	}
}

// TestDrainOfTheOnlyNodeIsRefused: a node that is the only live node of
// its site cannot be drained (its replicas would have nowhere to go, and
// `kvctl node drain --wait` would wait for ever): FailedPrecondition,
// and the node is not marked draining.
func TestDrainOfTheOnlyNodeIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	n := start(t, cfg)
	_, err := n.admin.Drain(ctx(t), &adminv1.DrainRequest{NodeId: cfg.NodeID})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "only live node") {
		t.Fatalf("drain of the only node: %v; want FailedPrecondition", err)
	}
	m, err := n.admin.Members(ctx(t), &adminv1.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mem := range m.GetMembers() {
		if mem.GetDraining() {
			t.Fatalf("%s is draining after a refused drain", mem.GetNodeId())
		}
	}
	// Undoing a drain that never began is harmless.
	if _, err := n.admin.Drain(ctx(t), &adminv1.DrainRequest{NodeId: cfg.NodeID, Undo: true}); err != nil {
		t.Fatalf("undo: %v", err)
	}
}

// TestBatchRepliesStayWithinTheReplyLimit: a BatchGet or GetTxn whose
// values add up to more than Limits.MaxReplyBytes is refused with
// INVALID_ARGUMENT (not built, sent and refused by the client, or retried),
// one key of any size is still served, and the node goes on serving.
func TestBatchRepliesStayWithinTheReplyLimit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Limits.MaxReplyBytes = 1 << 20
	n := start(t, cfg)
	large := bytes.Repeat([]byte("v"), 600<<10)
	keys := [][]byte{[]byte("r/0"), []byte("r/1"), []byte("r/2")}
	// The reads carry the writes' session: a GetTxn without one may be
	// cut at a snapshot from before them.
	var session []byte
	for _, k := range keys {
		resp, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: session}, Key: k, Value: large})
		if err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		session = resp.Header.Session
	}
	hdr := &kvv1.RequestHeader{Session: session}
	if _, err := n.kv.BatchGet(ctx(t), &kvv1.BatchGetRequest{Header: hdr, Keys: keys}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("BatchGet of 1.8 MiB with a 1 MiB reply limit: %v, want InvalidArgument", err)
	} else {
		t.Logf("refused: %v", err)
	}
	if _, err := n.kv.GetTxn(ctx(t), &kvv1.GetTxnRequest{Header: hdr, Keys: keys}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetTxn of 1.8 MiB with a 1 MiB reply limit: %v, want InvalidArgument", err)
	}
	cfgLimits := cfg.Limits
	cfgLimits.MaxReplyBytes = 512 << 10
	if err := cfgLimits.Reply(1, len(large)); err != nil {
		t.Fatalf("one value larger than the reply limit: %v, want it served", err)
	}
	resp, err := n.kv.BatchGet(ctx(t), &kvv1.BatchGetRequest{Header: hdr, Keys: keys[:1]})
	if err != nil || len(resp.Items) != 1 || len(resp.Items[0].Value) != len(large) {
		t.Fatalf("BatchGet of one key: %v", err)
	}
	txn, err := n.kv.GetTxn(ctx(t), &kvv1.GetTxnRequest{Header: hdr, Keys: keys[:1]})
	if err != nil || len(txn.Items) != 1 || !txn.Items[0].Found {
		t.Fatalf("GetTxn of one key: %v", err)
	}
}

// TestHistoryRepliesStayWithinTheReplyLimit: History had no bound on the
// bytes of its reply: a thousand retained versions of a 1 MiB value made a
// reply of a gigabyte, held in the node's memory and beyond what clients
// accept (the Go client's limit is 256 MiB). Like BatchGet and GetTxn, a
// History whose values add up to more than the reply limit is refused
// with INVALID_ARGUMENT, and one version is always served.
func TestHistoryRepliesStayWithinTheReplyLimit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Limits.MaxReplyBytes = 1 << 20
	n := start(t, cfg)
	large := bytes.Repeat([]byte("v"), 600<<10)
	var session []byte
	for range 3 {
		resp, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: session}, Key: []byte("h"), Value: large})
		if err != nil {
			t.Fatal(err)
		}
		session = resp.Header.Session
	}
	hdr := &kvv1.RequestHeader{Session: session}
	_, err := n.kv.History(ctx(t), &kvv1.HistoryRequest{Header: hdr, Key: []byte("h"), Limit: 3})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "reply limit") {
		t.Fatalf("History of 1.8 MiB of versions with a 1 MiB reply limit: %v, want InvalidArgument naming the reply limit", err)
	}
	h, err := n.kv.History(ctx(t), &kvv1.HistoryRequest{Header: hdr, Key: []byte("h"), Limit: 1})
	if err != nil || len(h.Versions) != 1 || len(h.Versions[0].Value) != len(large) {
		t.Fatalf("History of one version: %v", err)
	}
}

// lockedBuffer is an io.Writer safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStopSaysWhatItDoes: a node that stops (SIGTERM) says so first, with
// the bounds of its hand-off and of the requests in flight, before the
// lines of the hand-off and of its components stopping; the operator
// reading the log sees what the node does and for how long at most.
func TestStopSaysWhatItDoes(t *testing.T) {
	var out lockedBuffer
	n := startLogged(t, testConfig(t.TempDir()), slog.New(slog.NewTextHandler(&out, nil)))
	n.srv.Stop()
	log := out.String()
	stopping, stopped := strings.Index(log, "kvd stopping"), strings.Index(log, "kvd stopped")
	if stopping < 0 || stopped < stopping {
		t.Fatalf("the log does not say that the node is stopping before it stopped (at %d and %d):\n%s", stopping, stopped, log)
	}
	if gossip := strings.Index(log, "membership: left"); gossip >= 0 && gossip < stopping {
		t.Errorf("the node left gossip before it said it is stopping:\n%s", log)
	}
}
