package causalcheck

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-db/causeway/internal/causal"
)

// ErrInvalidHistory is wrapped by the errors of Check for a malformed
// history: something a test recorded wrongly, as opposed to a violation,
// which is something the database did wrongly.
var ErrInvalidHistory = errors.New("causalcheck: invalid history")

// Kind is the kind of an operation.
type Kind int

// The kinds of operations.
const (
	// Put writes Op.Value under Op.Key; Op.Version is the version written.
	Put Kind = iota + 1
	// Delete writes a tombstone for Op.Key; Op.Version is its version.
	Delete
	// Get reads Op.Key; Op.Value and Op.Version are what it returned.
	Get
	// GetTxn reads several keys at once, as a causally consistent snapshot;
	// Op.Reads holds what it returned, one entry per key.
	GetTxn
)

func (k Kind) String() string {
	switch k {
	case Put:
		return "put"
	case Delete:
		return "delete"
	case Get:
		return "get"
	case GetTxn:
		return "gettxn"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (k Kind) isWrite() bool { return k == Put || k == Delete }

// Outcome says whether an operation took effect.
type Outcome int

// The outcomes of an operation.
const (
	// OK: the operation took effect and its results are known.
	OK Outcome = iota + 1
	// Failed: the operation definitely did not take effect.
	Failed
	// Unknown: the operation may or may not have taken effect (a timeout, a
	// lost connection); a read with this outcome returned nothing.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Read is one key's result in a multi-key read (GetTxn).
type Read struct {
	Key   string
	Value string
	// Version is the version returned; zero if the key was never written.
	Version causal.Version
}

// Op is one operation of a history.
type Op struct {
	// Session names the sequential client that issued the operation.
	Session string
	// Site names where it was served; for the report only.
	Site string
	Kind Kind
	// Key is the key of a Put, Delete or Get; empty for a GetTxn.
	Key string
	// Value is the value a Put wrote or a Get returned; empty for a Delete,
	// a GetTxn, and a read of a missing key.
	Value string
	// Version is the version a Put or Delete wrote (zero if the write did
	// not succeed and its version is not known) or a Get returned (zero if
	// the key was never written; a deleted key returns its tombstone's).
	Version causal.Version
	// Reads is what a GetTxn returned, one entry per distinct key.
	Reads []Read
	// Start and End are when the operation was invoked and when it
	// returned, in nanoseconds on the test's clock; Start <= End.
	Start, End int64
	Outcome    Outcome
}

// String renders the op on one line: session@site, kind, key, value and
// version (a write's version is left out while unknown), outcome, times;
// for example `A@eu put x="1" -> 1.0@eu ok [100,250]` or
// `B@us get x -> absent ok [300,420]`.
func (o Op) String() string {
	var b strings.Builder
	o.render(&b)
	if o.Start != 0 || o.End != 0 {
		fmt.Fprintf(&b, " [%d,%d]", o.Start, o.End)
	}
	return b.String()
}

// render writes the op without its times.
func (o Op) render(b *strings.Builder) {
	fmt.Fprintf(b, "%s@%s %s", o.Session, o.Site, o.Kind)
	switch o.Kind {
	case Put:
		fmt.Fprintf(b, " %s=%q", o.Key, o.Value)
		if !o.Version.IsZero() {
			b.WriteString(" -> " + o.Version.String())
		}
	case Delete:
		b.WriteString(" " + o.Key)
		if !o.Version.IsZero() {
			b.WriteString(" -> " + o.Version.String())
		}
	case Get:
		b.WriteString(" " + o.Key)
		if o.Outcome == OK {
			b.WriteString(" -> " + readString(o.Value, o.Version))
		}
	case GetTxn:
		b.WriteString(" {")
		for i, r := range o.Reads {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(r.Key + " -> " + readString(r.Value, r.Version))
		}
		b.WriteString("}")
	}
	b.WriteString(" " + o.Outcome.String())
}

// renderAt renders the op with its times relative to base.
func (o Op) renderAt(base int64) string {
	var b strings.Builder
	o.render(&b)
	if o.Start != 0 || o.End != 0 {
		fmt.Fprintf(&b, " [+%v,+%v]", time.Duration(o.Start-base), time.Duration(o.End-base))
	}
	return b.String()
}

func versionString(v causal.Version) string {
	if v.IsZero() {
		return "absent"
	}
	return v.String()
}

func readString(value string, v causal.Version) string {
	if v.IsZero() {
		return "absent"
	}
	return strconv.Quote(value) + " " + v.String()
}

// Final is the state of every replica at the end of a history, once all
// writes had time to propagate: replica (or site) name -> key -> version. A
// key missing from a replica's map has no version there.
type Final map[string]map[string]causal.Version

// validate checks what Check relies on.
func validate(h []Op) error {
	if len(h) > math.MaxInt32 {
		return fmt.Errorf("%w: %d ops, more than %d", ErrInvalidHistory, len(h), math.MaxInt32)
	}
	bad := func(i int, format string, args ...any) error {
		return fmt.Errorf("%w: op %d (%s): %s", ErrInvalidHistory, i, h[i], fmt.Sprintf(format, args...))
	}
	last := make(map[string]int) // session -> index of its previous op
	for i, o := range h {
		if o.Session == "" {
			return bad(i, "no session")
		}
		if o.Kind < Put || o.Kind > GetTxn {
			return bad(i, "unknown kind %d", int(o.Kind))
		}
		if o.Outcome < OK || o.Outcome > Unknown {
			return bad(i, "unknown outcome %d", int(o.Outcome))
		}
		if o.Start > o.End {
			return bad(i, "ends before it starts")
		}
		if j, ok := last[o.Session]; ok && h[j].End > o.Start {
			return bad(i, "starts before op %d of its session ends (a session runs one op at a time, in history order)", j)
		}
		last[o.Session] = i
		if o.Kind != GetTxn && o.Key == "" {
			return bad(i, "no key")
		}
		if o.Kind != GetTxn && o.Reads != nil {
			return bad(i, "a %s has no multi-key results", o.Kind)
		}
		switch o.Kind {
		case Put, Delete:
			if o.Kind == Delete && o.Value != "" {
				return bad(i, "a delete writes no value")
			}
			if o.Outcome == OK && o.Version.IsZero() {
				return bad(i, "a successful write has a version")
			}
		case Get:
			if o.Outcome != OK && (o.Value != "" || !o.Version.IsZero()) {
				return bad(i, "a %s read returns nothing", o.Outcome)
			}
			if o.Version.IsZero() && o.Value != "" {
				return bad(i, "a read of a missing key returns no value")
			}
		case GetTxn:
			if o.Key != "" || o.Value != "" || !o.Version.IsZero() {
				return bad(i, "a gettxn's results are in Reads")
			}
			if o.Outcome != OK && len(o.Reads) > 0 {
				return bad(i, "a %s read returns nothing", o.Outcome)
			}
			seen := make(map[string]bool, len(o.Reads))
			for _, r := range o.Reads {
				switch {
				case r.Key == "":
					return bad(i, "a result has no key")
				case seen[r.Key]:
					return bad(i, "key %q returned twice", r.Key)
				case r.Version.IsZero() && r.Value != "":
					return bad(i, "a read of a missing key returns no value")
				}
				seen[r.Key] = true
			}
		}
	}
	return nil
}
