package placement

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestMarshalGolden(t *testing.T) {
	m := Map{Epoch: 7, Shards: map[Shard][]Replica{
		{"users", 1}:   reps("n2~", "n1"),
		{"default", 0}: reps("n3", "n1", "n2"),
		{"default", 2}: nil,
	}}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"epoch":7,"shards":[` +
		`{"keyspace":"default","id":0,"replicas":[{"node":"n1","voter":true},{"node":"n2","voter":true},{"node":"n3","voter":true}]},` +
		`{"keyspace":"default","id":2,"replicas":[]},` +
		`{"keyspace":"users","id":1,"replicas":[{"node":"n1","voter":true},{"node":"n2","voter":false}]}]}`
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	back, err := UnmarshalMap(got)
	if err != nil {
		t.Fatal(err)
	}
	want2 := Map{Epoch: 7, Shards: map[Shard][]Replica{
		{"users", 1}:   reps("n1", "n2~"),
		{"default", 0}: reps("n1", "n2", "n3"),
		{"default", 2}: nil,
	}}
	if !reflect.DeepEqual(back, want2) {
		t.Fatalf("UnmarshalMap = %+v, want %+v", back, want2)
	}
}

// TestMarshalGenerations: a shard's generation is written when it is not
// 0 and read back.
func TestMarshalGenerations(t *testing.T) {
	m := Map{Epoch: 3, Shards: map[Shard][]Replica{
		{"default", 0}: reps("n1"),
		{"default", 1}: reps("n2"),
	}, Generations: map[Shard]uint64{{"default", 1}: 2}}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"epoch":3,"shards":[` +
		`{"keyspace":"default","id":0,"replicas":[{"node":"n1","voter":true}]},` +
		`{"keyspace":"default","id":1,"generation":2,"replicas":[{"node":"n2","voter":true}]}]}`
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	back, err := UnmarshalMap(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("UnmarshalMap = %+v, want %+v", back, m)
	}
}

// TestMarshalDeterministic checks that the bytes depend on the map, not on
// how it was built.
func TestMarshalDeterministic(t *testing.T) {
	shards := testShards(3, 16)
	nodes := []NodeID{"a", "b", "c", "d", "e"}
	m := NewMap(Assign(shards, nodes, 3))
	_ = m.Apply(Step{Shard: shards[5], Kind: StepAddLearner, Node: "a"})
	_ = m.Apply(Step{Shard: shards[5], Kind: StepAddLearner, Node: "b"})
	first, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		// Rebuild the map in another insertion order, replicas reversed.
		c := Map{Epoch: m.Epoch, Shards: map[Shard][]Replica{}}
		for j := len(shards) - 1; j >= 0; j-- {
			s := shards[(j+i)%len(shards)]
			rs := append([]Replica(nil), m.Shards[s]...)
			for a, b := 0, len(rs)-1; a < b; a, b = a+1, b-1 {
				rs[a], rs[b] = rs[b], rs[a]
			}
			c.Shards[s] = rs
		}
		got, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("different bytes for the same map:\n%s\n%s", got, first)
		}
	}
	back, err := UnmarshalMap(first)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip changed the map")
	}
}

func TestMarshalRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Map
	}{
		{"empty node", Map{Shards: map[Shard][]Replica{{"k", 0}: reps("")}}},
		{"duplicate node", Map{Shards: map[Shard][]Replica{{"k", 0}: reps("a", "a~")}}},
		{"node not UTF-8", Map{Shards: map[Shard][]Replica{{"k", 0}: reps("a\xff")}}},
		{"keyspace not UTF-8", Map{Shards: map[Shard][]Replica{{"k\xff", 0}: reps("a")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.m.Marshal(); !errors.Is(err, ErrInvalidMap) {
				t.Fatalf("Marshal = %v, want ErrInvalidMap", err)
			}
		})
	}
}

func TestUnmarshalRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in string
	}{
		{"empty", ``},
		{"null", `null`},
		{"not an object", `[1]`},
		{"no version", `{"epoch":1,"shards":[]}`},
		{"future version", `{"version":2,"epoch":1,"shards":[]}`},
		{"unknown field", `{"version":1,"epoch":1,"shards":[],"extra":0}`},
		{"trailing data", `{"version":1,"epoch":1,"shards":[]} {}`},
		{"negative epoch", `{"version":1,"epoch":-1,"shards":[]}`},
		{"id out of range", `{"version":1,"epoch":1,"shards":[{"keyspace":"k","id":4294967296,"replicas":[]}]}`},
		{"duplicate shard", `{"version":1,"epoch":1,"shards":[{"keyspace":"k","id":0,"replicas":[]},{"keyspace":"k","id":0,"replicas":[]}]}`},
		{"duplicate node", `{"version":1,"epoch":1,"shards":[{"keyspace":"k","id":0,"replicas":[{"node":"a","voter":true},{"node":"a","voter":false}]}]}`},
		{"empty node", `{"version":1,"epoch":1,"shards":[{"keyspace":"k","id":0,"replicas":[{"node":"","voter":true}]}]}`},
		{"truncated", `{"version":1,"epoch":1,"shards":[{"keyspace":"k"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := UnmarshalMap([]byte(tc.in)); !errors.Is(err, ErrInvalidMap) {
				t.Fatalf("UnmarshalMap = %+v, %v, want ErrInvalidMap", m, err)
			}
		})
	}
}

// FuzzUnmarshalMap checks that decoding never panics and that whatever
// decodes re-encodes to a fixed point.
func FuzzUnmarshalMap(f *testing.F) {
	m := NewMap(Assign(testShards(2, 3), []NodeID{"a", "b", "c"}, 2))
	_ = m.Apply(Step{Shard: Shard{"ks0", 1}, Kind: StepAddLearner, Node: "c"})
	seed, err := m.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"version":1,"epoch":0,"shards":null}`))
	f.Add([]byte(`{"version":1,"epoch":3,"shards":[{"keyspace":"","id":0,"replicas":null}]}`))
	f.Add([]byte(`{"version":1,"epoch":1,"shards":[{"keyspace":"k","id":0,"replicas":[{"node":"a\u00ff","voter":true}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := UnmarshalMap(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidMap) {
				t.Fatalf("error %v is not ErrInvalidMap", err)
			}
			return
		}
		enc, err := m.Marshal()
		if err != nil {
			t.Fatalf("decoded map does not encode: %v", err)
		}
		back, err := UnmarshalMap(enc)
		if err != nil {
			t.Fatalf("re-encoded map does not decode: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip changed the map:\n%+v\n%+v", m, back)
		}
		enc2, err := back.Marshal()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not deterministic: %v\n%s\n%s", err, enc, enc2)
		}
	})
}
