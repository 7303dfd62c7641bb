package causalcheck

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-db/causeway/internal/causal"
)

// Check checks the history h for causal+ consistency and, if final is not
// nil, the replicas' final states for convergence. It returns an error
// wrapping ErrInvalidHistory if h is malformed (see Op), and otherwise a
// Result listing the violations found; the history is consistent when
// Result.OK.
//
// The ops of a session are in program order in h, and a session's ops must
// not overlap in time; the sessions' ops may be interleaved in any order.
// Check does not modify h.
func Check(h []Op, final Final) (Result, error) {
	if err := validate(h); err != nil {
		return Result{}, err
	}
	c := newChecker(h)
	c.attribute()
	c.run()
	if final != nil {
		c.converge(final)
	}
	return c.result(), nil
}

// verOp is a version and the op that wrote (or read) it.
type verOp struct {
	v  causal.Version
	op int32 // -1: none
}

var noVerOp = verOp{op: -1}

// newer returns the newer of a and b, a if they are equal.
func newer(a, b verOp) verOp {
	if b.op >= 0 && (a.op < 0 || a.v.Less(b.v)) {
		return b
	}
	return a
}

// result is one key's result of a successful read.
type result struct {
	key     int32
	ver     causal.Version
	src     int32 // the write read from, or -1
	dropped bool  // the reads-from edge was dropped to break a cycle
}

// pmEntry is the newest version among a session's successful writes of a
// key up to and including the one at position pos.
type pmEntry struct {
	pos int32
	max verOp
}

// sessWrites is one session's prefix maxima for one key.
type sessWrites struct {
	sess    int32
	entries []pmEntry
}

// unkEntry is the newest version of a key among the first idx+1 entries of a
// session's list of unknown-outcome writes.
type unkEntry struct {
	idx int32
	max verOp
}

// session is a session's ops and, while Check walks them, its causal past.
//
// A causal past is a vector clock over sessions (how many ops of each
// session it holds; the successful writes among them count) and a set of
// writes of unknown outcome that took effect, which are in the causal past
// only of what read them. The set is a list in the order writes joined it,
// so that a write's past can name a prefix of its session's list.
type session struct {
	id   int32
	name string
	ops  []int32
	next int32 // position of the next op to process

	vc   []int32
	snap []int32 // a copy of vc shared by writes, nil once vc changed

	unk      []int32               // unknown-outcome writes in the causal past
	unkIdx   map[int32]int32       // write -> its index in unk
	unkByKey map[int32][]unkEntry  // key -> running maxima over unk
	merged   []int32               // session -> prefix of its unk already merged
	readMax  map[int32]verOp       // key -> newest version this session read
	keyWrote map[int32]*sessWrites // key -> this session's successful writes
}

// past is a causal past: the first own ops of session sess, the first vc[t]
// ops of every other session t (of these, the successful writes count), and
// the first unk entries of sess's list of unknown-outcome writes.
type past struct {
	vc   []int32
	sess int32
	own  int32
	unk  int32
}

func (p past) at(t int32) int32 {
	if t == p.sess {
		return p.own
	}
	return p.vc[t]
}

type checker struct {
	h      []Op
	base   int64 // earliest start, for the report
	keyID  map[string]int32
	keys   []string
	sess   []*session
	sessOf []int32 // op -> session
	posOf  []int32 // op -> position in its session
	keyOf  []int32 // op -> key of a Put, Delete or Get

	ver    []causal.Version // write -> its version, known or learned from a read
	readBy []int32          // write -> number of reads that returned it
	res    []result         // results of the successful reads
	resAt  []int32          // op i's results are res[resAt[i]:resAt[i+1]]

	pm map[int32][]*sessWrites // key -> sessions that wrote it successfully

	byVersion map[keyVersion]int32 // (key, version) -> first write that has it
	byValue   map[keyValue][]int32 // (key, value) -> writes with no version
	ambiguous map[keyVersion]bool  // read from one of several writes with no version
	effect    map[int32]verOp      // key -> newest version that took effect

	// The causal past of every write some read returned, set when it is
	// processed (see pastOf).
	wvc  [][]int32
	wown []int32
	wunk []int32

	done    []bool
	waiters map[int32][]int32 // write -> sessions waiting for it

	vs     []Violation
	counts map[ViolationKind]int
}

type keyValue struct {
	key   int32
	value string
}

// keyVersion names a write: versions are unique per key (the product
// gives writes of different keys the same version when they are on
// different shards).
type keyVersion struct {
	key int32
	v   causal.Version
}

func newChecker(h []Op) *checker {
	n := len(h)
	c := &checker{
		h:         h,
		keyID:     make(map[string]int32),
		sessOf:    make([]int32, n),
		posOf:     make([]int32, n),
		keyOf:     make([]int32, n),
		ver:       make([]causal.Version, n),
		readBy:    make([]int32, n),
		resAt:     make([]int32, n+1),
		pm:        make(map[int32][]*sessWrites),
		byVersion: make(map[keyVersion]int32),
		byValue:   make(map[keyValue][]int32),
		ambiguous: make(map[keyVersion]bool),
		effect:    make(map[int32]verOp),
		wvc:       make([][]int32, n),
		wown:      make([]int32, n),
		wunk:      make([]int32, n),
		done:      make([]bool, n),
		waiters:   make(map[int32][]int32),
		counts:    make(map[ViolationKind]int),
	}
	byName := make(map[string]*session)
	for i, o := range h {
		if i == 0 || o.Start < c.base {
			c.base = o.Start
		}
		s := byName[o.Session]
		if s == nil {
			s = &session{id: int32(len(c.sess)), name: o.Session}
			byName[o.Session] = s
			c.sess = append(c.sess, s)
		}
		c.sessOf[i] = s.id
		c.posOf[i] = int32(len(s.ops))
		s.ops = append(s.ops, int32(i))
		c.keyOf[i] = -1
		if o.Kind != GetTxn {
			c.keyOf[i] = c.intern(o.Key)
		}
	}
	for _, s := range c.sess {
		s.vc = make([]int32, len(c.sess))
		s.merged = make([]int32, len(c.sess))
		s.unkIdx = make(map[int32]int32)
		s.unkByKey = make(map[int32][]unkEntry)
		s.readMax = make(map[int32]verOp)
		s.keyWrote = make(map[int32]*sessWrites)
		// The prefix maxima of the session's successful writes.
		for pos, i := range s.ops {
			if !c.definite(i) {
				continue
			}
			k := c.keyOf[i]
			sw := s.keyWrote[k]
			if sw == nil {
				sw = &sessWrites{sess: s.id}
				s.keyWrote[k] = sw
				c.pm[k] = append(c.pm[k], sw)
			}
			m := verOp{h[i].Version, i}
			if n := len(sw.entries); n > 0 {
				m = newer(sw.entries[n-1].max, m)
			}
			sw.entries = append(sw.entries, pmEntry{int32(pos), m})
		}
	}
	return c
}

func (c *checker) intern(key string) int32 {
	id, ok := c.keyID[key]
	if !ok {
		id = int32(len(c.keys))
		c.keyID[key] = id
		c.keys = append(c.keys, key)
	}
	return id
}

// definite reports whether op i is a successful write: it took effect and
// its session knows so.
func (c *checker) definite(i int32) bool {
	return c.h[i].Kind.isWrite() && c.h[i].Outcome == OK
}

// side reports whether op i is a write of unknown outcome that some read
// returned: it took effect, but its session did not learn so.
func (c *checker) side(i int32) bool {
	return c.h[i].Kind.isWrite() && c.h[i].Outcome == Unknown && c.readBy[i] > 0
}

func (c *checker) results(i int32) []result { return c.res[c.resAt[i]:c.resAt[i+1]] }

// attribute finds the write each read returned, and reports the reads of
// versions never written or written by failed writes.
func (c *checker) attribute() {
	for i, o := range c.h {
		if !o.Kind.isWrite() {
			continue
		}
		i := int32(i)
		c.ver[i] = o.Version
		if o.Outcome == OK {
			k := c.keyOf[i]
			c.effect[k] = newer(c.effect[k], verOp{o.Version, i})
		}
		if o.Version.IsZero() {
			kv := keyValue{c.keyOf[i], o.Value}
			c.byValue[kv] = append(c.byValue[kv], i)
			continue
		}
		kv := keyVersion{c.keyOf[i], o.Version}
		if first, dup := c.byVersion[kv]; dup {
			if c.room(DuplicateVersion) {
				c.add(DuplicateVersion, int(i), o.Key, []int32{first, i},
					fmt.Sprintf("two writes of %s got version %s", o.Key, o.Version))
			}
			continue
		}
		c.byVersion[kv] = i
	}
	for i, o := range c.h {
		i := int32(i)
		c.resAt[i] = int32(len(c.res))
		if o.Outcome != OK {
			continue
		}
		switch o.Kind {
		case Get:
			c.addResult(i, o.Key, o.Value, o.Version)
		case GetTxn:
			for _, r := range o.Reads {
				c.addResult(i, r.Key, r.Value, r.Version)
			}
		}
	}
	c.resAt[len(c.h)] = int32(len(c.res))
}

func (c *checker) addResult(i int32, key, value string, v causal.Version) {
	k := c.intern(key)
	src := c.source(i, k, value, v)
	c.res = append(c.res, result{key: k, ver: v, src: src})
	if src >= 0 {
		c.readBy[src]++
	}
	if src >= 0 || c.ambiguous[keyVersion{k, v}] {
		c.effect[k] = newer(c.effect[k], verOp{v, i})
	}
}

// source returns the write that the read op i of key k returned (-1 if
// none can be named), reporting what it cannot accept.
func (c *checker) source(i, k int32, value string, v causal.Version) int32 {
	if v.IsZero() {
		return -1
	}
	key := c.keys[k]
	kv := keyVersion{k, v}
	if w, ok := c.byVersion[kv]; ok {
		wo := &c.h[w]
		switch {
		case wo.Outcome == Failed:
			if c.room(ReadFailedWrite) {
				c.add(ReadFailedWrite, int(i), key, []int32{w, i},
					fmt.Sprintf("read %s at %s, the version of a failed write", key, v))
			}
			return -1
		case wo.Value != value:
			if c.room(NeverWritten) {
				c.add(NeverWritten, int(i), key, []int32{w, i},
					fmt.Sprintf("read %s at %s with value %q, but that version wrote %q", key, v, value, wo.Value))
			}
		}
		return w
	}
	if c.ambiguous[kv] {
		return -1
	}
	// A write whose version its client never learned, named by its value.
	var unknown, failed []int32
	for _, w := range c.byValue[keyValue{k, value}] {
		switch {
		case !c.ver[w].IsZero():
			// Already named by another read, with another version.
		case c.h[w].Outcome == Unknown:
			unknown = append(unknown, w)
		default:
			failed = append(failed, w)
		}
	}
	switch {
	case len(unknown) == 1:
		w := unknown[0]
		c.ver[w] = v
		c.byVersion[kv] = w
		return w
	case len(unknown) > 1:
		c.ambiguous[kv] = true
	case len(failed) > 0:
		if c.room(ReadFailedWrite) {
			c.add(ReadFailedWrite, int(i), key, append(failed, i),
				fmt.Sprintf("read %s = %q at %s, the value of a failed write", key, value, v))
		}
	default:
		if c.room(NeverWritten) {
			c.add(NeverWritten, int(i), key, []int32{i},
				fmt.Sprintf("read %s = %q at %s, which no write of the history wrote", key, value, v))
		}
	}
	return -1
}

// run processes every op after its causal past: in program order, and every
// read after the writes it returned. When no op can go on, program order and
// reads-from form a cycle: it reports it, drops one reads-from edge and goes
// on.
func (c *checker) run() {
	queue := make([]int32, 0, len(c.sess))
	for _, s := range c.sess {
		queue = append(queue, s.id)
	}
	for {
		for len(queue) > 0 {
			s := c.sess[queue[0]]
			queue = queue[1:]
			for s.next < int32(len(s.ops)) {
				i := s.ops[s.next]
				if b := c.blocker(i); b >= 0 {
					c.waiters[b] = append(c.waiters[b], s.id)
					break
				}
				c.process(s, i)
				c.done[i] = true
				s.next++
				if w, ok := c.waiters[i]; ok {
					queue = append(queue, w...)
					delete(c.waiters, i)
				}
			}
		}
		s := c.breakCycle()
		if s < 0 {
			return
		}
		queue = append(queue, s)
	}
}

// blocker returns a write that read op i returned and that has not been
// processed yet, or -1.
func (c *checker) blocker(i int32) int32 {
	for _, r := range c.results(i) {
		if r.src >= 0 && !r.dropped && !c.done[r.src] {
			return r.src
		}
	}
	return -1
}

// breakCycle reports a cycle among the blocked sessions and drops the edge
// that blocks the first of them. It returns that session, or -1 if every
// session is done.
func (c *checker) breakCycle() int32 {
	var s *session
	for _, t := range c.sess {
		if t.next < int32(len(t.ops)) {
			s = t
			break
		}
	}
	if s == nil {
		return -1
	}
	// Every blocked read waits for a write after the blocked read of
	// another (or the same) session: follow them until one repeats.
	at := make(map[int32]int)
	var reads []int32
	for {
		if j, ok := at[s.id]; ok {
			reads = reads[j:]
			break
		}
		at[s.id] = len(reads)
		r := s.ops[s.next]
		reads = append(reads, r)
		s = c.sess[c.sessOf[c.blocker(r)]]
	}
	first := reads[0]
	w := c.blocker(first)
	var ops []int32
	for _, r := range reads {
		ops = append(ops, r, c.blocker(r))
	}
	rs := c.results(first)
	for j := range rs {
		if rs[j].src == w {
			rs[j].dropped = true
			if c.room(Cycle) {
				c.add(Cycle, int(first), c.keys[rs[j].key], ops,
					"program order and reads-from form a cycle: each read below returned the write after it, "+
						"which its session issued after the next read (after the first, for the last write)")
			}
			break
		}
	}
	blocked := c.sessOf[first]
	c.waiters[w] = slices.DeleteFunc(c.waiters[w], func(t int32) bool { return t == blocked })
	return blocked
}

// process checks op i of session s against the causal past of s and adds
// what a read returned to it.
func (c *checker) process(s *session, i int32) {
	o := &c.h[i]
	switch {
	case o.Kind.isWrite():
		if !c.definite(i) && !c.side(i) {
			return
		}
		c.checkWrite(s, i)
		if c.readBy[i] > 0 {
			if s.snap == nil {
				s.snap = slices.Clone(s.vc)
			}
			c.wvc[i] = s.snap
			c.wown[i] = s.next
			if c.definite(i) {
				c.wown[i]++
			}
			c.wunk[i] = int32(len(s.unk))
		}
	case o.Outcome == OK:
		rs := c.results(i)
		p := c.statePast(s)
		for j := range rs {
			if !c.checkRead(s, i, &rs[j], p) && o.Kind == GetTxn {
				c.checkFractured(i, rs, j)
			}
		}
		for _, r := range rs {
			if !r.ver.IsZero() {
				s.readMax[r.key] = newer(s.readMax[r.key], verOp{r.ver, i})
			}
		}
		for _, r := range rs {
			if r.src >= 0 && !r.dropped {
				c.merge(s, r.src)
			}
		}
	}
}

// statePast is the causal past of the next op of s.
func (c *checker) statePast(s *session) past {
	return past{vc: s.vc, sess: s.id, own: s.next, unk: int32(len(s.unk))}
}

// pastOf is the causal past of write x, without x itself if its outcome is
// unknown. x must have been processed and read.
func (c *checker) pastOf(x int32) past {
	return past{vc: c.wvc[x], sess: c.sessOf[x], own: c.wown[x], unk: c.wunk[x]}
}

// merge adds write x and its causal past to the causal past of s.
func (c *checker) merge(s *session, x int32) {
	p := c.pastOf(x)
	for t := range s.vc {
		if v := p.at(int32(t)); v > s.vc[t] {
			s.vc[t] = v
			s.snap = nil
		}
	}
	if from := s.merged[p.sess]; from < p.unk {
		for _, w := range c.sess[p.sess].unk[from:p.unk] {
			c.addUnknown(s, w)
		}
		s.merged[p.sess] = p.unk
	}
	if c.side(x) {
		c.addUnknown(s, x)
	}
}

func (c *checker) addUnknown(s *session, w int32) {
	if _, ok := s.unkIdx[w]; ok {
		return
	}
	idx := int32(len(s.unk))
	s.unk = append(s.unk, w)
	s.unkIdx[w] = idx
	k := c.keyOf[w]
	e := s.unkByKey[k]
	m := verOp{c.ver[w], w}
	if n := len(e); n > 0 {
		m = newer(e[n-1].max, m)
	}
	s.unkByKey[k] = append(e, unkEntry{idx, m})
}

// maxIn returns the newest write of key k in the causal past p.
func (c *checker) maxIn(k int32, p past) verOp {
	best := noVerOp
	for _, sw := range c.pm[k] {
		best = newer(best, sw.before(p.at(sw.sess)))
	}
	e := c.sess[p.sess].unkByKey[k]
	lo, hi := 0, len(e)
	for lo < hi {
		m := (lo + hi) / 2
		if e[m].idx < p.unk {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo > 0 {
		best = newer(best, e[lo-1].max)
	}
	return best
}

// ownMax returns the newest successful write of key k by s before position
// pos.
func (c *checker) ownMax(s *session, k int32, pos int32) verOp {
	if sw := s.keyWrote[k]; sw != nil {
		return sw.before(pos)
	}
	return noVerOp
}

// before returns the newest of the session's writes at positions < pos.
func (sw *sessWrites) before(pos int32) verOp {
	lo, hi := 0, len(sw.entries)
	for lo < hi {
		m := (lo + hi) / 2
		if sw.entries[m].pos < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return noVerOp
	}
	return sw.entries[lo-1].max
}

// contains reports whether write w is in the causal past p.
func (c *checker) contains(p past, w int32) bool {
	if c.definite(w) {
		return p.at(c.sessOf[w]) > c.posOf[w]
	}
	idx, ok := c.sess[p.sess].unkIdx[w]
	return ok && idx < p.unk
}

// checkRead checks one result r of read op i against the causal past p of
// session s; it reports whether it found a violation.
func (c *checker) checkRead(s *session, i int32, r *result, p past) bool {
	k, v := r.key, r.ver
	key := c.keys[k]
	if own := c.ownMax(s, k, s.next); own.op >= 0 && v.Less(own.v) {
		if c.room(ReadYourWrites) {
			c.add(ReadYourWrites, int(i), key, []int32{own.op, i},
				fmt.Sprintf("session %q read %s at %s after writing it at %s", s.name, key, versionString(v), own.v))
		}
		return true
	}
	if prev, ok := s.readMax[k]; ok && v.Less(prev.v) {
		if c.room(MonotonicReads) {
			c.add(MonotonicReads, int(i), key, []int32{prev.op, i},
				fmt.Sprintf("session %q read %s at %s after reading it at %s", s.name, key, versionString(v), prev.v))
		}
		return true
	}
	if m := c.maxIn(k, p); m.op >= 0 && v.Less(m.v) {
		if c.room(Causal) {
			c.add(Causal, int(i), key, append(c.explain(m.op, s.id, s.next), i),
				fmt.Sprintf("session %q read %s at %s, but %s at %s is in its causal past", s.name, key, versionString(v), key, m.v))
		}
		return true
	}
	return false
}

// checkFractured checks result j of the multi-key read i against the causal
// pasts of its other results.
func (c *checker) checkFractured(i int32, rs []result, j int) {
	r := rs[j]
	key := c.keys[r.key]
	for l, o := range rs {
		if l == j || o.src < 0 || o.dropped {
			continue
		}
		if m := c.maxIn(r.key, c.pastOf(o.src)); m.op >= 0 && r.ver.Less(m.v) {
			if c.room(FracturedRead) {
				ops := append(c.explain(m.op, c.sessOf[o.src], c.posOf[o.src]), o.src, i)
				c.add(FracturedRead, int(i), key, ops,
					fmt.Sprintf("a multi-key read returned %s at %s and %s at %s, whose causal past holds %s at %s",
						key, versionString(r.ver), c.keys[o.key], o.ver, key, m.v))
			}
			return
		}
	}
}

// checkWrite checks that write i of session s is newer than every write of
// its key in the causal past of s.
func (c *checker) checkWrite(s *session, i int32) {
	k, v := c.keyOf[i], c.ver[i]
	key := c.keys[k]
	if own := c.ownMax(s, k, s.next); own.op >= 0 && v.Less(own.v) {
		if c.room(MonotonicWrites) {
			c.add(MonotonicWrites, int(i), key, []int32{own.op, i},
				fmt.Sprintf("session %q wrote %s at %s after writing it at %s", s.name, key, v, own.v))
		}
		return
	}
	if prev, ok := s.readMax[k]; ok && v.Less(prev.v) {
		if c.room(WritesFollowReads) {
			c.add(WritesFollowReads, int(i), key, []int32{prev.op, i},
				fmt.Sprintf("session %q wrote %s at %s after reading it at %s", s.name, key, v, prev.v))
		}
		return
	}
	if m := c.maxIn(k, c.statePast(s)); m.op >= 0 && v.Less(m.v) {
		if c.room(Causal) {
			c.add(Causal, int(i), key, append(c.explain(m.op, s.id, s.next), i),
				fmt.Sprintf("session %q wrote %s at %s, but %s at %s is in its causal past", s.name, key, v, key, m.v))
		}
	}
}

// explain returns how write w came to be in the causal past of session t
// before position p: w, then each write and the read that returned it, up
// to the read of t.
func (c *checker) explain(w, t, p int32) []int32 {
	if c.definite(w) && c.sessOf[w] == t && c.posOf[w] < p {
		return []int32{w}
	}
	for _, j := range c.sess[t].ops[:p] {
		for _, r := range c.results(j) {
			x := r.src
			switch {
			case x < 0 || r.dropped:
			case x == w:
				return []int32{w, j}
			case c.contains(c.pastOf(x), w):
				return append(c.explain(w, c.sessOf[x], c.posOf[x]), x, j)
			}
		}
	}
	return []int32{w}
}

// converge checks the replicas' final states: they agree on every key, and
// each holds a version that was written and is at least as new as every
// write that took effect.
func (c *checker) converge(final Final) {
	replicas := make([]string, 0, len(final))
	keySet := make(map[string]bool)
	for r, kv := range final {
		replicas = append(replicas, r)
		for k := range kv {
			keySet[k] = true
		}
	}
	slices.Sort(replicas)
	for i, o := range c.h {
		if o.Kind.isWrite() && !c.ver[i].IsZero() {
			keySet[o.Key] = true
		}
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Keys where a write of unknown outcome and version may have taken
	// effect unseen.
	unseen := make(map[string]bool)
	for i, o := range c.h {
		if o.Kind.isWrite() && o.Outcome == Unknown && c.ver[i].IsZero() {
			unseen[o.Key] = true
		}
	}
	if len(replicas) == 0 {
		return
	}
	for n, key := range keys {
		subject := len(c.h) + n
		holders := make(map[causal.Version][]string)
		var vers []causal.Version
		for _, r := range replicas {
			v := final[r][key]
			if _, ok := holders[v]; !ok {
				vers = append(vers, v)
			}
			holders[v] = append(holders[v], r)
		}
		slices.SortFunc(vers, causal.Version.Compare)
		if len(vers) > 1 && c.room(Divergence) {
			var parts []string
			var ops []int32
			for _, v := range vers {
				parts = append(parts, fmt.Sprintf("%s at %s", strings.Join(holders[v], ","), versionString(v)))
				if k, known := c.keyID[key]; known {
					if w, ok := c.byVersion[keyVersion{k, v}]; ok {
						ops = append(ops, w)
					}
				}
			}
			c.add(Divergence, subject, key, ops, fmt.Sprintf("replicas disagree on %s: %s", key, strings.Join(parts, "; ")))
		}
		k, known := c.keyID[key]
		for _, v := range vers {
			who := replicasText(holders[v])
			if eff, ok := c.effect[k]; known && ok && v.Less(eff.v) && c.room(LostWrite) {
				c.add(LostWrite, subject, key, []int32{eff.op},
					fmt.Sprintf("%s %s at %s, older than %s, which took effect", who, key, versionString(v), eff.v))
			}
			if v.IsZero() {
				continue
			}
			w, ok := c.byVersion[keyVersion{k, v}]
			ok = ok && known
			switch {
			case ok && c.h[w].Outcome == Failed:
				if c.room(ReadFailedWrite) {
					c.add(ReadFailedWrite, subject, key, []int32{w},
						fmt.Sprintf("%s %s at %s, the version of a failed write", who, key, v))
				}
			case ok:
			case !ok && known && c.ambiguous[keyVersion{k, v}]:
			case !ok && unseen[key]:
			default:
				if c.room(NeverWritten) {
					c.add(NeverWritten, subject, key, nil,
						fmt.Sprintf("%s %s at %s, which no write of the history wrote to %s", who, key, v, key))
				}
			}
		}
	}
}

// replicasText is "replica r1 holds" or "replicas r1, r2 hold".
func replicasText(names []string) string {
	if len(names) == 1 {
		return "replica " + names[0] + " holds"
	}
	return "replicas " + strings.Join(names, ", ") + " hold"
}

// room counts a violation of kind k and reports whether the result has room
// to list it.
func (c *checker) room(k ViolationKind) bool {
	c.counts[k]++
	return len(c.vs) < MaxViolations
}

func (c *checker) add(k ViolationKind, subject int, key string, ops []int32, msg string) {
	v := Violation{Kind: k, Key: key, Msg: msg, subject: subject}
	for _, op := range ops {
		v.Ops = append(v.Ops, int(op))
		v.Lines = append(v.Lines, c.h[op].renderAt(c.base))
	}
	c.vs = append(c.vs, v)
}

func (c *checker) result() Result {
	slices.SortStableFunc(c.vs, func(a, b Violation) int { return cmp.Compare(a.subject, b.subject) })
	r := Result{Violations: c.vs, Ops: len(c.h), Sessions: len(c.sess), Keys: len(c.keys)}
	if len(c.counts) > 0 {
		r.Counts = c.counts
	}
	return r
}
