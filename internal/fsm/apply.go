package fsm

import (
	"encoding/binary"
	"fmt"

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
		return applyWrite(s, op.Write, &st.maxHLC)
	case *peerv1.Command_Replicate:
		return applyReplicate(s, op.Replicate, st)
	case *peerv1.Command_Collect:
		c := op.Collect
		cutoff := c.CutoffHlc
		if c.FrontierHlc != nil && *c.FrontierHlc < cutoff && !guards.Off(guards.GCFrontier) {
			cutoff = *c.FrontierHlc
		}
		next, removed, err := s.Collect(cutoff, c.RequestCutoffHlc, c.StartKey, int(c.MaxKeys))
		return Result{Next: next, Removed: removed}, err
	case *peerv1.Command_Close:
		if op.Close.Hlc > st.maxHLC {
			st.maxHLC = op.Close.Hlc
		}
		return Result{}, nil
	case *peerv1.Command_DigestCheck:
		// Nothing to write: ApplyBatch hands the state as of this entry
		// to the Digest hook.
		return Result{}, nil
	default:
		return Result{}, fmt.Errorf("%w: %T", ErrUnknownCommand, cmd.Op)
	}
}

func applyWrite(s *storage.ShardTx, w *peerv1.Write, maxHLC *uint64) (Result, error) {
	if w.ClientId != "" {
		if out, ok := s.Request(w.ClientId, w.Seq); ok {
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
	hlc := w.Hlc
	if hlc <= *maxHLC {
		hlc = *maxHLC + 1
	}
	v := causal.Version{HLC: hlc, Site: w.Site}
	if err := s.Put(storage.Record{Key: w.Key, Version: v, Value: w.Value, Tombstone: w.Tombstone}); err != nil {
		return Result{}, err
	}
	*maxHLC = hlc
	r := Result{Version: v, Existed: live}
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
		for _, w := range r.Writes[first:] {
			v := causal.Version{HLC: w.Hlc, Site: r.Origin}
			if err := s.Put(storage.Record{Key: w.Key, Version: v, Value: w.Value, Tombstone: w.Tombstone}); err != nil {
				return Result{}, err
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

// Outcome of a deduplicated request: hlc (8 bytes BE) | existed (1 byte) | site.
func encodeOutcome(r Result) []byte {
	b := binary.BigEndian.AppendUint64(nil, r.Version.HLC)
	if r.Existed {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, r.Version.Site...)
}

func decodeOutcome(b []byte) Result {
	if len(b) < 9 {
		return Result{}
	}
	return Result{
		Version: causal.Version{HLC: binary.BigEndian.Uint64(b), Site: string(b[9:])},
		Existed: b[8] == 1,
	}
}
