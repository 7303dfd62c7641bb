package causalcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// ver is version hlc of site "a"; verAt names the site.
func ver(hlc uint64) causal.Version                { return verAt(hlc, "a") }
func verAt(hlc uint64, site string) causal.Version { return causal.Version{HLC: hlc, Site: site} }

func put(s, key, value string, v causal.Version) Op {
	return Op{Session: s, Site: "a", Kind: Put, Key: key, Value: value, Version: v, Outcome: OK}
}

func del(s, key string, v causal.Version) Op {
	return Op{Session: s, Site: "a", Kind: Delete, Key: key, Version: v, Outcome: OK}
}

// get reads key; the zero version is a read of a missing key.
func get(s, key, value string, v causal.Version) Op {
	return Op{Session: s, Site: "a", Kind: Get, Key: key, Value: value, Version: v, Outcome: OK}
}

func txn(s string, reads ...Read) Op {
	return Op{Session: s, Site: "a", Kind: GetTxn, Reads: reads, Outcome: OK}
}

// outcome sets an op's outcome; a write that did not succeed loses its
// version unless keep.
func outcome(o Op, out Outcome, keep bool) Op {
	o.Outcome = out
	if !keep {
		o.Version = causal.Version{}
	}
	return o
}

type want struct {
	kind ViolationKind
	ops  []int
}

func TestCheck(t *testing.T) {
	x1, x2, y1 := ver(1), ver(2), ver(2)
	tests := []struct {
		name  string
		h     []Op
		final Final
		want  []want
	}{
		// Valid histories.
		{name: "empty"},
		{
			name: "read your own writes",
			h:    []Op{put("A", "x", "1", x1), get("A", "x", "1", x1), put("A", "x", "2", x2), get("A", "x", "2", x2)},
		},
		{
			name: "a read need not see what is not in its causal past",
			h:    []Op{put("A", "x", "1", x1), get("B", "x", "", causal.Version{}), get("B", "x", "1", x1)},
		},
		{
			name: "brief example, consistent",
			h: []Op{
				put("A", "x", "1", x1), put("A", "y", "1", ver(2)),
				get("B", "y", "1", ver(2)), get("B", "x", "1", x1),
			},
		},
		{
			name: "concurrent writes resolved by last-writer-wins",
			h: []Op{
				put("A", "x", "a", verAt(5, "eu")),
				put("B", "x", "b", verAt(5, "us")),
				get("C", "x", "a", verAt(5, "eu")), get("C", "x", "b", verAt(5, "us")), get("C", "x", "b", verAt(5, "us")),
				get("D", "x", "b", verAt(5, "us")),
				get("A", "x", "b", verAt(5, "us")),
				get("B", "x", "b", verAt(5, "us")),
			},
			final: Final{"eu": {"x": verAt(5, "us")}, "us": {"x": verAt(5, "us")}},
		},
		{
			name: "deletes write tombstones",
			h: []Op{
				put("A", "x", "1", x1), del("A", "x", x2), get("A", "x", "", x2),
				get("B", "x", "1", x1), get("B", "x", "", x2), put("B", "x", "3", ver(3)),
			},
			final: Final{"r1": {"x": ver(3)}, "r2": {"x": ver(3)}},
		},
		{
			name: "unknown writes, read and unread",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				get("A", "x", "", causal.Version{}), // may run before the write applies
				get("B", "x", "1", ver(3)),
				get("B", "x", "1", ver(3)),
				outcome(put("A", "y", "1", causal.Version{}), Unknown, false),
				outcome(put("A", "z", "1", ver(4)), Unknown, true),
				get("C", "z", "", causal.Version{}),
			},
			// y was lost or took effect unseen; z was lost.
			final: Final{"r1": {"x": ver(3), "y": ver(9)}, "r2": {"x": ver(3), "y": ver(9)}},
		},
		{
			name: "a write of unknown outcome is not in its session's later causal past",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				put("A", "y", "1", ver(5)),
				get("B", "y", "1", ver(5)), get("B", "x", "", causal.Version{}),
				get("C", "x", "1", ver(6)),
			},
		},
		{
			name: "a read that could come from either of two unknown writes",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				outcome(put("B", "x", "1", causal.Version{}), Unknown, false),
				get("C", "x", "1", ver(9)), get("C", "x", "1", ver(9)),
			},
			final: Final{"r1": {"x": ver(9)}},
		},
		{
			name: "failed writes are never in the causal past",
			h: []Op{
				outcome(put("A", "x", "1", ver(7)), Failed, true),
				outcome(put("A", "x", "2", causal.Version{}), Failed, false),
				get("A", "x", "", causal.Version{}),
			},
			final: Final{"r1": {}},
		},
		{
			name: "a snapshot read",
			h: []Op{
				put("A", "x", "1", x1), put("A", "y", "1", y1),
				txn("B", Read{"x", "1", x1}, Read{"y", "1", y1}, Read{"z", "", causal.Version{}}),
				txn("C", Read{"x", "1", x1}, Read{"y", "", causal.Version{}}),
				put("C", "y", "2", ver(3)),
			},
		},
		{
			name: "writes follow reads across sessions",
			h: []Op{
				put("A", "x", "1", ver(5)),
				get("B", "x", "1", ver(5)), put("B", "x", "2", ver(6)), put("B", "y", "1", ver(1)),
				get("C", "y", "1", ver(1)), get("C", "x", "2", ver(6)),
			},
		},

		// Session guarantees.
		{
			name: "read your writes: absent",
			h:    []Op{put("A", "x", "1", x1), get("A", "x", "", causal.Version{})},
			want: []want{{ReadYourWrites, []int{0, 1}}},
		},
		{
			name: "read your writes: older",
			h:    []Op{put("A", "x", "1", x1), put("A", "x", "2", x2), get("A", "x", "1", x1)},
			want: []want{{ReadYourWrites, []int{1, 2}}},
		},
		{
			name: "read your writes in a snapshot read",
			h:    []Op{put("A", "x", "1", x1), txn("A", Read{"x", "", causal.Version{}})},
			want: []want{{ReadYourWrites, []int{0, 1}}},
		},
		{
			name: "monotonic reads",
			h: []Op{
				put("A", "x", "1", x1), put("A", "x", "2", x2),
				get("B", "x", "2", x2), get("B", "x", "1", x1),
			},
			want: []want{{MonotonicReads, []int{2, 3}}},
		},
		{
			name: "monotonic reads of a tombstone",
			h: []Op{
				put("A", "x", "1", x1), del("A", "x", x2),
				get("B", "x", "", x2), get("B", "x", "1", x1),
			},
			want: []want{{MonotonicReads, []int{2, 3}}},
		},
		{
			name: "monotonic writes",
			h:    []Op{put("A", "x", "1", ver(5)), put("A", "x", "2", ver(3))},
			want: []want{{MonotonicWrites, []int{0, 1}}},
		},
		{
			name: "writes follow reads",
			h:    []Op{put("A", "x", "1", ver(5)), get("B", "x", "1", ver(5)), put("B", "x", "2", ver(3))},
			want: []want{{WritesFollowReads, []int{1, 2}}},
		},

		// Causality across sessions.
		{
			name: "causal: brief example",
			h: []Op{
				put("A", "x", "1", x1), put("A", "y", "1", ver(2)),
				get("B", "y", "1", ver(2)), get("B", "x", "", causal.Version{}),
			},
			want: []want{{Causal, []int{0, 1, 2, 3}}},
		},
		{
			name: "causal: through three sessions",
			h: []Op{
				put("A", "x", "1", x1),
				get("B", "x", "1", x1), put("B", "y", "1", ver(2)),
				get("C", "y", "1", ver(2)), get("C", "x", "", causal.Version{}),
			},
			want: []want{{Causal, []int{0, 1, 2, 3, 4}}},
		},
		{
			name: "causal: a write older than its causal past",
			h: []Op{
				put("A", "x", "1", ver(5)), put("A", "y", "1", ver(6)),
				get("B", "y", "1", ver(6)), put("B", "x", "2", ver(3)),
			},
			want: []want{{Causal, []int{0, 1, 2, 3}}},
		},
		{
			name: "causal: a write of unknown outcome once read",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				get("B", "x", "1", ver(3)), put("B", "y", "1", ver(4)),
				get("C", "y", "1", ver(4)), get("C", "x", "", causal.Version{}),
			},
			want: []want{{Causal, []int{0, 1, 2, 3, 4}}},
		},
		{
			name: "monotonic reads of a write of unknown outcome",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				get("B", "x", "1", ver(3)), get("B", "x", "", causal.Version{}),
			},
			want: []want{{MonotonicReads, []int{1, 2}}},
		},
		{
			name: "fractured snapshot read",
			h: []Op{
				put("A", "x", "1", x1), put("A", "y", "1", y1),
				txn("B", Read{"x", "", causal.Version{}}, Read{"y", "1", y1}),
			},
			want: []want{{FracturedRead, []int{0, 1, 2}}},
		},
		{
			name: "fractured snapshot read through another session",
			h: []Op{
				put("A", "x", "1", x1),
				get("B", "x", "1", x1), put("B", "y", "1", ver(3)),
				txn("C", Read{"y", "1", ver(3)}, Read{"x", "", causal.Version{}}),
			},
			want: []want{{FracturedRead, []int{0, 1, 2, 3}}},
		},
		{
			name: "cycle: a session reads its own later write",
			h:    []Op{get("A", "x", "1", x1), put("A", "x", "1", x1)},
			want: []want{{Cycle, []int{0, 1}}},
		},
		{
			name: "cycle across two sessions",
			h: []Op{
				get("A", "y", "1", ver(2)), put("A", "x", "1", x1),
				get("B", "x", "1", x1), put("B", "y", "1", ver(2)),
			},
			want: []want{{Cycle, []int{0, 3, 2, 1}}},
		},

		// What was read.
		{
			name: "never written",
			h:    []Op{put("A", "x", "1", x1), get("B", "x", "9", ver(7))},
			want: []want{{NeverWritten, []int{1}}},
		},
		{
			name: "never written to that key",
			h:    []Op{put("A", "x", "1", x1), get("B", "y", "1", x1)},
			want: []want{{NeverWritten, []int{1}}},
		},
		{
			name: "another value than its version wrote",
			h:    []Op{put("A", "x", "1", x1), get("B", "x", "2", x1)},
			want: []want{{NeverWritten, []int{0, 1}}},
		},
		{
			name: "read of a failed write, by version",
			h:    []Op{outcome(put("A", "x", "1", x1), Failed, true), get("B", "x", "1", x1)},
			want: []want{{ReadFailedWrite, []int{0, 1}}},
		},
		{
			name: "read of a failed write, by value",
			h:    []Op{outcome(put("A", "x", "1", x1), Failed, false), get("B", "x", "1", ver(4))},
			want: []want{{ReadFailedWrite, []int{0, 1}}},
		},
		{
			name: "duplicate version",
			h:    []Op{put("A", "x", "1", x1), put("B", "x", "2", x1)},
			want: []want{{DuplicateVersion, []int{0, 1}}},
		},
		{
			// Writes of keys on different shards may share a version.
			name: "one version for two keys",
			h:    []Op{put("A", "x", "1", x1), put("B", "y", "1", x1), get("C", "y", "1", x1), get("C", "x", "1", x1)},
		},
		{
			name: "one unknown write cannot have two versions",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				get("B", "x", "1", ver(3)), get("C", "x", "1", ver(4)),
			},
			want: []want{{NeverWritten, []int{2}}},
		},

		// Final states.
		{
			name:  "divergence",
			h:     []Op{put("A", "x", "1", x1)},
			final: Final{"r1": {"x": x1}, "r2": {}},
			want:  []want{{Divergence, []int{0}}, {LostWrite, []int{0}}},
		},
		{
			name:  "lost write",
			h:     []Op{put("A", "x", "1", x1), put("B", "x", "2", x2)},
			final: Final{"r1": {"x": x1}, "r2": {"x": x1}},
			want:  []want{{LostWrite, []int{1}}},
		},
		{
			name: "lost write proven by a read",
			h: []Op{
				outcome(put("A", "x", "1", causal.Version{}), Unknown, false),
				get("B", "x", "1", ver(3)),
			},
			final: Final{"r1": {}},
			want:  []want{{LostWrite, []int{1}}},
		},
		{
			name:  "final version never written",
			h:     []Op{put("A", "x", "1", x1)},
			final: Final{"r1": {"x": ver(9)}, "r2": {"x": ver(9)}},
			want:  []want{{NeverWritten, nil}},
		},
		{
			name:  "final version of a failed write",
			h:     []Op{outcome(put("A", "x", "1", ver(4)), Failed, true)},
			final: Final{"r1": {"x": ver(4)}},
			want:  []want{{ReadFailedWrite, []int{0}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Check(tt.h, tt.final)
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, v := range res.Violations {
				got = append(got, want{v.Kind, v.Ops})
				if len(v.Lines) != len(v.Ops) {
					t.Errorf("%d lines for %d ops", len(v.Lines), len(v.Ops))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("violations %v, want %v\n%s", got, tt.want, res)
			}
			if res.OK() != (len(tt.want) == 0) {
				t.Errorf("OK() = %v with %d violations", res.OK(), len(tt.want))
			}
		})
	}
}

func TestCheckListsAtMostMaxViolations(t *testing.T) {
	h := []Op{put("A", "x", "1", ver(1))}
	for range MaxViolations + 5 {
		h = append(h, get("A", "x", "", causal.Version{}))
	}
	res, err := Check(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) != MaxViolations || res.Counts[ReadYourWrites] != MaxViolations+5 {
		t.Fatalf("%d violations listed, %v counted", len(res.Violations), res.Counts)
	}
	if !strings.Contains(res.String(), fmt.Sprintf("... and %d more", MaxViolations+5-reportLimit)) {
		t.Errorf("report:\n%s", res)
	}
}

func TestCheckInvalid(t *testing.T) {
	ok := put("A", "x", "1", ver(1))
	at := func(o Op, start, end int64) Op { o.Start, o.End = start, end; return o }
	tests := []struct {
		name string
		h    []Op
	}{
		{"no session", []Op{func() Op { o := ok; o.Session = ""; return o }()}},
		{"no kind", []Op{func() Op { o := ok; o.Kind = 0; return o }()}},
		{"no outcome", []Op{func() Op { o := ok; o.Outcome = 0; return o }()}},
		{"no key", []Op{put("A", "", "1", ver(1))}},
		{"ends before it starts", []Op{at(ok, 5, 4)}},
		{"overlapping ops in a session", []Op{at(ok, 0, 10), at(get("A", "x", "1", ver(1)), 5, 20)}},
		{"out of order in a session", []Op{at(ok, 10, 20), at(get("A", "x", "1", ver(1)), 0, 5)}},
		{"successful write without version", []Op{put("A", "x", "1", causal.Version{})}},
		{"delete with a value", []Op{func() Op { o := del("A", "x", ver(1)); o.Value = "v"; return o }()}},
		{"failed read with a result", []Op{outcome(get("A", "x", "1", ver(1)), Failed, true)}},
		{"value of a missing key", []Op{get("A", "x", "1", causal.Version{})}},
		{"get with multi-key results", []Op{func() Op { o := get("A", "x", "", causal.Version{}); o.Reads = []Read{}; return o }()}},
		{"gettxn with a key", []Op{func() Op { o := txn("A"); o.Key = "x"; return o }()}},
		{"gettxn with a key twice", []Op{txn("A", Read{"x", "", causal.Version{}}, Read{"x", "", causal.Version{}})}},
		{"gettxn result without key", []Op{txn("A", Read{"", "", causal.Version{}})}},
		{"unknown gettxn with results", []Op{outcome(txn("A", Read{"x", "", causal.Version{}}), Unknown, true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Check(tt.h, nil); !errors.Is(err, ErrInvalidHistory) {
				t.Fatalf("Check = %v, want ErrInvalidHistory", err)
			}
		})
	}
	// Ops of different sessions may overlap, and may come in any order.
	h := []Op{at(ok, 10, 20), at(get("B", "x", "1", ver(1)), 0, 30)}
	if _, err := Check(h, nil); err != nil {
		t.Fatal(err)
	}
}

func TestReport(t *testing.T) {
	h := []Op{
		put("A", "x", "1", ver(1)), put("A", "y", "1", ver(2)),
		get("B", "y", "1", ver(2)), get("B", "x", "", causal.Version{}),
	}
	for i := range h {
		h[i].Start, h[i].End = int64(1000+10*i), int64(1005+10*i)
	}
	res, err := Check(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.String()
	for _, want := range []string{
		"causalcheck: 1 violations in 4 ops (2 sessions, 2 keys): causal 1",
		`causal: session "B" read x at absent, but x at 0.1@a is in its causal past`,
		`#0      A@a put x="1" -> 0.1@a ok [+0s,+5ns]`,
		`#2      B@a get y -> "1" 0.2@a ok [+20ns,+25ns]`,
		`#3      B@a get x -> absent ok [+30ns,+35ns]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if got, want := h[4-1].String(), "B@a get x -> absent ok [1030,1035]"; got != want {
		t.Errorf("Op.String = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		op   Op
		want string
	}{
		{outcome(put("A", "x", "1", causal.Version{}), Unknown, false), `A@a put x="1" unknown`},
		{del("A", "x", ver(3)), `A@a delete x -> 0.3@a ok`},
		{outcome(get("A", "x", "", causal.Version{}), Failed, false), `A@a get x failed`},
		{txn("B", Read{"x", "1", ver(1)}, Read{"y", "", causal.Version{}}), `B@a gettxn {x -> "1" 0.1@a, y -> absent} ok`},
	} {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("Op.String = %q, want %q", got, tt.want)
		}
	}
	ok, _ := Check(h[:3], nil)
	if got, want := ok.String(), "causalcheck: 0 violations in 3 ops (2 sessions, 2 keys)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// TestCheckDeterministic checks that the report does not depend on how the
// sessions' ops are interleaved in the history.
func TestCheckDeterministic(t *testing.T) {
	h := []Op{
		put("A", "x", "1", ver(1)), put("A", "y", "1", ver(2)),
		get("B", "y", "1", ver(2)), get("B", "x", "", causal.Version{}),
		get("C", "x", "1", ver(1)), get("C", "x", "", causal.Version{}),
	}
	first, err := Check(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Sessions C, B, A in turn.
	order := []int{4, 2, 0, 5, 3, 1}
	var shuffled []Op
	for _, i := range order {
		shuffled = append(shuffled, h[i])
	}
	second, err := Check(shuffled, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(r Result) []string {
		var out []string
		for _, v := range r.Violations {
			out = append(out, fmt.Sprint(v.Kind, v.Msg))
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(kinds(first), kinds(second)) {
		t.Errorf("interleaving changed the report:\n%s\n%s", first, second)
	}
}
