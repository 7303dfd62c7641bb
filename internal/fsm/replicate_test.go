package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/storage"
)

func replicate(origin string, closedHLC, closedSeq uint64, ws ...*peerv1.RemoteWrite) *peerv1.Command {
	return &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: origin, Writes: ws, ClosedHlc: closedHLC, ClosedSeq: closedSeq}}}
}

func rw(key, value string, hlc, seq uint64) *peerv1.RemoteWrite {
	return &peerv1.RemoteWrite{Key: []byte(key), Value: []byte(value), Hlc: hlc, Seq: seq}
}

// TestReplicate: remote writes keep their origin's version and apply by
// last-writer-wins (an older one goes into the key's history), they are
// stamped above the shard's newest HLC (which rises to the stamp), duplicates are skipped, a gap or a malformed
// command changes nothing, closes advance the origin's progress, and the
// progress survives a restart.
func TestReplicate(t *testing.T) {
	db := openDB(t, "r.db")
	f, fatals := newFSM(t, db)
	idx := uint64(0)
	apply := func(cmd *peerv1.Command) Result {
		t.Helper()
		idx++
		return f.ApplyBatch([]*raft.Log{logOf(t, idx, cmd)})[0].(Result)
	}
	// A local write at HLC 1000, then s2's older writes to the same key.
	if r := apply(write("a", "local", 1000)); r.Err != nil || r.Version != (causal.Version{HLC: 1000, Site: "s1"}) {
		t.Fatalf("local write: %+v", r)
	}
	r := apply(replicate("s2", 0, 0, rw("a", "old", 500, 1), rw("b", "b1", 600, 2)))
	if r.Err != nil || r.Applied != 2 || r.NextSeq != 3 {
		t.Fatalf("replicate: %+v", r)
	}
	_, maxHLC, _ := f.Applied()
	if maxHLC != 1001 {
		t.Fatalf("newest HLC %d after older remote writes, want 1001 (their stamp)", maxHLC)
	}
	if p, _ := f.Progress("s2"); p != (storage.Progress{HLC: 600, Seq: 2}) {
		t.Fatalf("s2 progress %+v", p)
	}
	latest := func(key string) storage.Record {
		t.Helper()
		var rec storage.Record
		if err := db.View(func(tx *storage.Tx) error {
			s, err := tx.Shard(shardID)
			if err != nil {
				return err
			}
			rec, _, err = s.Latest([]byte(key), false)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := latest("a"); string(rec.Value) != "local" {
		t.Fatalf("a = %q: an older remote write won", rec.Value)
	}
	if rec := latest("b"); rec.Stamp != 1001 {
		t.Fatalf("b's stamp %d, want 1001", rec.Stamp)
	}
	// A duplicate (seq 2) followed by a new write: the duplicate is
	// skipped, the new one wins over the local version.
	r = apply(replicate("s2", 0, 0, rw("b", "b1", 600, 2), rw("a", "new", 2000, 3)))
	if r.Err != nil || r.Applied != 1 || r.Duplicates != 1 || r.NextSeq != 4 {
		t.Fatalf("duplicate + new: %+v", r)
	}
	if rec := latest("a"); string(rec.Value) != "new" || rec.Version != (causal.Version{HLC: 2000, Site: "s2"}) {
		t.Fatalf("a = %q %v, want s2's newer write", rec.Value, rec.Version)
	}
	before := dump(t, db)
	// A gap: seq 5 after 3.
	r = apply(replicate("s2", 0, 0, rw("c", "gap", 2100, 5)))
	if !errors.Is(r.Err, ErrSeqGap) || r.NextSeq != 4 {
		t.Fatalf("gap: %+v", r)
	}
	// Malformed: HLCs not growing, sequence numbers not consecutive, no
	// origin, this site as origin, an HLC at or below the origin's progress.
	for name, cmd := range map[string]*peerv1.Command{
		"hlc not growing":  replicate("s2", 0, 0, rw("c", "x", 2200, 4), rw("c", "y", 2200, 5)),
		"seq skips":        replicate("s2", 0, 0, rw("c", "x", 2200, 4), rw("c", "y", 2300, 6)),
		"no origin":        replicate("", 0, 0, rw("c", "x", 2200, 4)),
		"this site":        replicate("s1", 0, 0, rw("c", "x", 2200, 1)),
		"below progress":   replicate("s2", 0, 0, rw("c", "x", 1500, 4)),
		"close ahead":      replicate("s2", 9000, 7),
		"empty key":        replicate("s2", 0, 0, rw("", "x", 2200, 4)),
		"seq zero":         replicate("s3", 0, 0, rw("c", "x", 2200, 0)),
		"valid then a gap": replicate("s2", 0, 0, rw("c", "x", 2200, 4), rw("c", "y", 2300, 6)),
	} {
		r := apply(cmd)
		if r.Err == nil || !(errors.Is(r.Err, ErrBadReplicate) || errors.Is(r.Err, ErrSeqGap)) {
			t.Fatalf("%s: accepted: %+v", name, r)
		}
	}
	if after := dump(t, db); versionsOf(after) != versionsOf(before) {
		t.Fatalf("refused commands changed the data:\n%s\nwant\n%s", after, before)
	}
	if p, _ := f.Progress("s2"); p != (storage.Progress{HLC: 2000, Seq: 3}) {
		t.Fatalf("s2 progress %+v after refused commands", p)
	}
	// A close at the current sequence number advances the progress; a
	// stale one (earlier sequence) does not.
	if r := apply(replicate("s2", 5000, 3)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := apply(replicate("s2", 9000, 2)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if p, _ := f.Progress("s2"); p != (storage.Progress{HLC: 5000, Seq: 3}) {
		t.Fatalf("s2 progress %+v after closes, want hlc 5000", p)
	}
	// The next write must be above the closed timestamp.
	if r := apply(replicate("s2", 0, 0, rw("c", "x", 4000, 4))); !errors.Is(r.Err, ErrBadReplicate) {
		t.Fatalf("write below the closed timestamp: %+v", r)
	}
	if len(*fatals) != 0 {
		t.Fatalf("fatal: %v", *fatals)
	}
	// The progress is persisted with the data.
	g, _ := newFSM(t, db)
	if p, _ := g.Progress("s2"); p != (storage.Progress{HLC: 5000, Seq: 3}) {
		t.Fatalf("s2 progress %+v after a restart", p)
	}
	if o := g.Origins(); len(o) != 1 {
		t.Fatalf("origins after restart: %v", o)
	}
}

// TestReplicateConverges: two replicas applying the same log, one in one
// batch and one entry by entry, end with equal digests, whatever the mix
// of local writes, remote writes, duplicates and closes.
func TestReplicateConverges(t *testing.T) {
	cmds := []*peerv1.Command{
		write("a", "1", 100),
		replicate("s2", 0, 0, rw("a", "r1", 50, 1), rw("b", "r2", 60, 2)),
		replicate("s3", 0, 0, rw("a", "t1", 150, 1)),
		write("b", "2", 10),
		replicate("s2", 70, 2, rw("b", "r2", 60, 2)),
		replicate("s2", 0, 0, rw("c", "gap", 80, 4)),
		{Op: &peerv1.Command_Close{Close: &peerv1.Close{Hlc: 400}}},
		write("c", "3", 0),
	}
	digest := func(batch bool) storage.Digest {
		db := openDB(t, "c.db")
		f, _ := newFSM(t, db)
		var logs []*raft.Log
		for i, c := range cmds {
			logs = append(logs, logOf(t, uint64(i+1), c))
		}
		if batch {
			f.ApplyBatch(logs)
		} else {
			for _, l := range logs {
				f.ApplyBatch([]*raft.Log{l})
			}
		}
		var d storage.Digest
		if err := db.View(func(tx *storage.Tx) error {
			s, err := tx.Shard(shardID)
			if err != nil {
				return err
			}
			d, err = s.Digest()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := digest(true), digest(false)
	if a != b || a.Origins == 0 || a.MaxHLC != 401 {
		t.Fatalf("digests differ or lack origins: %+v / %+v", a, b)
	}
}

// versionsOf drops the first line (applied index, newest HLC) of a dump.
func versionsOf(dump string) string {
	_, rest, _ := strings.Cut(dump, "\n")
	return rest
}

// TestLateRemoteWriteDoesNotResurrect: a key deleted here, its tombstone
// past the retention window, and another site whose progress is still
// below the tombstone. Garbage collection bounded by that site's progress
// keeps the tombstone, so the site's late write of the key (older than
// the delete) lands in history and the key stays deleted. With the bound
// turned off (guards.GCFrontier), the tombstone is collected and the late
// write brings the key back.
func TestLateRemoteWriteDoesNotResurrect(t *testing.T) {
	db := openDB(t, "gc.db")
	f, _ := newFSM(t, db)
	idx := uint64(0)
	apply := func(cmd *peerv1.Command) Result {
		t.Helper()
		idx++
		r := f.ApplyBatch([]*raft.Log{logOf(t, idx, cmd)})[0].(Result)
		if r.Err != nil {
			t.Fatalf("entry %d: %v", idx, r.Err)
		}
		return r
	}
	apply(replicate("s2", 0, 0, rw("other", "x", 100, 1))) // s2's progress: 100
	apply(write("k", "v", 1000))
	apply(&peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte("k"), Tombstone: true, Hlc: 2000, Site: "s1"}}})
	frontier := uint64(100) // the lowest origin progress, as the leader computes it
	apply(&peerv1.Command{Op: &peerv1.Command_Collect{Collect: &peerv1.Collect{CutoffHlc: 5000, RequestCutoffHlc: 5000, MaxKeys: 100, FrontierHlc: &frontier}}})
	// s2's write of k, made before it saw the delete, arrives late.
	apply(replicate("s2", 0, 0, rw("k", "late", 1500, 2)))
	var rec storage.Record
	if err := db.View(func(tx *storage.Tx) error {
		s, err := tx.Shard(shardID)
		if err != nil {
			return err
		}
		rec, _, err = s.Latest([]byte("k"), false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !rec.Tombstone {
		t.Fatalf("k = %q at %v after a late remote write older than its delete: the deleted key came back", rec.Value, rec.Version)
	}
}
