package membership

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/hashicorp/memberlist"
)

// introspector reads the liveness state memberlist keeps for each node,
// which its API does not expose.
//
// Why it exists: memberlist has no callback for "member became suspect",
// and NotifyLeave does not say whether a member died or left. Its exported
// memberlist.Node.State cannot help: memberlist keeps the state in a field
// of its unexported nodeState that shadows the embedded Node.State, so the
// Node.State of the nodes Members and the callbacks hand out is always
// StateAlive (memberlist v0.7.0). And reading fields of the nodes Members
// returns after it returns races with memberlist's in-place updates
// (hashicorp/memberlist#250, #306).
//
// So the introspector reads memberlist's node table by reflection: the
// nodeState.State and Node.Name of every entry of Memberlist.nodes, either
// while holding Memberlist.nodeLock for reading (states) or from inside a
// memberlist callback, which runs with that lock held (stateLocked). It
// never writes. Everything else this package reports comes from the
// callbacks through memberlist's API.
//
// newIntrospector checks the layout it relies on and returns nil if a
// memberlist upgrade changed it; then suspect members are reported alive
// and members that left are reported dead. TestIntrospectorFound fails in
// that case. Delete this file once memberlist exposes node states.
type introspector struct {
	lock  *sync.RWMutex // &Memberlist.nodeLock
	nodes reflect.Value // Memberlist.nodes, a []*nodeState (addressable: reads see the live slice)
	name  []int         // index path of nodeState.Node.Name
	state []int         // index path of nodeState.State
}

// newIntrospector returns an introspector for ml, or nil if ml's layout is
// not the one expected.
func newIntrospector(ml *memberlist.Memberlist) *introspector {
	if ml == nil {
		return nil
	}
	v := reflect.ValueOf(ml).Elem()
	lock := v.FieldByName("nodeLock")
	nodes := v.FieldByName("nodes")
	if !lock.IsValid() || lock.Type() != reflect.TypeFor[sync.RWMutex]() ||
		!nodes.IsValid() || nodes.Kind() != reflect.Slice ||
		nodes.Type().Elem().Kind() != reflect.Pointer || nodes.Type().Elem().Elem().Kind() != reflect.Struct {
		return nil
	}
	ns := nodes.Type().Elem().Elem()
	nodeField, ok1 := ns.FieldByName("Node")
	stateField, ok2 := ns.FieldByName("State") // the shallowest: nodeState.State, not Node.State
	if !ok1 || !ok2 || nodeField.Type != reflect.TypeFor[memberlist.Node]() ||
		stateField.Type != reflect.TypeFor[memberlist.NodeStateType]() || len(stateField.Index) != 1 {
		return nil
	}
	nameField, _ := nodeField.Type.FieldByName("Name")
	return &introspector{
		lock:  (*sync.RWMutex)(unsafe.Pointer(lock.UnsafeAddr())),
		nodes: nodes,
		name:  append(append([]int(nil), nodeField.Index...), nameField.Index...),
		state: stateField.Index,
	}
}

// states returns memberlist's state of every node in its table, itself and
// dead and left nodes not yet forgotten included. It takes memberlist's
// node lock: never call it from a memberlist callback.
func (in *introspector) states() map[string]memberlist.NodeStateType {
	in.lock.RLock()
	defer in.lock.RUnlock()
	out := make(map[string]memberlist.NodeStateType, in.nodes.Len())
	for i := range in.nodes.Len() {
		if e := in.nodes.Index(i); !e.IsNil() {
			s := e.Elem()
			out[s.FieldByIndex(in.name).String()] = memberlist.NodeStateType(s.FieldByIndex(in.state).Int())
		}
	}
	return out
}

// stateLocked returns memberlist's state of the named node.
// REQUIRES: memberlist's node lock, as in memberlist's event callbacks.
func (in *introspector) stateLocked(name string) (memberlist.NodeStateType, bool) {
	for i := range in.nodes.Len() {
		if e := in.nodes.Index(i); !e.IsNil() {
			if s := e.Elem(); s.FieldByIndex(in.name).String() == name {
				return memberlist.NodeStateType(s.FieldByIndex(in.state).Int()), true
			}
		}
	}
	return 0, false
}
