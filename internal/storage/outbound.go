package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Chain is a shard's chain of sites (its keyspace's site list, in order)
// and the cap of its outbound log in bytes per origin (0: no cap). A shard without a
// chain (one site) keeps no outbound log.
type Chain struct {
	Sites    []string `json:"sites"`
	CapBytes uint64   `json:"cap_bytes,omitempty"`
}

// Chain returns the shard's chain (zero if none was set).
func (s *ShardTx) Chain() (Chain, error) {
	var c Chain
	if s.state == nil {
		return c, nil
	}
	v, err := s.getState(stateChain)
	if v == nil || err != nil {
		return c, err
	}
	if err := json.Unmarshal(v, &c); err != nil {
		return Chain{}, fmt.Errorf("%w: chain: %v", ErrBadEncoding, err)
	}
	return c, nil
}

// SetChain records the shard's chain.
func (s *ShardTx) SetChain(c Chain) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.putState(stateChain, b)
}

// LocalSeq returns the sequence number of this site's last write that
// entered the outbound log (0: none).
func (s *ShardTx) LocalSeq() uint64 {
	if s.state == nil {
		return 0
	}
	return s.stateUint64(stateLocalSeq)
}

// SetLocalSeq records this site's last outbound sequence number.
func (s *ShardTx) SetLocalSeq(seq uint64) error { return s.putStateUint64(stateLocalSeq, seq) }

// Stable returns, per origin, the progress every site of the chain applied.
func (s *ShardTx) Stable() (map[string]Progress, error) {
	out := map[string]Progress{}
	if s.state == nil {
		return out, nil
	}
	return out, s.progressRecords(stateStable, "stable progress", out)
}

// SetStable records origin's globally stable progress.
func (s *ShardTx) SetStable(origin string, p Progress) error {
	if origin == "" {
		return fmt.Errorf("%w: empty origin", ErrBadEncoding)
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 16), p.HLC)
	return s.putState(append(bytes.Clone(stateStable), origin...), binary.BigEndian.AppendUint64(v, p.Seq))
}

// JoinMarks returns, per site, the configuration version of this site's
// join of the keyspace whose repair of the shard that site marked done
// (docs/adr/019).
func (s *ShardTx) JoinMarks() (map[string]uint64, error) {
	out := map[string]uint64{}
	if s.state == nil {
		return out, nil
	}
	c := s.state.Cursor()
	for k, v := c.Seek(stateJoin); k != nil && bytes.HasPrefix(k, stateJoin); k, v = c.Next() {
		body, err := unseal("state record", k, v)
		if err != nil {
			return nil, s.db.noteDamage(err)
		}
		if len(body) != 8 {
			return nil, s.db.noteDamage(fmt.Errorf("%w: join mark %q is %d bytes", ErrDamaged, k, len(body)))
		}
		out[string(k[len(stateJoin):])] = binary.BigEndian.Uint64(body)
	}
	return out, nil
}

// SetJoinMark records that site completed its join repair of the shard
// for the join at configuration version version.
func (s *ShardTx) SetJoinMark(site string, version uint64) error {
	if site == "" {
		return fmt.Errorf("%w: empty site", ErrBadEncoding)
	}
	return s.putStateUint64(append(bytes.Clone(stateJoin), site...), version)
}

// outKey is origin ‖ 0x00 ‖ seq.
func outKey(origin string, seq uint64) []byte {
	k := make([]byte, 0, len(origin)+9)
	k = append(k, origin...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func outPrefix(origin string) []byte { return append([]byte(origin), 0) }

// OutboundBytes returns the outbound log's size (keys and values).
func (s *ShardTx) OutboundBytes() uint64 {
	if s.state == nil {
		return 0
	}
	return s.stateUint64(stateOutBytes)
}

// originBytesKey holds the size of one origin's entries.
func originBytesKey(origin string) []byte {
	return append(append(bytes.Clone(stateOutBytes), '/'), origin...)
}

// OriginOutboundBytes returns the size of origin's entries.
func (s *ShardTx) OriginOutboundBytes(origin string) uint64 {
	if s.state == nil {
		return 0
	}
	return s.stateUint64(originBytesKey(origin))
}

// addOutBytes adds delta (possibly negative) to origin's and the log's
// sizes.
func (s *ShardTx) addOutBytes(origin string, delta int64) error {
	for _, k := range [][]byte{stateOutBytes, originBytesKey(origin)} {
		cur, err := s.getStateUint64(k)
		if err != nil {
			return err
		}
		n := int64(cur) + delta
		if n < 0 {
			n = 0
		}
		if err := s.putStateUint64(k, uint64(n)); err != nil {
			return err
		}
	}
	return nil
}

// AppendOutbound adds an encoded update of origin to the outbound log.
func (s *ShardTx) AppendOutbound(origin string, seq uint64, update []byte) error {
	if origin == "" || seq == 0 {
		return fmt.Errorf("%w: outbound entry without origin or sequence", ErrBadEncoding)
	}
	k := outKey(origin, seq)
	if err := s.out.Put(k, sealOutbound(k, update)); err != nil {
		return err
	}
	return s.addOutBytes(origin, int64(len(k)+len(update)))
}

// trimOrigin removes origin's oldest entries while keep says so.
func (s *ShardTx) trimOrigin(origin string, keep func(seq, size uint64) bool) (int, error) {
	prefix := outPrefix(origin)
	size := s.OriginOutboundBytes(origin)
	var freed int64
	n := 0
	c := s.out.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; {
		if keep(binary.BigEndian.Uint64(k[len(prefix):]), size-uint64(freed)) {
			break
		}
		freed += int64(len(k) + len(v) - sumLen)
		var err error
		if k, v, err = deleteAt(c, k); err != nil {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, s.addOutBytes(origin, -freed)
}

// TrimOutbound removes origin's entries up to seq and returns how many.
func (s *ShardTx) TrimOutbound(origin string, seq uint64) (int, error) {
	return s.trimOrigin(origin, func(n, _ uint64) bool { return n > seq })
}

// CapOutbound drops origin's oldest entries until they take at most
// capBytes (0: no cap), and returns how many it dropped. A site that
// still needed them is repaired by anti-entropy.
func (s *ShardTx) CapOutbound(origin string, capBytes uint64) (int, error) {
	if capBytes == 0 || s.OriginOutboundBytes(origin) <= capBytes {
		return 0, nil
	}
	return s.trimOrigin(origin, func(_, size uint64) bool { return size <= capBytes })
}

// ClearOutbound empties the outbound log.
func (s *ShardTx) ClearOutbound() error {
	c := s.out.Cursor()
	for k, _ := c.First(); k != nil; {
		var err error
		if k, _, err = deleteAt(c, k); err != nil {
			return err
		}
	}
	c = s.state.Cursor()
	for k, _ := c.Seek(stateOutBytes); k != nil && bytes.HasPrefix(k, stateOutBytes); {
		var err error
		if k, _, err = deleteAt(c, k); err != nil {
			return err
		}
	}
	return nil
}

// OutboundEntry is one update of the outbound log.
type OutboundEntry struct {
	Seq    uint64
	Update []byte // encoded; valid only inside the transaction
}

// ReadOutbound returns origin's entries from sequence number from on, at
// most maxEntries and about maxBytes, and the range of origin's entries
// the log holds (first and last sequence numbers; zero when none). When
// first > from, the entries from to first-1 were dropped by the cap.
func (s *ShardTx) ReadOutbound(origin string, from uint64, maxEntries, maxBytes int) (entries []OutboundEntry, first, last uint64, err error) {
	if s.out == nil {
		return nil, 0, 0, nil
	}
	prefix := outPrefix(origin)
	c := s.out.Cursor()
	k, _ := c.Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+8 {
		return nil, 0, 0, nil
	}
	first = binary.BigEndian.Uint64(k[len(prefix):])
	// The last entry: the key before the next origin's first. In a write
	// transaction whose deletes emptied a leaf (bbolt rebalances only at
	// commit), Prev stops on that empty leaf and returns nil: the last
	// entry is then found by walking origin's entries forward.
	end := append(bytes.Clone(prefix[:len(prefix)-1]), 1)
	if lk, _ := c.Seek(end); lk != nil {
		if lk, _ = c.Prev(); lk != nil && bytes.HasPrefix(lk, prefix) && len(lk) == len(prefix)+8 {
			last = binary.BigEndian.Uint64(lk[len(prefix):])
		} else {
			for k, _ := c.Seek(outKey(origin, first)); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, _ = c.Next() {
				last = binary.BigEndian.Uint64(k[len(prefix):])
			}
		}
	} else if lk, _ := c.Last(); lk != nil {
		last = binary.BigEndian.Uint64(lk[len(prefix):])
	}
	size := 0
	for k, v := c.Seek(outKey(origin, max(from, first))); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
		if len(entries) >= maxEntries || (len(entries) > 0 && size+len(v)-sumLen > maxBytes) {
			break
		}
		update, err := openOutbound(k, v)
		if err != nil {
			return nil, 0, 0, s.db.noteDamage(err)
		}
		entries = append(entries, OutboundEntry{Seq: binary.BigEndian.Uint64(k[len(prefix):]), Update: update})
		size += len(update)
	}
	return entries, first, last, nil
}

// sealOutbound returns an outbound entry as it is stored under key k
// (seal): a changed byte would otherwise be shipped to every other site as
// if it had been written.
func sealOutbound(k, update []byte) []byte { return seal(k, update) }

// openOutbound verifies the outbound entry v stored under key k and
// returns its update.
func openOutbound(k, v []byte) ([]byte, error) { return unseal("outbound entry", k, v) }
