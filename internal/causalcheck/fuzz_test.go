package causalcheck

import (
	"errors"
	"fmt"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// FuzzCheck decodes arbitrary bytes into a small history, well-formed or not,
// and the replicas' final states: Check never panics, rejects only with
// ErrInvalidHistory, and what it reports names ops of the history.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 3, 1, 1, 1, 1, 1, 0, 4, 0, 6, 1, 1, 1, 1, 0, 9, 2})
	f.Add([]byte{3, 12, 1, 1, 0, 1, 2, 0, 0, 2, 1, 1, 1, 2, 0, 3, 1, 2, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, final := decodeHistory(data)
		res, err := Check(h, final)
		if err != nil {
			if !errors.Is(err, ErrInvalidHistory) {
				t.Fatalf("Check = %v, want ErrInvalidHistory", err)
			}
			return
		}
		total := 0
		for _, n := range res.Counts {
			total += n
		}
		if total < len(res.Violations) || res.OK() != (total == 0) {
			t.Fatalf("%d violations listed, %d counted, OK %v", len(res.Violations), total, res.OK())
		}
		for _, v := range res.Violations {
			if len(v.Lines) != len(v.Ops) {
				t.Fatalf("%d lines for %d ops", len(v.Lines), len(v.Ops))
			}
			for _, op := range v.Ops {
				if op < 0 || op >= len(h) {
					t.Fatalf("%s names op %d of %d", v, op, len(h))
				}
			}
		}
		_ = res.String()
	})
}

// decodeHistory reads ops from data, a few bytes each: three sessions,
// every kind and outcome (including invalid ones), three keys (and none),
// small versions of two sites, times that may overlap.
func decodeHistory(data []byte) ([]Op, Final) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	keys := []string{"", "x", "y", "z"}
	values := []string{"", "1", "2"}
	version := func() causal.Version {
		return causal.Version{HLC: uint64(next() % 5), Site: []string{"", "a", "b"}[next()%3]}
	}
	var h []Op
	var final Final
	var clock int64
	for len(data) > 0 && len(h) < 64 {
		b := next()
		if b == 255 {
			final = Final{}
			for r := range 2 {
				m := make(map[string]causal.Version)
				for _, k := range keys[1:] {
					if v := version(); !v.IsZero() {
						m[k] = v
					}
				}
				final[fmt.Sprintf("r%d", r)] = m
			}
			continue
		}
		op := Op{
			Session: fmt.Sprintf("s%d", b%3),
			Kind:    Kind(b / 3 % 5),
			Outcome: Outcome(b / 15 % 4),
			Key:     keys[next()%4],
			Value:   values[next()%3],
			Version: version(),
		}
		clock += int64(next()%4) - 1
		op.Start, op.End = clock, clock+int64(next()%4)-1
		if op.Kind == GetTxn {
			op.Key, op.Value, op.Version = "", "", causal.Version{}
			for range next() % 4 {
				op.Reads = append(op.Reads, Read{Key: keys[next()%4], Value: values[next()%3], Version: version()})
			}
		}
		h = append(h, op)
	}
	return h, final
}
