package causal

import "fmt"

// Version identifies one write: a hybrid logical clock timestamp and the
// site the write originated at. Versions are totally ordered by (HLC, Site);
// the larger version wins (last-writer-wins). The zero Version means "none".
type Version struct {
	HLC  uint64
	Site string
}

// IsZero reports whether v is the zero version ("no version").
func (v Version) IsZero() bool { return v.HLC == 0 && v.Site == "" }

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	switch {
	case v.HLC < w.HLC:
		return -1
	case v.HLC > w.HLC:
		return 1
	case v.Site < w.Site:
		return -1
	case v.Site > w.Site:
		return 1
	}
	return 0
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool { return v.Compare(w) < 0 }

// Max returns the newer of v and w.
func Max(v, w Version) Version {
	if v.Less(w) {
		return w
	}
	return v
}

func (v Version) String() string {
	wall, logical := SplitHLC(v.HLC)
	return fmt.Sprintf("%d.%d@%s", wall, logical, v.Site)
}
