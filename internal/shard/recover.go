package shard

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// ErrUnsafeRecovery is returned when a replica is asked to go on alone but
// its raft configuration holds a server it was not told is lost: forcing
// it could drop entries that server and the lost one committed without it.
var ErrUnsafeRecovery = errors.New("shard: recovery is not safe")

// keyCurrentTerm is hashicorp/raft's stable-store key of the current term.
var keyCurrentTerm = []byte("CurrentTerm")

// recoverAlone makes self the only voter of the group whose stores are
// given, before raft starts on them: it appends a configuration entry
// holding self alone at the end of the log, which raft takes as its latest
// configuration when it starts, so self elects itself and commits the
// entry with its own vote. lost names the voters given up.
//
// It is safe only when the configuration being replaced had exactly two
// voters, self and a lost one, and nothing else: every entry committed
// under it was stored by both voters, and self had the log before it was
// promoted, so self holds every committed entry (docs/adr/013). Any other
// configuration fails with ErrUnsafeRecovery. A configuration that already
// is self alone is left as it is.
func recoverAlone(logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, self raft.ServerID, addr raft.ServerAddress, lost []string) error {
	cur, err := latestConfiguration(logs, snaps)
	if err != nil {
		return err
	}
	if len(cur.Servers) == 1 && cur.Servers[0].ID == self && cur.Servers[0].Suffrage == raft.Voter {
		return nil // already alone (an earlier recovery)
	}
	voters := 0
	selfVoter := false
	for _, s := range cur.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		switch {
		case s.ID == self:
			selfVoter = s.Suffrage == raft.Voter
		case !slices.Contains(lost, string(s.ID)):
			return fmt.Errorf("%w: %s is in the configuration and not lost", ErrUnsafeRecovery, s.ID)
		}
	}
	if !selfVoter || voters != 2 || len(cur.Servers) != 2 {
		return fmt.Errorf("%w: the configuration is %v, not two voters of which this is one", ErrUnsafeRecovery, cur.Servers)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return err
	}
	term, err := stable.GetUint64(keyCurrentTerm)
	if err != nil {
		return err
	}
	if last > 0 {
		var e raft.Log
		if err := logs.GetLog(last, &e); err != nil {
			return fmt.Errorf("shard: read the last log entry: %w", err)
		}
		term = max(term, e.Term)
	}
	alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: self, Address: addr}}}
	return logs.StoreLog(&raft.Log{
		Index: last + 1, Term: term, Type: raft.LogConfiguration,
		Data: raft.EncodeConfiguration(alone), AppendedAt: time.Now(),
	})
}

// latestConfiguration returns the newest configuration in the log, or in
// the newest snapshot when the log holds none.
func latestConfiguration(logs raft.LogStore, snaps raft.SnapshotStore) (raft.Configuration, error) {
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
			return raft.Configuration{}, fmt.Errorf("shard: read log entry %d: %w", i, err)
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
		return raft.Configuration{}, fmt.Errorf("%w: no configuration in the log or a snapshot", ErrUnsafeRecovery)
	}
	return metas[0].Configuration, nil
}
