package fsm

import (
	"encoding/binary"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/storage"
)

// apply dispatches one command. A returned error is a storage failure; a
// decided outcome is in the Result.
func apply(s *storage.ShardTx, cmd *peerv1.Command, st *state) (Result, error) {
	switch op := cmd.Op.(type) {
	case *peerv1.Command_Write:
		return applyWrite(s, op.Write, st)
	case *peerv1.Command_Replicate:
		return applyReplicate(s, op.Replicate, st)
	case *peerv1.Command_Collect:
		c := op.Collect
		next, removed, err := s.Collect(CollectCutoff(c), c.RequestCutoffHlc, c.StartKey, int(c.MaxKeys))
		return Result{Next: next, Removed: removed}, err
	case *peerv1.Command_Close:
		if op.Close.Hlc > st.maxHLC {
			st.maxHLC = op.Close.Hlc
		}
		return Result{}, nil
	case *peerv1.Command_SetChain:
		return applySetChain(s, op.SetChain, st)
	case *peerv1.Command_Stable:
		return applyStable(s, op.Stable, st)
	case *peerv1.Command_Repair:
		return applyRepair(s, op.Repair, st)
	case *peerv1.Command_DigestCheck:
		// Nothing to write: ApplyBatch hands the state as of this entry
		// to the Digest hook.
		return Result{}, nil
	default:
		return Result{}, fmt.Errorf("%w: %T", ErrUnknownCommand, cmd.Op)
	}
}

func applyWrite(s *storage.ShardTx, w *peerv1.Write, st *state) (Result, error) {
	maxHLC := &st.maxHLC
	if w.ClientId != "" {
		out, ok, err := s.Request(w.ClientId, w.Seq)
		if err != nil {
			return Result{}, err
		}
		if ok {
			return decodeOutcome(out), nil
		}
	}
	cur, found, err := s.Latest(w.Key, true)
	if err != nil {
		return Result{}, err
	}
	live := found && !cur.Tombstone
	if c := w.Condition; c != nil {
		switch c.Kind {
		case peerv1.Condition_KIND_VERSION:
			want := causal.Version{HLC: c.Hlc, Site: c.Site}
			if !live {
				return Result{Err: ErrKeyNotFound, Current: cur.Version}, nil
			}
			if cur.Version != want {
				return Result{Err: ErrVersionMismatch, Current: cur.Version, CurrentFound: true}, nil
			}
		case peerv1.Condition_KIND_ABSENT:
			if live {
				return Result{Err: ErrKeyExists, Current: cur.Version, CurrentFound: true}, nil
			}
		default:
			return Result{}, fmt.Errorf("%w: condition kind %d", ErrUnknownCommand, c.Kind)
		}
	}
	// Versions grow with the log: above the proposer's reading and above
	// everything this shard has applied.
	// And above the key's newest version, which may come from another
	// site whose clock runs ahead: a write after it supersedes it
	// everywhere (last-writer-wins).
	hlc := w.Hlc
	if hlc <= *maxHLC {
		hlc = *maxHLC + 1
	}
	if found && hlc <= cur.Version.HLC {
		hlc = cur.Version.HLC + 1
	}
	v := causal.Version{HLC: hlc, Site: w.Site}
	if err := s.Put(storage.Record{Key: w.Key, Version: v, Value: w.Value, Tombstone: w.Tombstone}); err != nil {
		return Result{}, err
	}
	*maxHLC = hlc
	r := Result{Version: v, Existed: live}
	if st.forwards(st.site) {
		st.localSeq++
		r.Seq = st.localSeq
		u := &peerv1.RemoteWrite{Key: w.Key, Value: w.Value, Tombstone: w.Tombstone, Hlc: hlc, Seq: r.Seq, Deps: w.Deps}
		if err := appendOutbound(s, st, st.site, u); err != nil {
			return Result{}, err
		}
		if err := s.SetLocalSeq(st.localSeq); err != nil {
			return Result{}, err
		}
	}
	if w.ClientId != "" {
		if err := s.PutRequest(w.ClientId, w.Seq, hlc, encodeOutcome(r)); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// applyReplicate applies another site's writes in its order (see
// peerv1.Replicate). The command is checked whole before anything is
// written, so a refused command changes nothing.
func applyReplicate(s *storage.ShardTx, r *peerv1.Replicate, st *state) (Result, error) {
	if r.Origin == "" || r.Origin == st.site {
		return Result{Err: fmt.Errorf("%w: origin %q is not another site", ErrBadReplicate, r.Origin)}, nil
	}
	p := st.origins[r.Origin]
	res := Result{NextSeq: p.Seq + 1}
	first := -1 // the first write not applied yet
	for i, w := range r.Writes {
		if i > 0 && (w.Seq != r.Writes[i-1].Seq+1 || w.Hlc <= r.Writes[i-1].Hlc) {
			return Result{Err: fmt.Errorf("%w: write %d of %s: sequence %d, hlc %d after sequence %d, hlc %d", ErrBadReplicate, i, r.Origin, w.Seq, w.Hlc, r.Writes[i-1].Seq, r.Writes[i-1].Hlc), NextSeq: p.Seq + 1}, nil
		}
		if len(w.Key) == 0 || w.Hlc == 0 || w.Seq == 0 {
			return Result{Err: fmt.Errorf("%w: write %d of %s: empty key, hlc or sequence", ErrBadReplicate, i, r.Origin), NextSeq: p.Seq + 1}, nil
		}
		if w.Seq <= p.Seq {
			res.Duplicates++
			continue
		}
		if first < 0 {
			first = i
			if w.Seq != p.Seq+1 {
				return Result{Err: fmt.Errorf("%w: %s sent sequence %d, expected %d", ErrSeqGap, r.Origin, w.Seq, p.Seq+1), NextSeq: p.Seq + 1}, nil
			}
			if w.Hlc <= p.HLC {
				return Result{Err: fmt.Errorf("%w: %s sent hlc %d at sequence %d, not above its progress %d", ErrBadReplicate, r.Origin, w.Hlc, w.Seq, p.HLC), NextSeq: p.Seq + 1}, nil
			}
		}
	}
	last := p.Seq
	if n := len(r.Writes); n > 0 && r.Writes[n-1].Seq > last {
		last = r.Writes[n-1].Seq
	}
	if r.ClosedHlc != 0 && r.ClosedSeq > last {
		return Result{Err: fmt.Errorf("%w: %s closed sequence %d, expected at most %d", ErrSeqGap, r.Origin, r.ClosedSeq, last), NextSeq: p.Seq + 1}, nil
	}
	if first >= 0 {
		forward := st.forwards(r.Origin)
		stamp := st.stamp(r.LocalHlc)
		for _, w := range r.Writes[first:] {
			v := causal.Version{HLC: w.Hlc, Site: r.Origin}
			superseded, err := putLWW(s, storage.Record{Key: w.Key, Version: v, Value: w.Value, Tombstone: w.Tombstone, Stamp: stamp})
			if err != nil {
				return Result{}, err
			}
			if superseded {
				res.Superseded++
			}
			if forward {
				if err := appendOutbound(s, st, r.Origin, w); err != nil {
					return Result{}, err
				}
			}
			res.Applied++
			p = storage.Progress{HLC: max(p.HLC, w.Hlc), Seq: w.Seq}
		}
	}
	// A close at an earlier sequence number is covered by the writes
	// after it, whose HLCs are larger.
	if r.ClosedHlc > p.HLC && r.ClosedSeq == p.Seq {
		p.HLC = r.ClosedHlc
	}
	if p != st.origins[r.Origin] {
		if err := s.SetOrigin(r.Origin, p); err != nil {
			return Result{}, err
		}
		st.setOrigin(r.Origin, p)
	}
	res.NextSeq = p.Seq + 1
	return res, nil
}

// Outcome of a deduplicated request: hlc (8 bytes BE) | flags (1 byte:
// bit 0 existed, bit 1 an outbound sequence number follows) | [seq (8
// bytes BE)] | site. Records of earlier releases hold flags 0 or 1 and no
// sequence number. The sequence number lets a retried SITES(n) or ALL
// write wait for the sites like its first attempt did.
const (
	outcomeExisted = 1 << 0
	outcomeSeq     = 1 << 1
)

func encodeOutcome(r Result) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 17+len(r.Version.Site)), r.Version.HLC)
	var flags byte
	if r.Existed {
		flags |= outcomeExisted
	}
	if r.Seq != 0 {
		flags |= outcomeSeq
	}
	b = append(b, flags)
	if r.Seq != 0 {
		b = binary.BigEndian.AppendUint64(b, r.Seq)
	}
	return append(b, r.Version.Site...)
}

func decodeOutcome(b []byte) Result {
	if len(b) < 9 {
		return Result{}
	}
	r := Result{Version: causal.Version{HLC: binary.BigEndian.Uint64(b)}, Existed: b[8]&outcomeExisted != 0}
	rest := b[9:]
	if b[8]&outcomeSeq != 0 {
		if len(rest) < 8 {
			return Result{}
		}
		r.Seq = binary.BigEndian.Uint64(rest)
		rest = rest[8:]
	}
	r.Version.Site = string(rest)
	return r
}

// stamp returns the stamp of versions of other sites applied now: above
// everything the shard applied (so a replica whose newest HLC reached it
// applied them) and at least the proposer's local HLC (which observed
// their dependencies' stamps at this site). The shard's newest HLC rises
// to it.
func (st *state) stamp(local uint64) uint64 {
	stamp := max(local, st.maxHLC+1)
	st.maxHLC = stamp
	return stamp
}

// putLWW stores a version made elsewhere and reports whether the key
// already had a newer one (the version then only joins its history).
func putLWW(s *storage.ShardTx, r storage.Record) (superseded bool, err error) {
	cur, found, err := s.Latest(r.Key, true)
	if err != nil {
		return false, err
	}
	if found && !cur.Version.Less(r.Version) {
		// Held already (anti-entropy resends what a site has)? Keep its
		// stamp, so that it stays below what was applied after it.
		if old, ok, err := s.LatestAt(r.Key, r.Version.HLC); err != nil {
			return false, err
		} else if ok && old.Version == r.Version {
			return false, nil
		}
	}
	if err := s.Put(r); err != nil {
		return false, err
	}
	return found && r.Version.Less(cur.Version), nil
}

// appendOutbound adds an update of origin to the outbound log, then holds
// the log to its cap.
func appendOutbound(s *storage.ShardTx, st *state, origin string, u *peerv1.RemoteWrite) error {
	b, err := proto.Marshal(u)
	if err != nil {
		return err
	}
	if err := s.AppendOutbound(origin, u.Seq, b); err != nil {
		return err
	}
	_, err = s.CapOutbound(origin, st.capBytes)
	return err
}

// applySetChain sets the shard's chain of sites. A chain of fewer than two
// sites removes the chain and empties the outbound log.
func applySetChain(s *storage.ShardTx, c *peerv1.SetChain, st *state) (Result, error) {
	seen := map[string]bool{}
	for _, site := range c.Sites {
		if site == "" || seen[site] {
			return Result{Err: fmt.Errorf("%w: chain %q", ErrBadReplicate, c.Sites)}, nil
		}
		seen[site] = true
	}
	if len(c.Sites) < 2 {
		if st.chain == nil {
			return Result{}, nil
		}
		st.chain, st.capBytes = nil, 0
		if err := s.SetChain(storage.Chain{}); err != nil {
			return Result{}, err
		}
		return Result{}, s.ClearOutbound()
	}
	st.chain, st.capBytes = append([]string(nil), c.Sites...), c.LogCapBytes
	return Result{}, s.SetChain(storage.Chain{Sites: st.chain, CapBytes: st.capBytes})
}

// applyStable records an origin's globally stable progress and trims the
// outbound log up to it.
func applyStable(s *storage.ShardTx, m *peerv1.Stable, st *state) (Result, error) {
	if m.Origin == "" {
		return Result{Err: fmt.Errorf("%w: stable progress without origin", ErrBadReplicate)}, nil
	}
	old := st.stable[m.Origin]
	p := storage.Progress{HLC: max(old.HLC, m.Hlc), Seq: max(old.Seq, m.Seq)}
	if p == old {
		return Result{}, nil
	}
	if err := s.SetStable(m.Origin, p); err != nil {
		return Result{}, err
	}
	st.setStable(m.Origin, p)
	n, err := s.TrimOutbound(m.Origin, p.Seq)
	return Result{Removed: n}, err
}

// applyRepair merges another site's newest versions (anti-entropy) by
// last-writer-wins and raises other origins' progress to what they cover.
func applyRepair(s *storage.ShardTx, r *peerv1.RepairRecords, st *state) (Result, error) {
	for i, rec := range r.Records {
		if len(rec.Key) == 0 || rec.Hlc == 0 || rec.Site == "" {
			return Result{Err: fmt.Errorf("%w: repair record %d: empty key, hlc or site", ErrBadReplicate, i)}, nil
		}
	}
	var res Result
	var stamp uint64
	if len(r.Records) > 0 {
		stamp = st.stamp(r.LocalHlc)
	}
	for _, rec := range r.Records {
		superseded, err := putLWW(s, storage.Record{Key: rec.Key, Version: causal.Version{HLC: rec.Hlc, Site: rec.Site}, Value: rec.Value, Tombstone: rec.Tombstone, Stamp: stamp})
		if err != nil {
			return Result{}, err
		}
		if superseded {
			res.Superseded++
		}
		res.Applied++
	}
	for _, m := range r.Origins {
		if m.Origin == "" {
			continue
		}
		if m.Origin == st.site {
			// Another site applied more of this site's writes than this
			// replica numbered: it lost its data (wiped and rebuilt). Its
			// next writes are numbered after what the others applied, or
			// they would take them for duplicates.
			if m.Seq > st.localSeq {
				st.localSeq = m.Seq
				if err := s.SetLocalSeq(st.localSeq); err != nil {
					return Result{}, err
				}
			}
			continue
		}
		old := st.origins[m.Origin]
		p := storage.Progress{HLC: max(old.HLC, m.Hlc), Seq: max(old.Seq, m.Seq)}
		if p == old {
			continue
		}
		if err := s.SetOrigin(m.Origin, p); err != nil {
			return Result{}, err
		}
		st.setOrigin(m.Origin, p)
	}
	if r.JoinFrom != "" && r.JoinVersion > st.joinMarks[r.JoinFrom] {
		// The last command of a site's join repair of the shard: what it
		// sent applied above, in this command or before it.
		if err := s.SetJoinMark(r.JoinFrom, r.JoinVersion); err != nil {
			return Result{}, err
		}
		marks := make(map[string]uint64, len(st.joinMarks)+1)
		maps.Copy(marks, st.joinMarks)
		marks[r.JoinFrom] = r.JoinVersion
		st.joinMarks = marks
	}
	return res, nil
}

// CollectCutoff is the version cutoff a Collect command applies with: its
// cutoff, lowered to its frontier when it carries one (guard gc-frontier).
func CollectCutoff(c *peerv1.Collect) uint64 {
	cutoff := c.CutoffHlc
	if c.FrontierHlc != nil && *c.FrontierHlc < cutoff && !guards.Off(guards.GCFrontier) {
		cutoff = *c.FrontierHlc
	}
	return cutoff
}
