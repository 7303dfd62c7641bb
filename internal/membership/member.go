package membership

import (
	"errors"
	"strconv"
	"time"
)

// Errors returned by this package.
var (
	// ErrInvalidConfig wraps every Config.Validate error except those of
	// the Meta.
	ErrInvalidConfig = errors.New("membership: invalid config")
	// ErrInvalidMeta wraps every Meta.Validate error: a field is empty,
	// too long or badly formed.
	ErrInvalidMeta = errors.New("membership: invalid meta")
	// ErrMalformedMeta wraps every error decoding a meta that is not a
	// well-formed encoding (truncated, bad version, trailing bytes, ...).
	ErrMalformedMeta = errors.New("membership: malformed meta")
	// ErrJoin is returned by Join when its ctx ended before any address
	// could be contacted; the error also wraps ctx.Err().
	ErrJoin = errors.New("membership: could not join any address")
	// ErrLeaveTimeout is returned by Leave when the leave message could
	// not be handed to another member before the deadline. The node has
	// left locally anyway; the others will find it dead instead of left.
	ErrLeaveTimeout = errors.New("membership: leave not broadcast before the deadline")
	// ErrClosed is returned by Join, UpdateMeta and Leave after Leave
	// (except Leave itself) or Shutdown.
	ErrClosed = errors.New("membership: left or shut down")
)

// State is a member's liveness as this node sees it.
type State int

// Member states. A member moves alive → suspect (a probe failed) → dead
// (suspicion not refuted in time), or alive → left (it announced Leave);
// a suspect member that refutes, and a dead or left one that rejoins,
// becomes alive again.
const (
	// StateAlive: the member answers probes.
	StateAlive State = iota + 1
	// StateSuspect: a probe of the member failed and it has not refuted
	// the suspicion yet.
	StateSuspect
	// StateDead: the suspicion timed out; the member is considered failed.
	StateDead
	// StateLeft: the member left gracefully.
	StateLeft
)

// String returns "alive", "suspect", "dead" or "left".
func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Member is a node as this node sees it.
type Member struct {
	// Meta is what the member announced; Meta.Name() is its name.
	Meta
	// State is the member's liveness.
	State State
	// GossipAddr is the IP:port the member gossips at.
	GossipAddr string
	// DownSince is when gossip declared the member dead or saw it leave
	// (zero while it is alive or suspect).
	DownSince time.Time
}

// EventKind says what happened to a member.
type EventKind int

// Event kinds.
const (
	// EventJoin: a member appeared, or came back after being dead or left.
	EventJoin EventKind = iota + 1
	// EventUpdate: an alive member announced a new Meta.
	EventUpdate
	// EventLeave: a member was declared dead or left (Member.State says
	// which).
	EventLeave
)

// String returns "join", "update" or "leave".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of the set of members Members reports. Becoming
// suspect, and a suspect becoming alive again, are not events.
type Event struct {
	Kind   EventKind
	Member Member
}
