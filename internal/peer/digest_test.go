package peer

import (
	"errors"
	"testing"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/storage"
)

func TestDigestMessageRoundTrip(t *testing.T) {
	d := storage.Digest{Index: 7, MaxHLC: 9, Entries: 3, Requests: 11}
	for i := range d.Slots {
		d.Slots[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	got, err := digestOf(digestPB(d))
	if err != nil || got != d {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []*peerv1.Digest{nil, {Slots: make([]uint64, storage.DigestSlots-1)}, {Slots: make([]uint64, storage.DigestSlots+1)}} {
		if _, err := digestOf(bad); !errors.Is(err, errBadDigest) {
			t.Errorf("digestOf(%v) = %v, want errBadDigest", bad, err)
		}
	}
}
