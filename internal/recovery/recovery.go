package recovery

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// ErrUnsafe is returned when a replica is asked to go on alone but may
// not: without force, its configuration is not exactly two voters, itself
// and a lost one; with or without, the configuration holds a server the
// caller did not name lost, or does not hold the replica itself.
var ErrUnsafe = errors.New("recovery: not safe")

// ErrNoState is returned for a replica with no configuration in its log or
// snapshots: it has nothing to recover.
var ErrNoState = errors.New("recovery: the replica has no raft state")

// Stable-store keys. hashicorp/raft owns CurrentTerm; the others are
// Causeway's (docs/storage.md).
var (
	keyCurrentTerm = []byte("CurrentTerm")
	keyGeneration  = []byte("CausewayGeneration")
	keyStale       = []byte("CausewayStaleGeneration")
)

// Options says what a recovery gives up and how far it may go.
type Options struct {
	// Lost names the servers given up. Every server of the configuration
	// other than the replica itself must be among them.
	Lost []string
	// Force lifts the two-voter rule: the replica goes on alone whatever
	// its configuration was, voter or learner in it. Entries committed
	// without it are lost.
	Force bool
}

// Result describes a recovery.
type Result struct {
	// Previous is the configuration replaced.
	Previous raft.Configuration
	// Appended is false when the configuration already was the replica
	// alone (an earlier recovery): nothing was written.
	Appended bool
	// Index and Term are those of the configuration entry appended.
	Index, Term uint64
}

// Alone makes self the only voter of the group whose stores are given,
// before raft starts on them: it appends a configuration entry holding
// self alone at the end of the log, which raft takes as its latest
// configuration when it starts, so self elects itself and commits the
// entry with its own vote.
//
// Without opts.Force it is safe only when the configuration being replaced
// has exactly two voters, self and a lost one, and otherwise only
// non-voters named lost: every entry committed under it was stored by both
// voters (non-voters count in no quorum), and self had the log before it
// was promoted, so self holds every committed entry (docs/adr/013). That
// needs no other replica to hold a newer configuration that made one of
// those non-voters a voter; the caller checks it (the site catalog asks
// every live replica, docs/adr/023). Any other configuration fails with
// ErrUnsafe. With
// opts.Force the configuration may be anything that holds self and
// otherwise only servers named lost. A configuration that already is self
// alone is left as it is.
func Alone(logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, self raft.ServerID, addr raft.ServerAddress, opts Options) (Result, error) {
	cur, err := LatestConfiguration(logs, snaps)
	if err != nil {
		return Result{}, err
	}
	res := Result{Previous: cur}
	if len(cur.Servers) == 1 && cur.Servers[0].ID == self && cur.Servers[0].Suffrage == raft.Voter {
		return res, nil // already alone (an earlier recovery)
	}
	voters := 0
	selfVoter, selfMember := false, false
	for _, s := range cur.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		switch {
		case s.ID == self:
			selfMember, selfVoter = true, s.Suffrage == raft.Voter
		case !slices.Contains(opts.Lost, string(s.ID)):
			return res, fmt.Errorf("%w: %s is in the configuration and not lost", ErrUnsafe, s.ID)
		}
	}
	switch {
	case !selfMember:
		return res, fmt.Errorf("%w: %s is not in its group's configuration %v", ErrUnsafe, self, cur.Servers)
	case !opts.Force && (!selfVoter || voters != 2):
		return res, fmt.Errorf("%w: the configuration is %v, not two voters of which this is one", ErrUnsafe, cur.Servers)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return res, err
	}
	term, err := stable.GetUint64(keyCurrentTerm)
	if err != nil {
		return res, fmt.Errorf("recovery: read the current term: %w", err)
	}
	if last > 0 {
		var e raft.Log
		if err := logs.GetLog(last, &e); err != nil {
			return res, fmt.Errorf("recovery: read the last log entry: %w", err)
		}
		term = max(term, e.Term)
	}
	alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: self, Address: addr}}}
	if err := logs.StoreLog(&raft.Log{
		Index: last + 1, Term: term, Type: raft.LogConfiguration,
		Data: raft.EncodeConfiguration(alone), AppendedAt: time.Now(),
	}); err != nil {
		return res, fmt.Errorf("recovery: append the configuration: %w", err)
	}
	res.Appended, res.Index, res.Term = true, last+1, term
	return res, nil
}

// LatestConfiguration returns the newest configuration in the log, or in
// the newest snapshot when the log holds none. It fails with ErrNoState
// when there is neither.
func LatestConfiguration(logs raft.LogStore, snaps raft.SnapshotStore) (raft.Configuration, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return raft.Configuration{}, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return raft.Configuration{}, err
	}
	for i := last; i >= first && i > 0; i-- {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			return raft.Configuration{}, fmt.Errorf("recovery: read log entry %d: %w", i, err)
		}
		if e.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(e.Data), nil
		}
	}
	metas, err := snaps.List()
	if err != nil {
		return raft.Configuration{}, err
	}
	if len(metas) == 0 {
		return raft.Configuration{}, fmt.Errorf("%w: no configuration in the log or a snapshot", ErrNoState)
	}
	return metas[0].Configuration, nil
}

// Generation returns the generation of the replica whose stable store is
// given: 0 until a generation was set.
func Generation(stable raft.StableStore) (uint64, error) {
	return getOptional(stable, keyGeneration)
}

// SetGeneration records the generation of the replica whose stable store
// is given.
func SetGeneration(stable raft.StableStore, gen uint64) error {
	return stable.SetUint64(keyGeneration, gen)
}

// MarkStale records that a replica of generation newer than this one's
// exists: this replica was given up by a recovery elsewhere and must be
// rebuilt before it is used again. Stale reads it back.
func MarkStale(stable raft.StableStore, newer uint64) error {
	return stable.SetUint64(keyStale, newer)
}

// Stale returns the newer generation recorded by MarkStale, or 0.
func Stale(stable raft.StableStore) (uint64, error) {
	return getOptional(stable, keyStale)
}

// getOptional reads a uint64 that may be absent (0). The stores signal
// absence with the error "not found", as hashicorp/raft expects of them
// (storage.ErrNotFound), or with 0.
func getOptional(stable raft.StableStore, key []byte) (uint64, error) {
	v, err := stable.GetUint64(key)
	if err != nil && err.Error() == "not found" {
		return 0, nil
	}
	return v, err
}
