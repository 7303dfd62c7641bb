package placement

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ErrInvalidMap is returned by Marshal for a map that cannot be encoded and
// by UnmarshalMap for bytes that are not an encoded map.
var ErrInvalidMap = errors.New("placement: invalid map")

// mapVersion is the version of the encoding Marshal writes.
const mapVersion = 1

// The encoding: JSON, version 1, with shards sorted by keyspace and id and
// each shard's replicas sorted by node, so that equal maps encode to equal
// bytes. A shard's generation is written only when it is not 0, so maps
// without a recovery encode as before generations existed. For example:
//
//	{"version":1,"epoch":7,"shards":[{"keyspace":"default","id":0,
//	 "replicas":[{"node":"n1","voter":true},{"node":"n2","voter":false}]},
//	 {"keyspace":"default","id":1,"generation":1,
//	 "replicas":[{"node":"n2","voter":true}]}]}
type wireMap struct {
	Version int         `json:"version"`
	Epoch   uint64      `json:"epoch"`
	Shards  []wireShard `json:"shards"`
}

type wireShard struct {
	Keyspace   string        `json:"keyspace"`
	ID         uint32        `json:"id"`
	Generation uint64        `json:"generation,omitempty"`
	Replicas   []wireReplica `json:"replicas"`
}

type wireReplica struct {
	Node  NodeID `json:"node"`
	Voter bool   `json:"voter"`
}

// Marshal encodes m for storage in the catalog. Equal maps give equal bytes
// whatever the order of their replica slices. It fails with ErrInvalidMap
// if a keyspace or node id is not valid UTF-8, a node id is empty, or a
// node appears twice in one shard.
func (m Map) Marshal() ([]byte, error) {
	w := wireMap{Version: mapVersion, Epoch: m.Epoch, Shards: make([]wireShard, 0, len(m.Shards))}
	for _, s := range m.SortedShards() {
		if !utf8.ValidString(s.Keyspace) {
			return nil, fmt.Errorf("%w: shard %q: keyspace not UTF-8", ErrInvalidMap, s.String())
		}
		reps := m.Shards[s]
		sorted := normalize(reps)
		if len(sorted) != len(reps) {
			return nil, fmt.Errorf("%w: shard %v: duplicate replica", ErrInvalidMap, s)
		}
		ws := wireShard{Keyspace: s.Keyspace, ID: s.ID, Generation: m.Generations[s], Replicas: make([]wireReplica, 0, len(sorted))}
		for _, r := range sorted {
			if r.Node == "" || !utf8.ValidString(string(r.Node)) {
				return nil, fmt.Errorf("%w: shard %v: node %q", ErrInvalidMap, s, r.Node)
			}
			ws.Replicas = append(ws.Replicas, wireReplica(r))
		}
		w.Shards = append(w.Shards, ws)
	}
	return json.Marshal(w)
}

// UnmarshalMap decodes a map written by Marshal. It fails with
// ErrInvalidMap for anything else: another version, unknown fields,
// trailing data, duplicate shards, duplicate or empty node ids.
func UnmarshalMap(b []byte) (Map, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w wireMap
	if err := dec.Decode(&w); err != nil {
		return Map{}, fmt.Errorf("%w: %w", ErrInvalidMap, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Map{}, fmt.Errorf("%w: trailing data", ErrInvalidMap)
	}
	if w.Version != mapVersion {
		return Map{}, fmt.Errorf("%w: version %d", ErrInvalidMap, w.Version)
	}
	m := Map{Epoch: w.Epoch, Shards: make(map[Shard][]Replica, len(w.Shards))}
	for _, ws := range w.Shards {
		s := Shard{Keyspace: ws.Keyspace, ID: ws.ID}
		if _, dup := m.Shards[s]; dup {
			return Map{}, fmt.Errorf("%w: duplicate shard %v", ErrInvalidMap, s)
		}
		var reps []Replica
		for _, wr := range ws.Replicas {
			if wr.Node == "" {
				return Map{}, fmt.Errorf("%w: shard %v: empty node", ErrInvalidMap, s)
			}
			reps = append(reps, Replica(wr))
		}
		sorted := normalize(reps)
		if len(sorted) != len(reps) {
			return Map{}, fmt.Errorf("%w: shard %v: duplicate replica", ErrInvalidMap, s)
		}
		m.Shards[s] = sorted
		if ws.Generation > 0 {
			if m.Generations == nil {
				m.Generations = map[Shard]uint64{}
			}
			m.Generations[s] = ws.Generation
		}
	}
	return m, nil
}
