package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/snapstore"
)

// CommandFormat is the catalog command format this build writes and accepts.
const CommandFormat = 1

// Errors decided by the catalog state machine.
var (
	// ErrStaleEpoch: a placement step was planned against an older map.
	ErrStaleEpoch = errors.New("catalog: stale placement epoch")
	// ErrAlreadyInitialized: the placement map exists already.
	ErrAlreadyInitialized = errors.New("catalog: placement already initialized")
	// ErrNotInitialized: shards are added to a placement map that does
	// not exist yet.
	ErrNotInitialized = errors.New("catalog: placement not initialized")
	// ErrUnknownCommand: a committed command this build cannot interpret.
	ErrUnknownCommand = errors.New("catalog: unknown command")
	// ErrStaleGeneration: a recovery step names another generation of its
	// shard than the one it would start (another recovery came first).
	ErrStaleGeneration = errors.New("catalog: stale shard generation")
	// ErrUnknownNode: the catalog has no such node.
	ErrUnknownNode = errors.New("catalog: unknown node")
	// ErrNodeRemoved: the node was removed from the site for good
	// (RemoveNode, docs/adr/030): it is not registered again, and a node
	// that runs under its id must stop.
	ErrNodeRemoved = errors.New("catalog: node removed from the site")
	// ErrNodeHasReplicas: a node to remove is still assigned shard
	// replicas by the placement map.
	ErrNodeHasReplicas = errors.New("catalog: node still holds shard replicas")
	// ErrNoDrainTarget: a node to drain is the only live node that could
	// hold shard replicas; its replicas would have nowhere to go.
	ErrNoDrainTarget = errors.New("catalog: no other live node can take the node's replicas")
	// ErrLeaderRefused: a shard's leadership was not moved to a replica
	// that failed its group's last consistency check (it serves no
	// reads until it is repaired).
	ErrLeaderRefused = errors.New("catalog: the replica failed its consistency check and takes no leadership")
	// ErrLeaderNotYet: a shard's leadership was not moved to a replica its
	// leader has had no answer from lately, that lacks much of its log, or
	// whose node is stopping; a later round tries again.
	ErrLeaderNotYet = errors.New("catalog: the replica has not answered or caught up with the shard's leader lately")
)

// Node is a registered node of the site.
type Node struct {
	ID         string `json:"id"`
	PeerAddr   string `json:"peer_addr"`
	ClientAddr string `json:"client_addr"`
	Draining   bool   `json:"draining,omitempty"`
	// Unreachable is, for an alive node (Members.Alive), how many other
	// sites it could not reach lately (gossip; not stored).
	Unreachable int `json:"-"`
	// Replicas is, for an alive node (Members.Alive), the --replicas it
	// announces, 0 when it announces none (not stored).
	Replicas int `json:"-"`
}

// RemovedNode is a node removed from the site for good (docs/adr/030).
type RemovedNode struct {
	ID         string `json:"id"`
	PeerAddr   string `json:"peer_addr,omitempty"`
	ClientAddr string `json:"client_addr,omitempty"`
	// Epoch is the placement epoch of the removal.
	Epoch uint64 `json:"epoch"`
	// By is who asked (the client's address and the node its call reached).
	By string `json:"by,omitempty"`
}

// State is the catalog's replicated state.
type State struct {
	Map   placement.Map
	Nodes map[string]Node
	// Removed are the node ids removed for good: never registered again.
	Removed map[string]RemovedNode
}

// clone returns a deep copy.
func (s State) clone() State {
	c := State{Map: s.Map.Clone(), Nodes: make(map[string]Node, len(s.Nodes)), Removed: make(map[string]RemovedNode, len(s.Removed))}
	for k, v := range s.Nodes {
		c.Nodes[k] = v
	}
	for k, v := range s.Removed {
		c.Removed[k] = v
	}
	return c
}

// RemovedIDs lists the removed node ids, sorted.
func (s State) RemovedIDs() []string {
	out := make([]string, 0, len(s.Removed))
	for id := range s.Removed {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// replicasOn counts the replicas (voters and learners) m assigns to node.
func replicasOn(m placement.Map, node string) int {
	n := 0
	for _, reps := range m.Shards {
		for _, r := range reps {
			if string(r.Node) == node {
				n++
			}
		}
	}
	return n
}

// Draining lists the draining nodes, sorted.
func (s State) Draining() []placement.NodeID {
	var out []placement.NodeID
	for id, n := range s.Nodes {
		if n.Draining {
			out = append(out, placement.NodeID(id))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// fsm is the catalog state machine.
type fsm struct {
	mu      sync.Mutex
	state   State         // REQUIRES: mu
	changed chan struct{} // closed on every change; REQUIRES: mu
}

func newFSM() *fsm {
	return &fsm{state: State{Nodes: map[string]Node{}, Removed: map[string]RemovedNode{}}, changed: make(chan struct{})}
}

// snapshot returns a copy of the state and a channel closed on its next change.
func (f *fsm) snapshot() (State, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.clone(), f.changed
}

func (f *fsm) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := decodeCommand(l.Data)
	if err != nil {
		return fmt.Errorf("%w at index %d", err, l.Index)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err = f.applyLocked(cmd)
	if err == nil {
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return err
}

// encodeCommand marshals a command for raft.Apply, stamping the format.
func encodeCommand(cmd *peerv1.CatalogCommand) ([]byte, error) {
	cmd.Format = CommandFormat
	return proto.Marshal(cmd)
}

// decodeCommand unmarshals a committed command; one it cannot read, or of
// another format, is ErrUnknownCommand.
func decodeCommand(data []byte) (*peerv1.CatalogCommand, error) {
	cmd := &peerv1.CatalogCommand{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnknownCommand, err)
	}
	if cmd.Format != CommandFormat {
		return nil, fmt.Errorf("%w: format %d", ErrUnknownCommand, cmd.Format)
	}
	return cmd, nil
}

// applyLocked applies one command. REQUIRES: f.mu.
func (f *fsm) applyLocked(cmd *peerv1.CatalogCommand) error {
	switch op := cmd.Op.(type) {
	case *peerv1.CatalogCommand_InitMap:
		if len(f.state.Map.Shards) > 0 {
			return ErrAlreadyInitialized
		}
		m, err := placement.UnmarshalMap(op.InitMap)
		if err != nil {
			return err
		}
		f.state.Map = m
	case *peerv1.CatalogCommand_Node:
		if r, ok := f.state.Removed[op.Node.NodeId]; ok {
			return fmt.Errorf("%w: %s was removed at placement epoch %d and is not registered again", ErrNodeRemoved, r.ID, r.Epoch)
		}
		n := f.state.Nodes[op.Node.NodeId]
		n.ID, n.PeerAddr, n.ClientAddr = op.Node.NodeId, op.Node.PeerAddr, op.Node.ClientAddr
		f.state.Nodes[n.ID] = n
	case *peerv1.CatalogCommand_AddShards:
		if len(f.state.Map.Shards) == 0 {
			return ErrNotInitialized
		}
		m, err := placement.UnmarshalMap(op.AddShards)
		if err != nil {
			return err
		}
		added := false
		for sh, reps := range m.Shards {
			if _, ok := f.state.Map.Shards[sh]; ok || len(reps) == 0 {
				continue
			}
			f.state.Map.Shards[sh] = reps
			added = true
		}
		if added {
			f.state.Map.Epoch++
		}
	case *peerv1.CatalogCommand_Drain:
		n, ok := f.state.Nodes[op.Drain.NodeId]
		if !ok {
			return fmt.Errorf("catalog: unknown node %q", op.Drain.NodeId)
		}
		n.Draining = op.Drain.Draining
		f.state.Nodes[n.ID] = n
		f.state.Map.Epoch++ // routing and planning react to the change
	case *peerv1.CatalogCommand_Step:
		s := op.Step
		// Epoch 0 skips the check: Map.Apply validates the step against
		// the shard's current replicas anyway.
		if s.Epoch != 0 && s.Epoch != f.state.Map.Epoch {
			return fmt.Errorf("%w: step for epoch %d, map is at %d", ErrStaleEpoch, s.Epoch, f.state.Map.Epoch)
		}
		step := placement.Step{
			Shard: placement.Shard{Keyspace: s.Shard.GetKeyspace(), ID: s.Shard.GetShard()},
			Kind:  placement.StepKind(s.Kind),
			Node:  placement.NodeID(s.NodeId),
		}
		// Generation 0 skips the check (a leader of an older build).
		recovers := step.Kind == placement.StepRecover || step.Kind == placement.StepForceRecover
		if next := f.state.Map.Generation(step.Shard) + 1; recovers && s.Generation != 0 && s.Generation != next {
			return fmt.Errorf("%w: step starts generation %d of %s, the next is %d", ErrStaleGeneration, s.Generation, step.Shard, next)
		}
		return f.state.Map.Apply(step)
	case *peerv1.CatalogCommand_RemoveNode:
		return f.removeNodeLocked(op.RemoveNode)
	default:
		return fmt.Errorf("%w: %T", ErrUnknownCommand, cmd.Op)
	}
	return nil
}

// removeNodeLocked removes a node from the site for good (docs/adr/030).
// It refuses a node the map still assigns a replica (guard
// node-remove-check): the leader checks that before it proposes, and this
// check holds against a placement step committed in between. REQUIRES:
// f.mu.
func (f *fsm) removeNodeLocked(req *peerv1.RemoveNodeRequest) error {
	id := req.GetNodeId()
	if r, ok := f.state.Removed[id]; ok {
		return fmt.Errorf("%w: %s was removed already (placement epoch %d)", ErrNodeRemoved, id, r.Epoch)
	}
	n, ok := f.state.Nodes[id]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownNode, id)
	}
	if held := replicasOn(f.state.Map, id); held > 0 && !guards.Off(guards.NodeRemoveCheck) {
		return fmt.Errorf("%w: the placement map at epoch %d assigns %s %d", ErrNodeHasReplicas, f.state.Map.Epoch, id, held)
	}
	delete(f.state.Nodes, id)
	f.state.Map.Epoch++ // planning and Members react to the change
	f.state.Removed[id] = RemovedNode{ID: id, PeerAddr: n.PeerAddr, ClientAddr: n.ClientAddr, Epoch: f.state.Map.Epoch, By: req.GetRequestedBy()}
	return nil
}

// snapshotState is the snapshot's encoding. Removed is absent from the
// snapshots of earlier releases, which removed no nodes.
type snapshotState struct {
	Map     []byte                 `json:"map"`
	Nodes   map[string]Node        `json:"nodes"`
	Removed map[string]RemovedNode `json:"removed,omitempty"`
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.state.Map.Marshal()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(snapshotState{Map: m, Nodes: f.state.Nodes, Removed: f.state.Removed})
	if err != nil {
		return nil, err
	}
	return snapstore.Bytes(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var ss snapshotState
	if err := json.NewDecoder(rc).Decode(&ss); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	m, err := placement.UnmarshalMap(ss.Map)
	if err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	if ss.Nodes == nil {
		ss.Nodes = map[string]Node{}
	}
	if ss.Removed == nil {
		ss.Removed = map[string]RemovedNode{}
	}
	f.mu.Lock()
	f.state = State{Map: m, Nodes: ss.Nodes, Removed: ss.Removed}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return nil
}
