package shard

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

func voter(id string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")}
}

func learner(id string) raft.Server {
	return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")}
}

// logWith returns a log store holding a few commands and then a
// configuration entry of servers.
func logWith(t *testing.T, servers ...raft.Server) *raft.InmemStore {
	t.Helper()
	s := raft.NewInmemStore()
	if err := s.SetUint64(keyCurrentTerm, 3); err != nil {
		t.Fatal(err)
	}
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{voter("a")}})},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("x")},
		{Index: 3, Term: 2, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{Servers: servers})},
		{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte("y")},
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRecoverAlone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		lost    []string
		ok      bool
	}{
		{"two voters, one lost", []raft.Server{voter("a"), voter("b")}, []string{"b"}, true},
		{"three voters", []raft.Server{voter("a"), voter("b"), voter("c")}, []string{"b"}, false},
		{"three voters, two named lost", []raft.Server{voter("a"), voter("b"), voter("c")}, []string{"b", "c"}, false},
		{"a learner besides", []raft.Server{voter("a"), voter("b"), learner("c")}, []string{"b"}, false},
		{"the other voter not lost", []raft.Server{voter("a"), voter("c")}, []string{"b"}, false},
		{"self a learner", []raft.Server{learner("a"), voter("b")}, []string{"b"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := logWith(t, tc.servers...)
			snaps := raft.NewInmemSnapshotStore()
			err := recoverAlone(s, s, snaps, "a", "a:1", tc.lost)
			if !tc.ok {
				if !errors.Is(err, ErrUnsafeRecovery) {
					t.Fatalf("recoverAlone = %v, want ErrUnsafeRecovery", err)
				}
				if last, _ := s.LastIndex(); last != 4 {
					t.Fatalf("a refused recovery wrote the log (last index %d)", last)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var e raft.Log
			if err := s.GetLog(5, &e); err != nil {
				t.Fatal(err)
			}
			conf := raft.DecodeConfiguration(e.Data)
			if e.Type != raft.LogConfiguration || e.Term != 3 || len(conf.Servers) != 1 || conf.Servers[0] != voter("a") {
				t.Fatalf("appended %+v with %v", e, conf.Servers)
			}
			// Again: already alone, nothing more is written.
			if err := recoverAlone(s, s, snaps, "a", "a:1", tc.lost); err != nil {
				t.Fatal(err)
			}
			if last, _ := s.LastIndex(); last != 5 {
				t.Fatalf("a repeated recovery wrote again (last index %d)", last)
			}
		})
	}
}
