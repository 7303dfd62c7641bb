package fsm

import (
	"encoding/binary"
	"fmt"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/storage"
)

// apply dispatches one command. A returned error is a storage failure; a
// decided outcome is in the Result.
func apply(s *storage.ShardTx, cmd *peerv1.Command, maxHLC *uint64) (Result, error) {
	switch op := cmd.Op.(type) {
	case *peerv1.Command_Write:
		return applyWrite(s, op.Write, maxHLC)
	case *peerv1.Command_Collect:
		c := op.Collect
		next, removed, err := s.Collect(c.CutoffHlc, c.RequestCutoffHlc, c.StartKey, int(c.MaxKeys))
		return Result{Next: next, Removed: removed}, err
	case *peerv1.Command_Close:
		if op.Close.Hlc > *maxHLC {
			*maxHLC = op.Close.Hlc
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
