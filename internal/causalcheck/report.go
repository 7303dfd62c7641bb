package causalcheck

import (
	"fmt"
	"strconv"
	"strings"
)

// ViolationKind classifies a violation.
type ViolationKind int

// The kinds of violations. For the ones about causality, "newer" and "older"
// compare versions, and "in the causal past" means reached through program
// order and reads-from (see the package documentation).
const (
	// ReadYourWrites: a session read a key and got a version older than its
	// own earlier successful write of the key.
	ReadYourWrites ViolationKind = iota + 1
	// MonotonicReads: a session read a key and got a version older than one
	// it had read from the key before.
	MonotonicReads
	// MonotonicWrites: a session's write got a version older than its own
	// earlier successful write of the same key, so LWW lets the earlier win.
	MonotonicWrites
	// WritesFollowReads: a session's write got a version older than one the
	// session had read from the same key before.
	WritesFollowReads
	// Causal: a read returned, or a write got, a version older than a write
	// of the same key that is in its causal past through other sessions.
	Causal
	// FracturedRead: a multi-key read returned a version of one key older
	// than a write of that key in the causal past of another of its results.
	FracturedRead
	// Cycle: program order and reads-from form a cycle, for example a
	// session read a write it had not issued yet.
	Cycle
	// NeverWritten: a read (or a replica's final state) returned a version
	// that no write of the history wrote to that key, or a value other than
	// the one its version wrote.
	NeverWritten
	// ReadFailedWrite: a read (or a replica's final state) returned the
	// version or value of a write whose outcome was Failed.
	ReadFailedWrite
	// DuplicateVersion: two writes got the same version.
	DuplicateVersion
	// Divergence: the replicas' final states disagree on a key.
	Divergence
	// LostWrite: a replica's final version of a key is older than a write
	// of the key that took effect (succeeded or was read).
	LostWrite
)

var violationNames = [...]string{
	ReadYourWrites:    "read-your-writes",
	MonotonicReads:    "monotonic-reads",
	MonotonicWrites:   "monotonic-writes",
	WritesFollowReads: "writes-follow-reads",
	Causal:            "causal",
	FracturedRead:     "fractured-read",
	Cycle:             "cycle",
	NeverWritten:      "never-written",
	ReadFailedWrite:   "read-failed-write",
	DuplicateVersion:  "duplicate-version",
	Divergence:        "divergence",
	LostWrite:         "lost-write",
}

func (k ViolationKind) String() string {
	if k >= ReadYourWrites && k <= LostWrite {
		return violationNames[k]
	}
	return "violation(" + strconv.Itoa(int(k)) + ")"
}

// MaxViolations is the most violations a Result lists; Result.Counts counts
// them all.
const MaxViolations = 1000

// Violation is one anomaly of a history.
type Violation struct {
	Kind ViolationKind
	// Key is the key the violation is about.
	Key string
	// Ops are the indices in the history of the operations involved: the
	// oldest cause first, then the chain of operations that carried it, the
	// offending operation last. Empty for a replica's final state with no
	// operation to blame.
	Ops []int
	// Lines renders each of Ops on one line, in the same order.
	Lines []string
	// Msg says what is wrong, in one sentence.
	Msg string

	subject int // sort key: the offending op, or after all ops for final-state checks
}

// String renders the violation: its kind and message, then one indented line
// per operation.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Kind, v.Msg)
	for i, op := range v.Ops {
		fmt.Fprintf(&b, "\n    #%-6d %s", op, v.Lines[i])
	}
	return b.String()
}

// Result is the outcome of Check.
type Result struct {
	// Violations holds the first MaxViolations violations found, ordered by
	// their offending operation (final-state violations last, by key).
	Violations []Violation
	// Counts counts every violation found, by kind, including those beyond
	// MaxViolations.
	Counts map[ViolationKind]int
	// Ops, Sessions and Keys are the size of the history checked.
	Ops, Sessions, Keys int
}

// OK reports whether the history has no violation.
func (r Result) OK() bool { return len(r.Counts) == 0 }

// reportLimit is how many violations String renders in full.
const reportLimit = 10

// String summarizes the result and renders the first violations.
func (r Result) String() string {
	var b strings.Builder
	total := 0
	for _, n := range r.Counts {
		total += n
	}
	fmt.Fprintf(&b, "causalcheck: %d violations in %d ops (%d sessions, %d keys)", total, r.Ops, r.Sessions, r.Keys)
	if total == 0 {
		return b.String()
	}
	sep := ": "
	for k := ReadYourWrites; k <= LostWrite; k++ {
		if n := r.Counts[k]; n > 0 {
			fmt.Fprintf(&b, "%s%s %d", sep, k, n)
			sep = ", "
		}
	}
	for i, v := range r.Violations {
		if i == reportLimit {
			fmt.Fprintf(&b, "\n... and %d more", total-reportLimit)
			break
		}
		b.WriteString("\n" + v.String())
	}
	return b.String()
}
