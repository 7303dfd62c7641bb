package membership

import "testing"

// TestMetaReplicasRoundTrip: a node's --replicas travels in its meta (with
// an Incarnation), with or without an Unreachable count.
func TestMetaReplicasRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{Site: "s1", NodeID: "n1", ClientAddr: "127.0.0.1:1", PeerAddr: "127.0.0.1:2", Incarnation: 7, Replicas: 3},
		{Site: "s1", NodeID: "n1", ClientAddr: "127.0.0.1:1", PeerAddr: "127.0.0.1:2", Incarnation: 7, Unreachable: 2, Replicas: 5},
		{Site: "s1", NodeID: "n1", ClientAddr: "127.0.0.1:1", PeerAddr: "127.0.0.1:2", Incarnation: 7, Unreachable: 2},
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Meta
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip: %+v, want %+v", got, m)
		}
	}
}
