package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// The model: one register per key holding a value ("" = absent). Values
// are unique, so a CAS on a version is a CAS on the value written with it.
type kvInput struct {
	op       string // put, get, cas
	key      string
	value    string // put, cas: new value
	expected string // cas: value of the expected version
}

type kvOutput struct {
	value   string // get
	ok      bool   // put, cas: definitely applied
	unknown bool   // put, cas: the outcome is unknown (timeout, unavailable)
}

var kvModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(kvInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{""} },
	Step: func(state, input, output interface{}) []interface{} {
		st, in, out := state.(string), input.(kvInput), output.(kvOutput)
		switch in.op {
		case "put":
			if out.unknown {
				return []interface{}{st, in.value}
			}
			return []interface{}{in.value}
		case "get":
			if out.value == st {
				return []interface{}{st}
			}
			return nil
		case "cas":
			switch {
			case out.unknown && st == in.expected:
				return []interface{}{st, in.value}
			case out.unknown:
				return []interface{}{st}
			case out.ok && st == in.expected:
				return []interface{}{in.value}
			case !out.ok && st != in.expected:
				return []interface{}{st}
			}
			return nil
		}
		return nil
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(kvInput), output.(kvOutput)
		return fmt.Sprintf("%s(%s %q exp=%q) -> %+v", in.op, in.key, in.value, in.expected, out)
	},
}

// history records operations; safe for concurrent use.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

func (h *history) add(client int, in kvInput, out kvOutput, call, ret int64) {
	if out.unknown {
		ret = 1 << 62 // may take effect any time after the call
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// definite reports whether a failed write certainly did not apply.
func definite(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound, codes.InvalidArgument:
		return true
	}
	return false
}

// check checks h with porcupine. When h is not linearizable it writes
// porcupine's visualization (an HTML page) and logs its path.
func check(t *testing.T, h *history) porcupine.CheckResult {
	t.Helper()
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(kvModel.ToModel(), ops, 60*time.Second)
	if res != porcupine.Ok {
		dir := os.Getenv("CAUSEWAY_TEST_ARTIFACTS")
		if dir == "" {
			dir = os.TempDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("porcupine-%s-%d.html", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
		if err := porcupine.VisualizePath(kvModel.ToModel(), info, path); err != nil {
			t.Logf("porcupine visualization: %v", err)
		} else {
			t.Logf("porcupine visualization of the history: %s", path)
		}
	}
	return res
}

// completedBetween counts the operations called in [from, to)
// (nanoseconds since the history's start) that completed with a definite
// outcome.
func (h *history) completedBetween(from, to int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, op := range h.ops {
		if op.Call >= from && op.Call < to && op.Return < 1<<62 {
			n++
		}
	}
	return n
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// leaderOf returns the live node leading the shard of key.
func leaderOf(c *Cluster, key string) *Node {
	sh, _ := c.Live()[0].Srv.Router().Shard("default", []byte(key))
	for _, n := range c.Live() {
		if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
			return n
		}
	}
	return nil
}

// runClients runs 6 clients issuing Put, STRONG Get and CAS on keys
// through random live nodes until ctx ends, recording h.
func runClients(ctx context.Context, c *Cluster, h *history, keys []string) *sync.WaitGroup {
	var wg sync.WaitGroup
	for client := 0; client < 6; client++ {
		wg.Add(1)
		go func(client int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(client), 7))
			seen := map[string]*kvv1.Version{}
			seenVal := map[string]string{}
			for i := 0; ctx.Err() == nil; i++ {
				live := c.Live()
				n := live[rng.IntN(len(live))]
				key := keys[rng.IntN(len(keys))]
				val := fmt.Sprintf("c%d-%d", client, i)
				octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
				call := h.now()
				switch r := rng.IntN(10); {
				case r < 4:
					resp, err := n.KV.Get(octx, &kvv1.GetRequest{Key: []byte(key), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
					if err == nil {
						h.add(client, kvInput{op: "get", key: key}, kvOutput{value: string(resp.Value)}, call, h.now())
						seen[key], seenVal[key] = resp.Version, string(resp.Value)
						if !resp.Found {
							seen[key], seenVal[key] = nil, ""
						}
					}
				case r < 7 || seen[key] == nil:
					resp, err := n.KV.Put(octx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(val)})
					h.add(client, kvInput{op: "put", key: key, value: val}, kvOutput{ok: err == nil, unknown: err != nil}, call, h.now())
					if err == nil {
						seen[key], seenVal[key] = resp.Version, val
					}
				default:
					resp, err := n.KV.CompareAndSwap(octx, &kvv1.CompareAndSwapRequest{Key: []byte(key), Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: seen[key]}, Value: []byte(val)})
					h.add(client, kvInput{op: "cas", key: key, value: val, expected: seenVal[key]}, kvOutput{ok: err == nil, unknown: err != nil && !definite(err)}, call, h.now())
					if err == nil {
						seen[key], seenVal[key] = resp.Version, val
					}
				}
				ocancel()
			}
		}(client)
	}
	return &wg
}

// waitOps polls until h holds at least n more operations than it did at
// the call, or fails the test after d.
func waitOps(t *testing.T, h *history, n int, d time.Duration, what string) {
	t.Helper()
	start := h.len()
	poll.Until(t, d, what, func() error {
		if got := h.len() - start; got < n {
			return fmt.Errorf("%d of %d operations", got, n)
		}
		return nil
	})
}

// TestLinearizablePutStrongGetCAS: 6 clients run Put, STRONG Get and CAS
// through every node while the site goes through two faults: the leader
// of a key's shard is cut off from every other node while clients still
// reach it (a deposed leader that is alive), then healed; then the leader
// of a key's shard is killed. The whole history must be linearizable, and
// enough operations must have completed, after each fault too, for the
// check to mean something.
func TestLinearizablePutStrongGetCAS(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const (
		minOps      = 1000 // checked operations in all
		minPerPhase = 100  // operations completed after each fault
	)
	c := New(t, 4, nil)
	h := &history{start: time.Now()}
	keys := []string{"lin/a", "lin/b", "lin/c"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := runClients(ctx, c, h, keys)
	waitOps(t, h, 500, time.Minute, "before the faults")

	// Fault 1: isolate the leader of keys[0]'s shard for 2 s (below the
	// failure detector's dead time, so the site does not move replicas).
	isolated := leaderOf(c, keys[0])
	if isolated == nil {
		t.Fatal("no leader for " + keys[0])
	}
	partitionAt := h.now()
	c.Isolate(isolated)
	t.Logf("isolated %s, leader of %s's shard", isolated.ID, keys[0])
	time.Sleep(2 * time.Second) // hold the fault; the clients keep going
	c.Heal()
	healAt := h.now()
	waitOps(t, h, 300, time.Minute, "after healing")

	// Fault 2: kill the (new) leader of keys[1]'s shard.
	killed := leaderOf(c, keys[1])
	if killed == nil {
		t.Fatal("no leader for " + keys[1])
	}
	killAt := h.now()
	c.Kill(killed)
	t.Logf("killed %s, leader of %s's shard", killed.ID, keys[1])
	waitOps(t, h, 500, time.Minute, "after the kill")
	cancel()
	wg.Wait()

	total, end := h.len(), h.now()
	during, afterHeal, afterKill := h.completedBetween(partitionAt, healAt), h.completedBetween(healAt, killAt), h.completedBetween(killAt, end)
	t.Logf("%d operations checked: %d completed while %s was isolated, %d after healing, %d after the kill", total, during, isolated.ID, afterHeal, afterKill)
	if total < minOps || afterHeal < minPerPhase || afterKill < minPerPhase {
		t.Fatalf("too few operations to mean something: %d in all (want %d), %d after healing and %d after the kill (want %d each)", total, minOps, afterHeal, afterKill, minPerPhase)
	}
	if res := check(t, h); res != porcupine.Ok {
		t.Fatalf("history of %d operations is not linearizable (%v)", total, res)
	}
}
