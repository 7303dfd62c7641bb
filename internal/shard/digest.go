package shard

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/storage"
)

// Replica consistency checks (docs/adr/012-replica-digests.md).
//
// The leader proposes a DigestCheck command every DigestInterval, and once
// when it starts; a follower that starts asks its leader for one. Every
// replica that applies the command fingerprints its state as of the
// command's index (the FSM hands the digest worker a read transaction),
// then asks the group's other replicas for their digests at that index and
// judges itself by majority. A replica found in the minority, or in a
// group where every replica answered and no digest has a majority, refuses
// reads until a later check finds it in the majority again or a snapshot
// replaces its state.

// ErrCorrupt: this replica's state differed from its group's at the last
// consistency check, so it refuses reads until it is repaired. Another
// replica can serve them: retryable there.
var ErrCorrupt = errors.New("shard: replica failed its consistency check; it serves no reads until it is repaired")

// DigestState says whether a replica has its digest at an index.
type DigestState int

// The digest states.
const (
	// DigestReady: the digest at the index is known.
	DigestReady DigestState = iota + 1
	// DigestPending: the replica has not applied the index yet, or is
	// still computing the digest. Ask again.
	DigestPending
	// DigestUnknown: the replica went past the index without a digest (a
	// snapshot was installed over it, it restarted, it was not hosted).
	DigestUnknown
)

// Verdict is a replica's standing after a consistency check.
type Verdict int

// The verdicts. The zero Verdict means no check has concluded.
const (
	// VerdictHealthy: a majority of the group's replicas had this
	// replica's digest.
	VerdictHealthy Verdict = iota + 1
	// VerdictCorrupt: a majority of the group's replicas had another
	// digest.
	VerdictCorrupt
	// VerdictSuspect: every replica answered and no digest had a majority
	// (two replicas that differ): none can be trusted.
	VerdictSuspect
	// VerdictIncomplete: too few replicas answered to decide; the
	// replica's standing is unchanged.
	VerdictIncomplete
)

func (v Verdict) String() string {
	switch v {
	case VerdictHealthy:
		return "healthy"
	case VerdictCorrupt:
		return "corrupt"
	case VerdictSuspect:
		return "suspect"
	case VerdictIncomplete:
		return "incomplete"
	}
	return "none"
}

// Peers reaches the other replicas of a group for consistency checks. The
// peer package implements it over the Node service.
type Peers interface {
	// ReplicaDigest asks the node at peer address addr for the digest of
	// its replica of shard id at index.
	ReplicaDigest(ctx context.Context, addr string, id storage.ShardID, index uint64) (storage.Digest, DigestState, error)
	// CheckReplicas asks the node at addr, which must lead shard id, to
	// start a consistency check.
	CheckReplicas(ctx context.Context, addr string, id storage.ShardID) error
}

// CheckStatus describes a replica's consistency checks.
type CheckStatus struct {
	// Checks counts the checks this replica concluded (any verdict).
	Checks int
	// Index is the index of the latest check that decided a verdict
	// other than VerdictIncomplete.
	Index uint64
	// Verdict is the replica's standing: that check's verdict, or zero
	// when none decided yet or a snapshot replaced the state since.
	Verdict Verdict
	// Digests are the digests of the replicas, by node id, at Index.
	Digests map[string]storage.Digest
	// Recent are the latest checks this replica concluded, by index.
	Recent []CheckResult
}

// CheckResult is the outcome of one check on one replica.
type CheckResult struct {
	Index   uint64
	Verdict Verdict
}

// Refused reports whether the replica refuses reads.
func (s CheckStatus) Refused() bool {
	return s.Verdict == VerdictCorrupt || s.Verdict == VerdictSuspect
}

// keepDigests is how many recent digests a replica keeps for the others
// to ask for.
const keepDigests = 8

// checker is a group's share of the consistency checks.
type checker struct {
	mu      sync.Mutex
	wake    chan struct{}             // a capture waits; REQUIRES: mu to create
	pending *capture                  // REQUIRES: mu
	busy    uint64                    // index whose digest is being computed; REQUIRES: mu
	results map[uint64]storage.Digest // REQUIRES: mu
	status  CheckStatus               // REQUIRES: mu
	// The last check this replica proposed as leader, and when; it is
	// under way until it concludes here or DigestTimeout passes.
	proposed   uint64        // REQUIRES: mu
	proposedAt time.Time     // REQUIRES: mu
	concluded  uint64        // the newest index of a concluded check; REQUIRES: mu
	now        chan struct{} // another replica asked for a check; REQUIRES: mu to create
}

// capture is the state of the shard at a DigestCheck index.
type capture struct {
	index uint64
	tx    *storage.Tx
}

func (c *checker) wakeCh() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	return c.wake
}

func (c *checker) nowCh() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now == nil {
		c.now = make(chan struct{}, 1)
	}
	return c.now
}

// capture is the FSM's Digest hook: it must not block, so a capture that
// finds another one still waiting is dropped (the replica answers
// DigestUnknown for its index).
func (c *checker) capture(index uint64, tx *storage.Tx) {
	wake := c.wakeCh()
	c.mu.Lock()
	if c.pending != nil {
		c.mu.Unlock()
		_ = tx.Rollback()
		return
	}
	c.pending = &capture{index: index, tx: tx}
	c.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// take returns the waiting capture, if any, and marks its index busy.
func (c *checker) take() *capture {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	if p != nil {
		c.busy = p.index
	}
	return p
}

// drop rolls back a capture nobody will compute (the group is closed).
func (c *checker) drop() {
	if p := c.take(); p != nil {
		_ = p.tx.Rollback()
	}
}

// restored is the FSM's Restored hook: the state is now the leader's
// snapshot, so an earlier verdict no longer describes it.
func (c *checker) restored(uint64) {
	c.mu.Lock()
	c.status.Verdict = 0
	c.mu.Unlock()
}

// done ends the computation of the digest at index; ok is false when it
// failed.
func (c *checker) done(index uint64, d storage.Digest, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = 0
	if !ok {
		return
	}
	if c.results == nil {
		c.results = map[uint64]storage.Digest{}
	}
	c.results[index] = d
	for len(c.results) > keepDigests {
		oldest := index
		for i := range c.results {
			oldest = min(oldest, i)
		}
		delete(c.results, oldest)
	}
}

// ReplicaDigest returns this replica's digest at index, if it has it.
func (g *Group) ReplicaDigest(index uint64) (storage.Digest, DigestState) {
	// The FSM calls the capture hook before it publishes the applied
	// index, so a capture of an applied index is visible below.
	applied, _, _ := g.fsm.Applied()
	g.checks.mu.Lock()
	defer g.checks.mu.Unlock()
	if d, ok := g.checks.results[index]; ok {
		return d, DigestReady
	}
	if index > applied || g.checks.busy == index || (g.checks.pending != nil && g.checks.pending.index == index) {
		return storage.Digest{}, DigestPending
	}
	return storage.Digest{}, DigestUnknown
}

// CheckStatus returns the state of this replica's consistency checks.
func (g *Group) CheckStatus() CheckStatus {
	g.checks.mu.Lock()
	defer g.checks.mu.Unlock()
	st := g.checks.status
	st.Digests = make(map[string]storage.Digest, len(g.checks.status.Digests))
	for k, v := range g.checks.status.Digests {
		st.Digests[k] = v
	}
	st.Recent = append([]CheckResult(nil), g.checks.status.Recent...)
	return st
}

// Corrupt reports whether this replica refuses reads because of a failed
// consistency check.
func (g *Group) Corrupt() bool {
	g.checks.mu.Lock()
	defer g.checks.mu.Unlock()
	return g.checks.status.Refused()
}

// refusal returns the error a read gets while the replica refuses reads.
func (g *Group) refusal() error {
	g.checks.mu.Lock()
	defer g.checks.mu.Unlock()
	if st := g.checks.status; st.Refused() {
		return fmt.Errorf("%w: shard %s, %s at the check of index %d", ErrCorrupt, g.id, st.Verdict, st.Index)
	}
	return nil
}

// RequestCheck asks this replica, which must lead the shard, to start a
// consistency check: its check loop proposes a DigestCheck command soon,
// unless one it proposed less than DigestTimeout ago has not concluded
// here yet. It does not wait.
func (g *Group) RequestCheck() error {
	if g.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	select {
	case g.checks.nowCh() <- struct{}{}:
	default:
	}
	return nil
}

// proposeCheck proposes a DigestCheck command and waits until it is
// applied here. Only the check loop calls it: raft answers every future
// while it runs, and Close stops raft only after the loop has ended.
func (g *Group) proposeCheck() error {
	data, err := fsm.Encode(&peerv1.Command{Op: &peerv1.Command_DigestCheck{DigestCheck: &peerv1.DigestCheck{}}})
	if err != nil {
		return err
	}
	f := g.raft.Apply(data, g.cfg.DigestTimeout)
	if err := f.Error(); err != nil {
		return g.raftErr(err)
	}
	g.checks.mu.Lock()
	if f.Index() > g.checks.concluded { // its check may be over already
		g.checks.proposed, g.checks.proposedAt = f.Index(), time.Now()
	}
	g.checks.mu.Unlock()
	return nil
}

// underWay reports whether a check this replica proposed less than d ago
// has not concluded here yet.
func (c *checker) underWay(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proposed != 0 && time.Since(c.proposedAt) < d
}

// startChecks starts the digest worker and the check loop, unless checks
// are off. A capture made before the worker starts waits for it.
func (g *Group) startChecks() {
	if g.cfg.DigestInterval <= 0 || g.deps.Replicas == nil {
		return
	}
	g.wg.Add(2)
	go g.digestLoop()
	go g.checkLoop()
}

// digestHook is the FSM's Digest hook: nil (no read transactions) when
// checks are off.
func (g *Group) digestHook() func(uint64, *storage.Tx) {
	if g.cfg.DigestInterval <= 0 || g.deps.Replicas == nil {
		return nil
	}
	return g.checks.capture
}

// digestLoop computes the digest of every capture and starts its
// comparison with the other replicas.
func (g *Group) digestLoop() {
	defer g.wg.Done()
	wake := g.checks.wakeCh()
	for {
		select {
		case <-g.stop:
			return
		case <-wake:
		}
		p := g.checks.take()
		if p == nil {
			continue
		}
		start := time.Now()
		d, err := digestOf(p.tx, g.id)
		_ = p.tx.Rollback()
		if err == nil && d.Index != p.index {
			err = fmt.Errorf("digest describes index %d", d.Index)
		}
		g.checks.done(p.index, d, err == nil)
		if err != nil {
			g.log.Warn("could not compute the replica digest", "index", p.index, "err", err)
			continue
		}
		g.deps.Metrics.observeDigest(time.Since(start))
		g.wg.Add(1)
		go g.compare(p.index, d)
	}
}

func digestOf(tx *storage.Tx, id storage.ShardID) (storage.Digest, error) {
	s, err := tx.Shard(id)
	if err != nil {
		return storage.Digest{}, err
	}
	return s.Digest()
}

// checkLoop asks for a check once this replica knows its leader after it
// opened; then, while it leads, it proposes one every DigestInterval and
// when another replica asks (RequestCheck).
func (g *Group) checkLoop() {
	defer g.wg.Done()
	for backoff := 100 * time.Millisecond; !g.startCheck(); backoff = min(2*backoff, 5*time.Second) {
		retry := time.NewTimer(backoff)
		select {
		case <-g.stop:
			retry.Stop()
			return
		case <-retry.C:
		}
	}
	t := time.NewTicker(g.cfg.DigestInterval)
	defer t.Stop()
	now := g.checks.nowCh()
	for {
		asked := false
		select {
		case <-g.stop:
			return
		case <-t.C:
		case <-now:
			asked = true
		}
		switch {
		case !g.IsLeader():
		case g.Corrupt():
			g.handOff()
		case asked && g.checks.underWay(g.cfg.DigestTimeout):
		default:
			if err := g.proposeCheck(); err != nil && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeadershipLost) {
				g.log.Warn("could not start a consistency check", "err", err)
			}
		}
	}
}

// startCheck starts the check at start: it reports whether that is done
// (or there is nothing to compare with), false to try again. It needs a
// leader, not a replica that has applied its log: the DigestCheck command
// goes to the end of the log, so every replica digests its state only
// after everything before it. (It must not call CaughtUp, which latches.)
func (g *Group) startCheck() bool {
	if g.Leader() == "" {
		return false
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	if len(cf.Configuration().Servers) < 2 {
		return true
	}
	if g.IsLeader() {
		return g.proposeCheck() == nil
	}
	addr := g.LeaderAddr()
	if addr == "" {
		return false
	}
	ctx, cancel := g.checkContext()
	defer cancel()
	return g.deps.Replicas.CheckReplicas(ctx, addr, g.id) == nil
}

// checkContext bounds one step of a check by DigestTimeout and by Close.
func (g *Group) checkContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.DigestTimeout)
	go func() { // ends with ctx, which the caller cancels
		select {
		case <-g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// compare collects the other replicas' digests at index, judges this
// replica and records the verdict.
func (g *Group) compare(index uint64, mine storage.Digest) {
	defer g.wg.Done()
	ctx, cancel := g.checkContext()
	defer cancel()
	cf := g.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return
	}
	servers := cf.Configuration().Servers
	if len(servers) < 2 {
		return
	}
	self := raft.ServerID(g.deps.NodeID)
	digests := map[string]storage.Digest{g.deps.NodeID: mine}
	waiting := map[raft.ServerID]raft.ServerAddress{}
	member := false
	for _, s := range servers {
		if s.ID != self {
			waiting[s.ID] = s.Address
		}
		member = member || s.ID == self
	}
	if !member {
		return // being removed from the group
	}
	// Ask again after 50 ms, backing off to 1 s: a replica that lags
	// answers soon, one that is cut off may not answer in this check.
	backoff := 50 * time.Millisecond
collect:
	for ; len(waiting) > 0; backoff = min(2*backoff, time.Second) {
		for id, addr := range waiting {
			actx, acancel := context.WithTimeout(ctx, time.Second)
			d, st, err := g.deps.Replicas.ReplicaDigest(actx, string(addr), g.id, index)
			acancel()
			switch {
			case err != nil || st == DigestPending:
				continue // ask again
			case st == DigestReady:
				digests[string(id)] = d
			}
			delete(waiting, id)
		}
		if len(waiting) == 0 {
			break
		}
		next := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			next.Stop()
			break collect
		case <-next.C:
		}
	}
	select {
	case <-g.stop:
		return
	default:
	}
	g.conclude(index, mine, digests, len(servers))
}

// judge decides a replica's verdict from the digests that answered (its own
// included) in a group of n replicas: healthy when more than half of the n
// have its digest; corrupt when more than half have another one; suspect
// when all n answered and no digest has a majority; incomplete otherwise.
func judge(mine storage.Digest, digests map[string]storage.Digest, n int) Verdict {
	counts := map[storage.Digest]int{}
	for _, d := range digests {
		counts[d]++
	}
	if 2*counts[mine] > n {
		return VerdictHealthy
	}
	for _, c := range counts {
		if 2*c > n {
			return VerdictCorrupt
		}
	}
	if len(digests) == n {
		return VerdictSuspect
	}
	return VerdictIncomplete
}

// conclude records the verdict of the check at index and reports a
// mismatch.
func (g *Group) conclude(index uint64, mine storage.Digest, digests map[string]storage.Digest, n int) {
	v := judge(mine, digests, n)
	mismatch := false
	for _, d := range digests {
		mismatch = mismatch || d != mine
	}
	result := "match"
	switch {
	case mismatch:
		result = "mismatch"
	case len(digests) < n:
		result = "incomplete"
	}
	g.deps.Metrics.observeCheck(g.label, result)

	g.checks.mu.Lock()
	g.checks.status.Checks++
	recent := append(g.checks.status.Recent, CheckResult{Index: index, Verdict: v})
	sort.Slice(recent, func(i, j int) bool { return recent[i].Index < recent[j].Index })
	g.checks.status.Recent = recent[max(0, len(recent)-keepDigests):]
	g.checks.concluded = max(g.checks.concluded, index)
	if g.checks.proposed != 0 && index >= g.checks.proposed {
		g.checks.proposed = 0
	}
	before := g.checks.status.Verdict
	if v != VerdictIncomplete && index >= g.checks.status.Index {
		g.checks.status.Index, g.checks.status.Verdict = index, v
		g.checks.status.Digests = digests
	}
	after := g.checks.status.Verdict
	g.checks.mu.Unlock()

	if mismatch {
		g.log.Error("shard replicas differ at a consistency check",
			"index", index, "verdict", v.String(), "answered", len(digests), "replicas", n,
			"suspects", strings.Join(suspects(digests, n), ","),
			"digests", formatDigests(digests), "slots", fmt.Sprint(differingSlots(digests)))
	} else if len(digests) < n {
		g.log.Debug("consistency check incomplete", "index", index, "answered", len(digests), "replicas", n)
	}
	switch {
	case after == VerdictCorrupt && before != VerdictCorrupt:
		g.log.Error("this replica's state differs from the majority of its group: it refuses reads until it is repaired (remove it so that it is re-created from a snapshot; see docs/operations.md)", "index", index)
		if g.IsLeader() {
			g.handOff()
		}
	case after == VerdictSuspect && before != VerdictSuspect:
		g.log.Error("the replicas of this shard differ and no digest has a majority: this replica refuses reads until it is repaired (see docs/operations.md)", "index", index)
	case (before == VerdictCorrupt || before == VerdictSuspect) && after == VerdictHealthy:
		g.log.Info("this replica agrees with its group again: it serves reads", "index", index)
	}
}

// DiffersFromMajority reports whether the last concluded consistency check
// found node's replica with a digest that no majority of the group shares
// (corrupt or suspect there): such a replica must not be given the
// leadership, which it would hand over again at its next check.
func (g *Group) DiffersFromMajority(node string) bool {
	st := g.CheckStatus()
	d, ok := st.Digests[node]
	if !ok {
		return false
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	n := 0
	for _, other := range st.Digests {
		if other == d {
			n++
		}
	}
	return 2*n <= len(cf.Configuration().Servers)
}

// handOff moves the leadership of a leader that failed a consistency check
// to a voter that agreed with the majority.
func (g *Group) handOff() {
	st := g.CheckStatus()
	counts := map[storage.Digest]int{}
	for _, d := range st.Digests {
		counts[d]++
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	for _, s := range cf.Configuration().Servers {
		d, ok := st.Digests[string(s.ID)]
		if !ok || s.Suffrage != raft.Voter || string(s.ID) == g.deps.NodeID || 2*counts[d] <= len(cf.Configuration().Servers) {
			continue
		}
		if err := g.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
			g.log.Warn("could not hand the leadership of a corrupt replica over", "to", string(s.ID), "err", err)
			return
		}
		g.log.Warn("handed the leadership of a corrupt replica over", "to", string(s.ID))
		return
	}
}

// suspects returns the replicas whose digest is not shared by a majority
// of the group's n replicas, sorted: the odd ones out, or every replica
// that answered when no digest has a majority.
func suspects(digests map[string]storage.Digest, n int) []string {
	counts := map[storage.Digest]int{}
	for _, d := range digests {
		counts[d]++
	}
	var out []string
	for id, d := range digests {
		if 2*counts[d] <= n {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// formatDigests renders digests by replica, sorted: "n1=8c1f…/120 n2=…".
func formatDigests(digests map[string]storage.Digest) string {
	ids := make([]string, 0, len(digests))
	for id := range digests {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", id, digests[id])
	}
	return b.String()
}

// differingSlots returns the slots in which any two digests differ.
func differingSlots(digests map[string]storage.Digest) []int {
	var first *storage.Digest
	set := map[int]bool{}
	for _, d := range digests {
		if first == nil {
			d := d
			first = &d
			continue
		}
		for _, s := range first.DiffSlots(d) {
			set[s] = true
		}
	}
	out := make([]int, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}
