package cluster

import (
	"errors"
	"testing"
)

// TestJoinAddressesAreChecked: a join whose addresses are not host:port is
// refused before it is proposed (a peer-port Join with "nonsense" as its
// peer address rewrote the node's record, and raft then failed to dial it).
func TestJoinAddressesAreChecked(t *testing.T) {
	good := Node{ID: "n1", Site: "s1", PeerAddr: "127.0.0.1:7380", ClientAddr: "kvd-1:7379", GossipAddr: "[::1]:7946"}
	if err := checkAddrs(good); err != nil {
		t.Fatalf("%+v: %v", good, err)
	}
	noOptional := Node{ID: "n1", Site: "s1", PeerAddr: "[::]:7380"}
	if err := checkAddrs(noOptional); err != nil {
		t.Fatalf("%+v: %v", noOptional, err)
	}
	for _, bad := range []Node{
		{ID: "n1", Site: "s1", PeerAddr: "nonsense"},
		{ID: "n1", Site: "s1", PeerAddr: ""},
		{ID: "n1", Site: "s1", PeerAddr: ":7380"},
		{ID: "n1", Site: "s1", PeerAddr: "h:0"},
		{ID: "n1", Site: "s1", PeerAddr: "h:65536"},
		{ID: "n1", Site: "s1", PeerAddr: "h:7380", ClientAddr: "h"},
		{ID: "n1", Site: "s1", PeerAddr: "h:7380", GossipAddr: "h:x"},
	} {
		if err := checkAddrs(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}
