package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/storage"
)

func setChain(capBytes uint64, sites ...string) *peerv1.Command {
	return &peerv1.Command{Op: &peerv1.Command_SetChain{SetChain: &peerv1.SetChain{Sites: sites, LogCapBytes: capBytes}}}
}

func stable(origin string, seq, hlc uint64) *peerv1.Command {
	return &peerv1.Command{Op: &peerv1.Command_Stable{Stable: &peerv1.Stable{Origin: origin, Seq: seq, Hlc: hlc}}}
}

// outbound returns origin's outbound entries as decoded updates.
func outbound(t *testing.T, db *storage.DB, origin string) []*peerv1.RemoteWrite {
	t.Helper()
	var out []*peerv1.RemoteWrite
	if err := db.View(func(tx *storage.Tx) error {
		s, err := tx.Shard(shardID)
		if err != nil {
			return err
		}
		es, _, _, err := s.ReadOutbound(origin, 0, 1<<20, 1<<30)
		for _, e := range es {
			u := &peerv1.RemoteWrite{}
			if err := proto.Unmarshal(e.Update, u); err != nil {
				return err
			}
			out = append(out, u)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChainOutboundLog: with a chain, this site's writes and the writes of
// origins it is not the last site for enter the outbound log in the apply
// transaction, with their sequence numbers and dependencies; the tail's
// writes do not; Stable trims; the cap drops the oldest; a snapshot and a
// restart carry it all; a write after a newer remote version of its key
// supersedes it.
func TestChainOutboundLog(t *testing.T) {
	db := openDB(t, "c.db")
	f, _ := newFSM(t, db) // site s1
	idx := uint64(0)
	apply := func(cmd *peerv1.Command) Result {
		t.Helper()
		idx++
		return f.ApplyBatch([]*raft.Log{logOf(t, idx, cmd)})[0].(Result)
	}
	// No chain: no outbound log, no sequence numbers.
	if r := apply(write("a", "v0", 100)); r.Err != nil || r.Seq != 0 {
		t.Fatalf("write without chain: %+v", r)
	}
	if r := apply(setChain(0, "s1", "s1")); r.Err == nil {
		t.Fatal("a chain naming a site twice was accepted")
	}
	apply(setChain(0, "s1", "s2", "s3"))
	w := write("a", "v1", 200)
	w.GetWrite().Deps = []*peerv1.Dependency{{Keyspace: "default", Shard: 3, Origin: "s2", Hlc: 42}}
	if r := apply(w); r.Err != nil || r.Seq != 1 {
		t.Fatalf("write with chain: %+v", r)
	}
	apply(write("b", "v2", 300))
	got := outbound(t, db, "s1")
	if len(got) != 2 || got[0].Seq != 1 || string(got[0].Value) != "v1" || len(got[0].Deps) != 1 || got[0].Deps[0].Hlc != 42 || got[1].Seq != 2 {
		t.Fatalf("s1's outbound log: %v", got)
	}
	// s3 -> s1 -> s2: s1 forwards s3's writes; s2 -> s3 -> s1: s1 is
	// s2's tail.
	if r := apply(replicate("s3", 0, 0, rw("c", "from-s3", 400, 1))); r.Err != nil || r.Applied != 1 {
		t.Fatalf("replicate s3: %+v", r)
	}
	if r := apply(replicate("s2", 0, 0, rw("d", "from-s2", 500, 1))); r.Err != nil || r.Applied != 1 {
		t.Fatalf("replicate s2: %+v", r)
	}
	if got := outbound(t, db, "s3"); len(got) != 1 || string(got[0].Value) != "from-s3" {
		t.Fatalf("s3's writes are not forwarded: %v", got)
	}
	if got := outbound(t, db, "s2"); len(got) != 0 {
		t.Fatalf("the tail of s2's chain keeps s2's writes: %v", got)
	}
	// A remote write far ahead (a fast clock), then a local write of the
	// same key: the local one is newer.
	apply(replicate("s3", 0, 0, rw("a", "ahead", 9000, 2)))
	if r := apply(write("a", "after", 600)); r.Version.HLC <= 9000 {
		t.Fatalf("a write after a newer remote version got %v", r.Version)
	}
	// Stable trims.
	if r := apply(stable("s1", 2, 300)); r.Removed != 2 {
		t.Fatalf("stable removed %d entries, want 2", r.Removed)
	}
	if got := outbound(t, db, "s1"); len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("after trim: %v", got)
	}
	g := f.Geo()
	if g.Stable["s1"] != (storage.Progress{HLC: 300, Seq: 2}) || g.Local.Seq != 3 || len(g.Chain) != 3 {
		t.Fatalf("geo state %+v", g)
	}
	// A restart reads it all back.
	before := dump(t, db)
	var digest storage.Digest
	_ = db.View(func(tx *storage.Tx) error { s, _ := tx.Shard(shardID); digest, _ = s.Digest(); return nil })
	f2, _ := newFSM(t, db)
	if g2 := f2.Geo(); g2.Local.Seq != 3 || g2.Stable["s1"] != g.Stable["s1"] || len(g2.Chain) != 3 {
		t.Fatalf("after restart: %+v", g2)
	}
	// A snapshot carries the outbound log.
	var buf bytes.Buffer
	if err := db.View(func(tx *storage.Tx) error { return tx.WriteShardSnapshot(shardID, &buf) }); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, "c2.db")
	f3, _ := newFSM(t, db2)
	if err := f3.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if after := dump(t, db2); after != before {
		t.Fatal("the restored shard differs")
	}
	var digest2 storage.Digest
	_ = db2.View(func(tx *storage.Tx) error { s, _ := tx.Shard(shardID); digest2, _ = s.Digest(); return nil })
	if digest2.Outbound != digest.Outbound || digest2.Origins != digest.Origins || digest.Outbound == 0 {
		t.Fatalf("restored digest %+v, want %+v", digest2, digest)
	}
	if g3 := f3.Geo(); g3.Local.Seq != 3 || len(outbound(t, db2, "s3")) != 2 {
		t.Fatalf("restored geo state %+v", g3)
	}
	// The cap: a small cap keeps only the newest entries.
	apply(setChain(60, "s1", "s2", "s3"))
	for i := 0; i < 10; i++ {
		apply(write("k", "0123456789", 10000+uint64(i)))
	}
	var size uint64
	_ = db.View(func(tx *storage.Tx) error { s, _ := tx.Shard(shardID); size = s.OriginOutboundBytes("s1"); return nil })
	if size > 60 {
		t.Fatalf("s1's outbound entries hold %d bytes over a cap of 60", size)
	}
	if got := outbound(t, db, "s1"); len(got) == 0 || got[len(got)-1].Seq != 13 {
		t.Fatalf("the cap dropped the newest entries: %v", got)
	}
	// One site: no chain, the log is emptied.
	apply(setChain(0, "s1"))
	if got := outbound(t, db, "s1"); len(got) != 0 {
		t.Fatalf("a one-site chain keeps %d entries", len(got))
	}
	if r := apply(write("z", "v", 20000)); r.Seq != 0 {
		t.Fatalf("write without chain got seq %d", r.Seq)
	}
}

// TestRepairRecords: repaired versions merge by last-writer-wins and raise
// other origins' progress, never this site's own; a mark of this site's
// own writes above its sequence (its replica was rebuilt) moves its next
// sequence number past it.
func TestRepairRecords(t *testing.T) {
	db := openDB(t, "r.db")
	f, _ := newFSM(t, db)
	idx := uint64(0)
	apply := func(cmd *peerv1.Command) Result {
		t.Helper()
		idx++
		return f.ApplyBatch([]*raft.Log{logOf(t, idx, cmd)})[0].(Result)
	}
	apply(write("a", "new", 1000))
	r := apply(&peerv1.Command{Op: &peerv1.Command_Repair{Repair: &peerv1.RepairRecords{
		Records: []*peerv1.RepairRecord{{Key: []byte("a"), Value: []byte("old"), Hlc: 500, Site: "s2"}, {Key: []byte("b"), Value: []byte("b"), Hlc: 700, Site: "s2"}},
		Origins: []*peerv1.RepairProgressMark{{Origin: "s2", Seq: 9, Hlc: 700}, {Origin: "s1", Seq: 99, Hlc: 99999}},
	}}})
	if r.Err != nil || r.Applied != 2 || r.Superseded != 1 {
		t.Fatalf("repair: %+v", r)
	}
	if p, _ := f.Progress("s2"); p != (storage.Progress{HLC: 700, Seq: 9}) {
		t.Fatalf("s2 progress %+v", p)
	}
	if p, _ := f.Progress("s1"); p != (storage.Progress{}) {
		t.Fatalf("a repair set this site's own progress: %+v", p)
	}
	if g := f.Geo(); g.Local.Seq != 99 {
		t.Fatalf("local sequence after a repair marking 99 of this site's writes: %d", g.Local.Seq)
	}
	// s2's next write continues after the repaired progress.
	if r := apply(replicate("s2", 0, 0, rw("c", "c", 800, 10))); r.Err != nil || r.Applied != 1 {
		t.Fatalf("replicate after repair: %+v", r)
	}
	_ = causal.Version{}
}

// TestRepairJoinMarks: the last command of a site's join repair marks the
// shard (docs/adr/019); the mark is kept in the shard's state, so a
// replica opened again on it has it, and an older join's mark does not
// replace a newer one.
func TestRepairJoinMarks(t *testing.T) {
	db := openDB(t, "j.db")
	f, _ := newFSM(t, db)
	idx := uint64(0)
	apply := func(cmd *peerv1.Command) Result {
		t.Helper()
		idx++
		return f.ApplyBatch([]*raft.Log{logOf(t, idx, cmd)})[0].(Result)
	}
	repair := func(from string, version uint64, recs ...*peerv1.RepairRecord) *peerv1.Command {
		return &peerv1.Command{Op: &peerv1.Command_Repair{Repair: &peerv1.RepairRecords{Records: recs, JoinFrom: from, JoinVersion: version}}}
	}
	if r := apply(repair("", 0, &peerv1.RepairRecord{Key: []byte("a"), Value: []byte("a"), Hlc: 500, Site: "s2"})); r.Err != nil {
		t.Fatalf("repair: %+v", r)
	}
	if m := f.Geo().JoinMarks; len(m) != 0 {
		t.Fatalf("a repair without a join mark marked %v", m)
	}
	before := f.Geo().JoinMarks
	if r := apply(repair("s2", 7)); r.Err != nil {
		t.Fatalf("join mark: %+v", r)
	}
	apply(repair("s3", 9))
	apply(repair("s2", 5))
	if m := f.Geo().JoinMarks; m["s2"] != 7 || m["s3"] != 9 || len(m) != 2 {
		t.Fatalf("join marks %v, want s2:7 s3:9", m)
	}
	if len(before) != 0 {
		t.Fatalf("a mark changed the marks an earlier Geo returned: %v", before)
	}
	again, _ := newFSM(t, db)
	if m := again.Geo().JoinMarks; m["s2"] != 7 || m["s3"] != 9 || len(m) != 2 {
		t.Fatalf("join marks after opening the shard again: %v", m)
	}
}
