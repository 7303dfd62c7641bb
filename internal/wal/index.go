package wal

import "sort"

// loc is where one entry's record lives: segment sequence number, offset of
// the record's header in the segment file, and total record length.
type loc struct {
	seg uint32
	off uint32
	n   uint32
}

// run is a contiguous range of a group's entries: first, first+1, ...
type run struct {
	first uint64
	locs  []loc
}

func (r *run) last() uint64 { return r.first + uint64(len(r.locs)) - 1 }

// groupIndex locates every live entry of one group. Raft keeps a group's
// log contiguous, so it is almost always a single run; gaps appear only
// transiently (a follower that installs a snapshot far ahead of its log,
// or replay after the segment of a relocated entry's original copy was
// removed). It is pure: the caller accounts for the locs it gets back.
type groupIndex struct {
	runs []run // sorted, non-empty, non-adjacent
}

func (g *groupIndex) empty() bool { return len(g.runs) == 0 }

func (g *groupIndex) first() uint64 {
	if len(g.runs) == 0 {
		return 0
	}
	return g.runs[0].first
}

func (g *groupIndex) last() uint64 {
	if len(g.runs) == 0 {
		return 0
	}
	return g.runs[len(g.runs)-1].last()
}

// find returns the position of the first run whose last index is >= i.
func (g *groupIndex) find(i uint64) int {
	return sort.Search(len(g.runs), func(k int) bool { return g.runs[k].last() >= i })
}

func (g *groupIndex) get(i uint64) (loc, bool) {
	k := g.find(i)
	if k == len(g.runs) || g.runs[k].first > i {
		return loc{}, false
	}
	return g.runs[k].locs[i-g.runs[k].first], true
}

// put sets entry i's location. It returns the location it replaced, if any.
func (g *groupIndex) put(i uint64, l loc) (old loc, replaced bool) {
	// Fast path: append to the last run.
	if n := len(g.runs); n > 0 && g.runs[n-1].last()+1 == i {
		g.runs[n-1].locs = append(g.runs[n-1].locs, l)
		return loc{}, false
	}
	k := g.find(i)
	if k < len(g.runs) && g.runs[k].first <= i {
		r := &g.runs[k]
		old = r.locs[i-r.first]
		r.locs[i-r.first] = l
		return old, true
	}
	// i is in a gap before runs[k] (or after every run).
	switch {
	case k > 0 && g.runs[k-1].last()+1 == i:
		g.runs[k-1].locs = append(g.runs[k-1].locs, l)
	case k < len(g.runs) && g.runs[k].first == i+1:
		r := &g.runs[k]
		r.locs = append([]loc{l}, r.locs...)
		r.first = i
		return loc{}, false
	default:
		g.runs = append(g.runs, run{})
		copy(g.runs[k+1:], g.runs[k:])
		g.runs[k] = run{first: i, locs: []loc{l}}
		return loc{}, false
	}
	// Appended to runs[k-1]: merge with runs[k] if they now touch.
	if k < len(g.runs) && g.runs[k-1].last()+1 == g.runs[k].first {
		g.runs[k-1].locs = append(g.runs[k-1].locs, g.runs[k].locs...)
		g.runs = append(g.runs[:k], g.runs[k+1:]...)
	}
	return loc{}, false
}

// deleteRange removes the entries in [min, max] and calls drop for each
// removed location.
func (g *groupIndex) deleteRange(min, max uint64, drop func(loc)) {
	if min > max {
		return
	}
	var out []run
	for _, r := range g.runs {
		last := r.last()
		if last < min || r.first > max {
			out = append(out, r)
			continue
		}
		lo, hi := min, max
		if lo < r.first {
			lo = r.first
		}
		if hi > last {
			hi = last
		}
		for _, l := range r.locs[lo-r.first : hi-r.first+1] {
			drop(l)
		}
		if lo > r.first {
			out = append(out, run{first: r.first, locs: r.locs[: lo-r.first : lo-r.first]})
		}
		if hi < last {
			// Copy the kept suffix so that the dropped prefix's memory is
			// released.
			out = append(out, run{first: hi + 1, locs: append([]loc(nil), r.locs[hi-r.first+1:]...)})
		}
	}
	g.runs = out
}

// each calls fn for every entry, in index order.
func (g *groupIndex) each(fn func(i uint64, l loc)) {
	for _, r := range g.runs {
		for k, l := range r.locs {
			fn(r.first+uint64(k), l)
		}
	}
}

// eachFromNewest calls fn for every entry, newest first, until fn returns
// false.
func (g *groupIndex) eachFromNewest(fn func(i uint64, l loc) bool) {
	for k := len(g.runs) - 1; k >= 0; k-- {
		r := g.runs[k]
		for j := len(r.locs) - 1; j >= 0; j-- {
			if !fn(r.first+uint64(j), r.locs[j]) {
				return
			}
		}
	}
}
