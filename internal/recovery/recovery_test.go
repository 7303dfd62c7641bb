package recovery

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

// TestAlone: without force only a two-voter group that lost the other
// voter goes on alone, giving up its learners too when they are named
// lost (docs/adr/013, 023); with force any configuration does
// that holds the replica and otherwise only servers named lost
// (docs/adr/014). A refusal writes nothing; a repeated recovery writes
// nothing more.
func TestAlone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		lost    []string
		force   bool
		ok      bool
	}{
		{"two voters, one lost", []raft.Server{voter("a"), voter("b")}, []string{"b"}, false, true},
		{"three voters", []raft.Server{voter("a"), voter("b"), voter("c")}, []string{"b"}, false, false},
		{"three voters, two named lost", []raft.Server{voter("a"), voter("b"), voter("c")}, []string{"b", "c"}, false, false},
		{"a learner besides", []raft.Server{voter("a"), voter("b"), learner("c")}, []string{"b"}, false, false},
		{"a learner besides, named lost", []raft.Server{voter("a"), voter("b"), learner("c")}, []string{"b", "c"}, false, true},
		{"three voters and a learner, all named lost", []raft.Server{voter("a"), voter("b"), voter("c"), learner("d")}, []string{"b", "c", "d"}, false, false},
		{"the other voter not lost", []raft.Server{voter("a"), voter("c")}, []string{"b"}, false, false},
		{"self a learner", []raft.Server{learner("a"), voter("b")}, []string{"b"}, false, false},
		{"forced: three voters, two lost", []raft.Server{voter("a"), voter("b"), voter("c")}, []string{"b", "c"}, true, true},
		{"forced: five voters and a learner", []raft.Server{voter("a"), voter("b"), voter("c"), voter("d"), voter("e"), learner("f")}, []string{"b", "c", "d", "e", "f"}, true, true},
		{"forced: self a learner", []raft.Server{voter("b"), voter("c"), learner("a")}, []string{"b", "c"}, true, true},
		{"forced: a server not named lost", []raft.Server{voter("a"), voter("b"), voter("c")}, []string{"b"}, true, false},
		{"forced: self not in the configuration", []raft.Server{voter("b"), voter("c")}, []string{"b", "c"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := logWith(t, tc.servers...)
			snaps := raft.NewInmemSnapshotStore()
			opts := Options{Lost: tc.lost, Force: tc.force}
			res, err := Alone(s, s, snaps, "a", "a:1", opts)
			if !tc.ok {
				if !errors.Is(err, ErrUnsafe) {
					t.Fatalf("Alone = %v, want ErrUnsafe", err)
				}
				if last, _ := s.LastIndex(); last != 4 {
					t.Fatalf("a refused recovery wrote the log (last index %d)", last)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !res.Appended || res.Index != 5 || res.Term != 3 || len(res.Previous.Servers) != len(tc.servers) {
				t.Fatalf("result %+v", res)
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
			res, err = Alone(s, s, snaps, "a", "a:1", opts)
			if err != nil {
				t.Fatal(err)
			}
			if last, _ := s.LastIndex(); last != 5 || res.Appended {
				t.Fatalf("a repeated recovery wrote again (last index %d, %+v)", last, res)
			}
		})
	}
}

func TestAloneWithoutState(t *testing.T) {
	s := raft.NewInmemStore()
	_, err := Alone(s, s, raft.NewInmemSnapshotStore(), "a", "a:1", Options{Force: true})
	if !errors.Is(err, ErrNoState) {
		t.Fatalf("Alone on empty stores = %v, want ErrNoState", err)
	}
}

// TestGenerationKeys: the generation and the stale mark read 0 until set,
// in hashicorp/raft's in-memory store as in Causeway's.
func TestGenerationKeys(t *testing.T) {
	s := raft.NewInmemStore()
	if g, err := Generation(s); g != 0 || err != nil {
		t.Fatalf("Generation of a new store = %d, %v", g, err)
	}
	if g, err := Stale(s); g != 0 || err != nil {
		t.Fatalf("Stale of a new store = %d, %v", g, err)
	}
	if err := SetGeneration(s, 4); err != nil {
		t.Fatal(err)
	}
	if err := MarkStale(s, 5); err != nil {
		t.Fatal(err)
	}
	if g, err := Generation(s); g != 4 || err != nil {
		t.Fatalf("Generation = %d, %v, want 4", g, err)
	}
	if g, err := Stale(s); g != 5 || err != nil {
		t.Fatalf("Stale = %d, %v, want 5", g, err)
	}
}
