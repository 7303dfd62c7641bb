package transport

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// leaseGroup starts group g on nodes with every replica promising promise
// and reading its raft's term, and returns the rafts and the leader.
func leaseGroup(t *testing.T, nodes []*testNode, promise time.Duration) ([]*raft.Raft, *raft.Raft) {
	t.Helper()
	peers := servers(nodes...)
	var rafts []*raft.Raft
	for _, n := range nodes {
		r, _ := n.startGroup(t, "g", raft.NewDiscardSnapshotStore(), nil, peers)
		gt, err := n.net.group("g")
		if err != nil {
			t.Fatal(err)
		}
		gt.SetLeasePromise(promise, false)
		gt.SetTermSource(r.CurrentTerm)
		rafts = append(rafts, r)
	}
	return rafts, waitLeader(t, rafts...)
}

// TestReadLeaseFromAnswers: the followers' answers carry their promise,
// and the leader's transport turns them into leases that end half a
// promise after the request answered was sent; it also knows what each
// follower acknowledged (Acknowledged, the catalog's promotions); a
// leadership transfer the leader sends voids the leases for the term
// (Transferred).
func TestReadLeaseFromAnswers(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "n1", nil), newTestNode(t, "n2", nil), newTestNode(t, "n3", nil)}
	const promise = 2 * time.Second
	rafts, leader := leaseGroup(t, nodes, promise)
	applyN(t, rafts, 1, 10)
	var lt *groupTransport
	for i, r := range rafts {
		if r == leader {
			lt, _ = nodes[i].net.group("g")
		}
	}
	term := leader.CurrentTerm()
	for _, n := range nodes {
		if raft.ServerAddress(n.addr) == lt.LocalAddr() {
			continue
		}
		waitFor(t, 10*time.Second, "a lease from "+n.id, func() bool {
			until := lt.FollowerLease(raft.ServerAddress(n.addr), term)
			left := time.Until(until)
			return left > 0 && left <= promise/2
		})
	}
	if lt.Transferred(term) {
		t.Fatal("a lease is void before any transfer")
	}
	for _, n := range nodes {
		if raft.ServerAddress(n.addr) == lt.LocalAddr() {
			continue
		}
		waitFor(t, 10*time.Second, n.id+" acknowledging the commit index", func() bool {
			idx, ok := lt.Acknowledged(raft.ServerAddress(n.addr), term)
			return ok && idx >= leader.CommitIndex()
		})
		if _, ok := lt.Acknowledged(raft.ServerAddress(n.addr), term+1); ok {
			t.Fatal("an acknowledgement counted in another term")
		}
	}
	var target raft.Server
	for _, s := range leader.GetConfiguration().Configuration().Servers {
		if raft.ServerAddress(s.Address) != lt.LocalAddr() {
			target = s
		}
	}
	if err := leader.LeadershipTransferToServer(target.ID, target.Address).Error(); err != nil {
		t.Fatal(err)
	}
	if !lt.Transferred(term) {
		t.Fatal("the lease survived the leader's transfer")
	}
}

// TestStaleTransferRefused: a leadership transfer of an older term than the
// receiving replica's (one a deposed leader started, delivered late) is
// refused and starts no election; one of the current term is taken. With
// the guard stale-transfer off the stale transfer elects its target.
func TestStaleTransferRefused(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "n1", nil), newTestNode(t, "n2", nil), newTestNode(t, "n3", nil)}
	rafts, leader := leaseGroup(t, nodes, time.Second)
	// A term above 1, so that a stale one exists.
	if err := leader.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	leader = waitLeader(t, rafts...)
	term := leader.CurrentTerm()
	var from *testNode
	var to *raft.Raft
	var toAddr string
	for i, r := range rafts {
		switch {
		case r == leader:
			from = nodes[i]
		case to == nil:
			to, toAddr = r, nodes[i].addr
		}
	}
	gt, err := from.net.group("g")
	if err != nil {
		t.Fatal(err)
	}
	send := func(term uint64) error {
		msg := timeoutNowToProto("g", &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(from.id), Addr: []byte(from.addr)}})
		msg.Header = gt.stamp(msg.Header)
		msg.Term = term
		_, err := call(gt, typeTimeoutNow, raft.ServerAddress(toAddr), msg, peerv1.RaftClient.TimeoutNow)
		return err
	}
	err = send(term - 1)
	if err == nil {
		// Taken: the target campaigns, as a transfer's, at once.
		waitFor(t, 10*time.Second, "the stale transfer's election", func() bool { return to.CurrentTerm() > term })
		t.Fatalf("a transfer of term %d was taken by a replica of term %d: its target campaigned (term %d now)", term-1, term, to.CurrentTerm())
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a transfer of term %d to a replica of term %d: %v, want Unavailable", term-1, term, err)
	}
	if got := counterValue(t, nodesByAddr(nodes, toAddr).net.metrics.leaseRefusals.WithLabelValues("stale_transfer")); got != 1 {
		t.Fatalf("lease_refusals_total{reason=stale_transfer} = %v, want 1", got)
	}
	if to.CurrentTerm() != term || to.State() != raft.Follower {
		t.Fatalf("after a refused transfer the target is %v in term %d, want a follower in %d", to.State(), to.CurrentTerm(), term)
	}
	// The current term's transfer is taken.
	if err := send(term); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the transfer's election", func() bool { return to.CurrentTerm() > term })
}

func nodesByAddr(nodes []*testNode, addr string) *testNode {
	for _, n := range nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

// TestRestartedReplicaRefusesVotes: a replica that opened on earlier state
// refuses every vote but a transfer's for its promise; a fresh one votes.
func TestRestartedReplicaRefusesVotes(t *testing.T) {
	a, b := newTestNode(t, "a", nil), newTestNode(t, "b", nil)
	for _, restarted := range []bool{false, true} {
		name := "fresh"
		if restarted {
			name = "restarted"
		}
		gt, err := b.net.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		g := gt.(*groupTransport)
		g.SetLeasePromise(time.Hour, restarted)
		go func() { // answer what raft would be asked
			for {
				select {
				case rpc := <-gt.Consumer():
					rpc.Respond(&raft.RequestVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("b"), Addr: []byte(b.addr)}, Term: 1}, nil)
				case <-g.closed:
					return
				}
			}
		}()
		sender := a.net.mustTransport(t, name)
		for _, transfer := range []bool{false, true} {
			req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte(a.addr)},
				Term: 2, LastLogIndex: 1, LastLogTerm: 1, LeadershipTransfer: transfer}
			err := sender.RequestVote("b", raft.ServerAddress(b.addr), req, &raft.RequestVoteResponse{})
			held := restarted && !transfer
			if held != (status.Code(err) == codes.Unavailable) || (!held && err != nil) {
				t.Fatalf("%s replica, transfer %v: vote request answered %v, held: %v", name, transfer, err, held)
			}
		}
	}
}
