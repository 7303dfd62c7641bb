package rpc

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte("abc"), []byte("abd")},
		{[]byte("ab\xff"), []byte("ac")},
		{[]byte("\xff\xff"), nil},
		{[]byte{0}, []byte{1}},
	} {
		if got := PrefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestErrorTable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{ErrEmptyKey, codes.InvalidArgument},
		{causal.ErrMalformedToken, codes.InvalidArgument},
		{router.ErrUnknownKeyspace, codes.NotFound},
		{fsm.ErrVersionMismatch, codes.FailedPrecondition},
		{fsm.ErrKeyExists, codes.AlreadyExists},
		{shard.ErrNotLeader, codes.Unavailable},
		{router.ErrCausalWait, codes.DeadlineExceeded},
		{router.ErrSessionMoved, codes.Unavailable},
		{errors.New("disk on fire"), codes.Internal},
	} {
		if got := status.Code(toStatus(c.err)); got != c.want {
			t.Errorf("%v -> %v, want %v", c.err, got, c.want)
		}
	}
}

func TestContinuationRoundTrip(t *testing.T) {
	for _, k := range [][]byte{{}, []byte("a"), {0, 0xff, 0}} {
		got, err := DecodeContinuation(EncodeContinuation(k))
		if err != nil || !bytes.Equal(got, k) {
			t.Fatalf("%q -> %q, %v", k, got, err)
		}
	}
	tok := EncodeContinuation([]byte("key"))
	tok[4] ^= 1
	if _, err := DecodeContinuation(tok); !errors.Is(err, ErrBadContinuation) {
		t.Fatalf("corrupt token: %v", err)
	}
}

// TestScanRejectsContinuationBeyondTheKeyLimit: a continuation resumes
// after the last key of a page, which is within the key limit; one that
// carries a longer key was not issued by a node and is refused rather than
// sent to every shard as the start of the scan.
func TestScanRejectsContinuationBeyondTheKeyLimit(t *testing.T) {
	l := DefaultLimits()
	if _, err := l.Scan(&kvv1.ScanRequest{Continuation: EncodeContinuation(bytes.Repeat([]byte("k"), l.MaxKeyBytes))}); err != nil {
		t.Fatalf("continuation after a key of the largest size: %v", err)
	}
	_, err := l.Scan(&kvv1.ScanRequest{Continuation: EncodeContinuation(bytes.Repeat([]byte("k"), l.MaxKeyBytes+1))})
	if !errors.Is(err, ErrBadContinuation) || status.Code(toStatus(err)) != codes.InvalidArgument {
		t.Fatalf("continuation after a key over the limit: %v, want InvalidArgument", err)
	}
}

// FuzzScanRequest: any scan request either fails with a validation error or
// yields a well-formed range whose limit is within bounds.
func FuzzScanRequest(f *testing.F) {
	f.Add([]byte("p"), []byte{}, []byte{}, uint32(0), []byte{}, int32(0))
	f.Add([]byte{}, []byte("a"), []byte("b"), uint32(10), EncodeContinuation([]byte("a")), int32(2))
	f.Add([]byte{0xff}, []byte{}, []byte{}, uint32(20000), []byte("SC\x01"), int32(7))
	l := DefaultLimits()
	f.Fuzz(func(t *testing.T, prefix, start, end []byte, limit uint32, cont []byte, cons int32) {
		sr, err := l.Scan(&kvv1.ScanRequest{Prefix: prefix, Start: start, End: end, Limit: limit, Continuation: cont, Consistency: kvv1.Consistency(cons)})
		if err != nil {
			if status.Code(toStatus(err)) != codes.InvalidArgument {
				t.Fatalf("validation error maps to %v: %v", status.Code(toStatus(err)), err)
			}
			return
		}
		if sr.limit < 1 || sr.limit > l.MaxScanLimit {
			t.Fatalf("limit %d", sr.limit)
		}
		if len(sr.end) > 0 && bytes.Compare(sr.start, sr.end) >= 0 && len(cont) == 0 {
			t.Fatalf("empty range [%q, %q) accepted", sr.start, sr.end)
		}
		if len(prefix) > 0 && !bytes.HasPrefix(sr.start, prefix) {
			t.Fatalf("prefix scan starts at %q outside %q", sr.start, prefix)
		}
	})
}

// FuzzWriteRequest: key, value and option validation never panics and
// accepts exactly what the limits allow.
func FuzzWriteRequest(f *testing.F) {
	f.Add([]byte("k"), 10, int32(1), uint32(0), "c", uint64(1))
	f.Add([]byte{}, 0, int32(2), uint32(3), "", uint64(0))
	l := DefaultLimits()
	l.MaxKeyBytes, l.MaxValueBytes = 64, 128
	f.Fuzz(func(t *testing.T, key []byte, valueLen int, durability int32, minSites uint32, clientID string, seq uint64) {
		if valueLen < 0 || valueLen > 1024 {
			return
		}
		kerr := l.Key(key)
		if (kerr == nil) != (len(key) > 0 && len(key) <= 64) {
			t.Fatalf("key of %d bytes: %v", len(key), kerr)
		}
		verr := l.Value(make([]byte, valueLen))
		if (verr == nil) != (valueLen <= 128) {
			t.Fatalf("value of %d bytes: %v", valueLen, verr)
		}
		o := &kvv1.WriteOptions{Durability: kvv1.Durability(durability), MinSites: minSites}
		if clientID != "" || seq != 0 {
			o.RequestId = &kvv1.RequestID{ClientId: clientID, Seq: seq}
		}
		if err := l.WriteOptions(o, 1); err != nil && status.Code(toStatus(err)) != codes.InvalidArgument {
			t.Fatalf("options error maps to %v", status.Code(toStatus(err)))
		}
	})
}

func FuzzDecodeContinuation(f *testing.F) {
	f.Add(EncodeContinuation([]byte("k")))
	f.Add([]byte("SC\x01\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, tok []byte) {
		k, err := DecodeContinuation(tok)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeContinuation(k), tok) {
			t.Fatalf("token %q decoded to %q which encodes differently", tok, k)
		}
	})
}

func TestWriteOptionsSitesMessages(t *testing.T) {
	l := DefaultLimits()
	sites := func(n uint32) *kvv1.WriteOptions {
		return &kvv1.WriteOptions{Durability: kvv1.Durability_DURABILITY_SITES, MinSites: n}
	}
	for _, c := range []struct {
		o     *kvv1.WriteOptions
		sites int
		want  string // "" for accepted
	}{
		{sites(0), 0, "durability SITES(0): at least 1 site is required"},
		{sites(0), 1, "durability SITES(0): at least 1 site is required"},
		{sites(3), 2, "durability SITES(3): the keyspace has 2 site(s)"},
		{sites(2), 2, ""},
		{sites(5), 0, ""}, // the site count is not known here: the router checks it
	} {
		err := l.WriteOptions(c.o, c.sites)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("SITES(%d) with %d sites: %v", c.o.MinSites, c.sites, err)
		case c.want != "" && (err == nil || !strings.HasSuffix(err.Error(), c.want) || status.Code(toStatus(err)) != codes.InvalidArgument):
			t.Errorf("SITES(%d) with %d sites: %v, want InvalidArgument ending %q", c.o.MinSites, c.sites, err, c.want)
		}
	}
}

// TestRecentKeyspaceIsRetryable: a keyspace the router has not learned
// yet but that exists (created moments ago: router.Config.Recent) is
// UNAVAILABLE, which clients retry, and still says it is an unknown
// keyspace; one no site holds is NOT_FOUND. Before, both were NOT_FOUND,
// and a read at another site right after the keyspace's creation failed
// at once although its message said to retry.
func TestRecentKeyspaceIsRetryable(t *testing.T) {
	r := router.New(router.Config{Site: "s2", NodeID: "b1", Recent: func(ks string) bool { return ks == "orders" }}, map[string]uint32{"default": 4}, nil, nil, nil, nil, nil, nil)
	_, err := r.Shard("orders", []byte("k"))
	st := status.Convert(toStatus(err))
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), `unknown keyspace "orders"`) || !strings.Contains(st.Message(), "retry in a moment") {
		t.Fatalf("a keyspace created moments ago: %v, want UNAVAILABLE saying to retry", st)
	}
	_, err = r.Shard("nope", []byte("k"))
	if got := status.Code(toStatus(err)); got != codes.NotFound {
		t.Fatalf("a keyspace no site holds: %v, want NOT_FOUND", got)
	}
}
