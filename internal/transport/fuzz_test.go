package transport

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// The converters of AppendEntries and InstallSnapshot requests are fuzzed
// in service_test.go; these cover the other requests and every response.

// converter is one direction pair of convert.go for message type M and
// raft's struct R.
type converter[M proto.Message, R any] struct {
	// from converts and validates what a peer sent.
	from func(M) (R, error)
	// to converts back; m is the message r came from (for the group name).
	to func(m M, r R) M
}

// checkConversion unmarshals b as an M and converts it: the converter must
// not panic, must reject only with ErrInvalidRequest, and what it accepts
// must convert back to the same message (a response's missing header comes
// back as an empty one) and to the same raft struct again.
func checkConversion[M proto.Message, R any](t *testing.T, b []byte, c converter[M, R]) {
	var zero M
	m := zero.ProtoReflect().New().Interface().(M)
	if (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m) != nil {
		return
	}
	r, err := c.from(m)
	if err != nil {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%T: error %v is not ErrInvalidRequest", m, err)
		}
		return
	}
	back := c.to(m, r)
	want := withoutGeneration(m)
	if h := want.ProtoReflect().Descriptor().Fields().ByName("header"); h != nil && !want.ProtoReflect().Has(h) {
		want.ProtoReflect().Set(h, want.ProtoReflect().NewField(h))
	}
	if !proto.Equal(back, want) {
		t.Fatalf("%T round trip: %v != %v", m, back, want)
	}
	again, err := c.from(back)
	if err != nil {
		t.Fatalf("%T: the converted message is rejected: %v", m, err)
	}
	if !reflect.DeepEqual(again, r) {
		t.Fatalf("%T: %+v converts to %+v", m, r, again)
	}
}

// withoutGeneration returns a copy of m without the fields the converters
// leave out because raft knows nothing of them: its header's generation
// and site incarnation (the group transport stamps and checks them,
// generation.go, incarnation.go), an answer's
// lease promise and a TimeoutNow's term (lease.go).
func withoutGeneration[M proto.Message](m M) M {
	c := proto.Clone(m).(M)
	if h := c.ProtoReflect().Descriptor().Fields().ByName("header"); h != nil && c.ProtoReflect().Has(h) {
		hdr := c.ProtoReflect().Mutable(h).Message()
		hdr.Clear(hdr.Descriptor().Fields().ByName("generation"))
		hdr.Clear(hdr.Descriptor().Fields().ByName("incarnation"))
	}
	if f := c.ProtoReflect().Descriptor().Fields().ByName("lease_promise_ms"); f != nil {
		c.ProtoReflect().Clear(f)
	}
	if tn, ok := any(c).(*peerv1.TimeoutNowRequest); ok {
		tn.Term = 0
	}
	return c
}

// response adapts a response converter, which fills a struct in place.
func response[M proto.Message, R any](from func(M, *R) error, to func(*R) M) converter[M, *R] {
	return converter[M, *R]{
		from: func(m M) (*R, error) {
			r := new(R)
			return r, from(m, r)
		},
		to: func(_ M, r *R) M { return to(r) },
	}
}

func addSeeds(f *testing.F, msgs ...proto.Message) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
}

// FuzzRequestVote feeds arbitrary bytes to the RequestVote request and
// response converters.
func FuzzRequestVote(f *testing.F) {
	addSeeds(f,
		&peerv1.RequestVoteRequest{Group: "g", Header: hdr(), Term: 3, Candidate: []byte("h:1"), LastLogIndex: 9, LastLogTerm: 2, LeadershipTransfer: true},
		//lint:ignore SA1019 the converters carry the deprecated field (convert.go)
		&peerv1.RequestVoteResponse{Header: hdr(), Term: 3, Peers: []byte("p"), Granted: true})
	req := converter[*peerv1.RequestVoteRequest, *raft.RequestVoteRequest]{
		from: requestVoteFromProto,
		to: func(m *peerv1.RequestVoteRequest, r *raft.RequestVoteRequest) *peerv1.RequestVoteRequest {
			return requestVoteToProto(m.GetGroup(), r)
		},
	}
	resp := response(requestVoteResponseFromProto, requestVoteResponseToProto)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkConversion(t, b, req)
		checkConversion(t, b, resp)
	})
}

// FuzzRequestPreVote does the same for RequestPreVote.
func FuzzRequestPreVote(f *testing.F) {
	addSeeds(f,
		&peerv1.RequestPreVoteRequest{Group: "g", Header: hdr(), Term: 3, LastLogIndex: 9, LastLogTerm: 2},
		&peerv1.RequestPreVoteResponse{Header: hdr(), Term: 3, Granted: true})
	req := converter[*peerv1.RequestPreVoteRequest, *raft.RequestPreVoteRequest]{
		from: requestPreVoteFromProto,
		to: func(m *peerv1.RequestPreVoteRequest, r *raft.RequestPreVoteRequest) *peerv1.RequestPreVoteRequest {
			return requestPreVoteToProto(m.GetGroup(), r)
		},
	}
	resp := response(requestPreVoteResponseFromProto, requestPreVoteResponseToProto)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkConversion(t, b, req)
		checkConversion(t, b, resp)
	})
}

// FuzzTimeoutNow does the same for TimeoutNow.
func FuzzTimeoutNow(f *testing.F) {
	addSeeds(f,
		&peerv1.TimeoutNowRequest{Group: "g", Header: hdr()},
		&peerv1.TimeoutNowResponse{Header: hdr()})
	req := converter[*peerv1.TimeoutNowRequest, *raft.TimeoutNowRequest]{
		from: timeoutNowFromProto,
		to: func(m *peerv1.TimeoutNowRequest, r *raft.TimeoutNowRequest) *peerv1.TimeoutNowRequest {
			return timeoutNowToProto(m.GetGroup(), r)
		},
	}
	resp := response(timeoutNowResponseFromProto, timeoutNowResponseToProto)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkConversion(t, b, req)
		checkConversion(t, b, resp)
	})
}

// FuzzAppendAndSnapshotResponses feeds arbitrary bytes to the AppendEntries
// and InstallSnapshot response converters (the requests have targets of
// their own).
func FuzzAppendAndSnapshotResponses(f *testing.F) {
	addSeeds(f,
		&peerv1.AppendEntriesResponse{Header: hdr(), Term: 4, LastLog: 9, Success: true, NoRetryBackoff: true},
		&peerv1.InstallSnapshotResponse{Header: hdr(), Term: 4, Success: true})
	ae := response(appendEntriesResponseFromProto, appendEntriesResponseToProto)
	is := response(installSnapshotResponseFromProto, installSnapshotResponseToProto)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkConversion(t, b, ae)
		checkConversion(t, b, is)
	})
}
