package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// rawClient connects to n's Raft service directly.
func rawClient(t *testing.T, n *testNode) peerv1.RaftClient {
	t.Helper()
	cc, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return peerv1.NewRaftClient(cc)
}

func hdr() *peerv1.RaftHeader {
	return &peerv1.RaftHeader{ProtocolVersion: int64(raft.ProtocolVersionMax), Id: []byte("peer"), Addr: []byte("127.0.0.1:1")}
}

func validConfiguration() []byte {
	return raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: "127.0.0.1:1"}}})
}

// appendReq returns a valid AppendEntries request for group, changed by
// edit.
func appendReq(group string, edit func(*peerv1.AppendEntriesRequest)) *peerv1.AppendEntriesRequest {
	m := &peerv1.AppendEntriesRequest{
		Group: group, Header: hdr(), Term: 3, PrevLogEntry: 10, PrevLogTerm: 2, LeaderCommitIndex: 10,
		Entries: []*peerv1.LogEntry{
			{Index: 11, Term: 2, Type: uint32(raft.LogCommand), Data: []byte("x")},
			{Index: 12, Term: 3, Type: uint32(raft.LogConfiguration), Data: validConfiguration()},
		},
	}
	if edit != nil {
		edit(m)
	}
	return m
}

func snapReq(group string, edit func(*peerv1.InstallSnapshotRequest)) *peerv1.InstallSnapshotRequest {
	m := &peerv1.InstallSnapshotRequest{
		Group: group, Header: hdr(), SnapshotVersion: int64(raft.SnapshotVersionMax), Term: 3,
		LastLogIndex: 100, LastLogTerm: 3, Configuration: validConfiguration(), ConfigurationIndex: 5, Size: 3,
	}
	if edit != nil {
		edit(m)
	}
	return m
}

// TestServiceRejects sends unknown groups and malformed requests straight
// to the service: NotFound and InvalidArgument, no panic.
func TestServiceRejects(t *testing.T) {
	node := newTestNode(t, "a", nil)
	// A registered group without raft behind it: valid requests wait for
	// their deadline, invalid ones must be rejected before.
	if _, err := node.net.Transport("g"); err != nil {
		t.Fatal(err)
	}
	c := rawClient(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	unary := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"unknown group", func() error { _, err := c.AppendEntries(ctx, appendReq("nope", nil)); return err }, codes.NotFound},
		{"vote unknown group", func() error {
			_, err := c.RequestVote(ctx, &peerv1.RequestVoteRequest{Group: "nope", Header: hdr(), Term: 1})
			return err
		}, codes.NotFound},
		{"empty group", func() error { _, err := c.AppendEntries(ctx, appendReq("", nil)); return err }, codes.InvalidArgument},
		{"empty message", func() error { _, err := c.AppendEntries(ctx, &peerv1.AppendEntriesRequest{}); return err }, codes.InvalidArgument},
		{"no header", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Header = nil }))
			return err
		}, codes.InvalidArgument},
		{"bad protocol version", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Header.ProtocolVersion = 99 }))
			return err
		}, codes.InvalidArgument},
		{"term zero", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Term = 0 }))
			return err
		}, codes.InvalidArgument},
		{"gap in entries", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries[1].Index = 14 }))
			return err
		}, codes.InvalidArgument},
		{"entry term decreases", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries[0].Term = 1 }))
			return err
		}, codes.InvalidArgument},
		{"empty entry", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries[0] = &peerv1.LogEntry{} }))
			return err
		}, codes.InvalidArgument},
		{"unknown entry type", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries[0].Type = 200 }))
			return err
		}, codes.InvalidArgument},
		{"garbage configuration entry", func() error {
			_, err := c.AppendEntries(ctx, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries[1].Data = []byte{0xc1, 0xff, 0x00} }))
			return err
		}, codes.InvalidArgument},
		{"vote without header", func() error {
			_, err := c.RequestVote(ctx, &peerv1.RequestVoteRequest{Group: "g", Term: 1})
			return err
		}, codes.InvalidArgument},
		{"vote last term after term", func() error {
			_, err := c.RequestVote(ctx, &peerv1.RequestVoteRequest{Group: "g", Header: hdr(), Term: 1, LastLogTerm: 2})
			return err
		}, codes.InvalidArgument},
		{"pre-vote term zero", func() error {
			_, err := c.RequestPreVote(ctx, &peerv1.RequestPreVoteRequest{Group: "g", Header: hdr()})
			return err
		}, codes.InvalidArgument},
		{"timeout-now without header", func() error {
			_, err := c.TimeoutNow(ctx, &peerv1.TimeoutNowRequest{Group: "g"})
			return err
		}, codes.InvalidArgument},
		{"no raft behind the group", func() error {
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := c.TimeoutNow(ctx, &peerv1.TimeoutNowRequest{Group: "g", Header: hdr()})
			return err
		}, codes.DeadlineExceeded},
	}
	for _, tc := range unary {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call()); got != tc.want {
				t.Fatalf("code %v, want %v", got, tc.want)
			}
		})
	}

	snapshot := []struct {
		name string
		msgs []*peerv1.InstallSnapshotChunk
		want codes.Code
	}{
		{"empty stream", nil, codes.InvalidArgument},
		{"data first", []*peerv1.InstallSnapshotChunk{dataChunk("abc")}, codes.InvalidArgument},
		{"unknown group", []*peerv1.InstallSnapshotChunk{reqChunk(snapReq("nope", nil)), dataChunk("abc")}, codes.NotFound},
		{"garbage configuration", []*peerv1.InstallSnapshotChunk{reqChunk(snapReq("g", func(m *peerv1.InstallSnapshotRequest) {
			m.Configuration = []byte("garbage")
		}))}, codes.InvalidArgument},
		{"negative size", []*peerv1.InstallSnapshotChunk{reqChunk(snapReq("g", func(m *peerv1.InstallSnapshotRequest) { m.Size = -1 }))}, codes.InvalidArgument},
		{"bad version", []*peerv1.InstallSnapshotChunk{reqChunk(snapReq("g", func(m *peerv1.InstallSnapshotRequest) { m.SnapshotVersion = 7 }))}, codes.InvalidArgument},
	}
	for _, tc := range snapshot {
		t.Run("snapshot "+tc.name, func(t *testing.T) {
			stream, err := c.InstallSnapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				if err := stream.Send(m); err != nil {
					break // the server ended the stream; CloseAndRecv says why
				}
			}
			_, err = stream.CloseAndRecv()
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
		})
	}

	t.Run("pipeline malformed", func(t *testing.T) {
		stream, err := c.AppendEntriesPipeline(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries[0].Index = 0 })); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Recv = %v, want InvalidArgument", err)
		}
	})
	t.Run("pipeline unknown group", func(t *testing.T) {
		stream, err := c.AppendEntriesPipeline(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(appendReq("nope", nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.NotFound {
			t.Fatalf("Recv = %v, want NotFound", err)
		}
	})

	// The node still serves: a consumer standing in for raft answers a vote
	// the node sends to itself.
	tr, err := node.net.Transport("echo")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		select {
		case rpc := <-tr.Consumer():
			req, _ := rpc.Command.(*raft.RequestVoteRequest)
			rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
		case <-done:
		}
	}()
	defer func() { close(done); <-answered; _ = tr.(raft.WithClose).Close() }()
	var resp raft.RequestVoteResponse
	err = tr.RequestVote("a", raft.ServerAddress(node.addr), &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 7}, &resp)
	if err != nil || !resp.Granted || resp.Term != 7 {
		t.Fatalf("vote: %+v, %v", resp, err)
	}
}

func dataChunk(s string) *peerv1.InstallSnapshotChunk {
	return &peerv1.InstallSnapshotChunk{Kind: &peerv1.InstallSnapshotChunk_Data{Data: []byte(s)}}
}

func reqChunk(m *peerv1.InstallSnapshotRequest) *peerv1.InstallSnapshotChunk {
	return &peerv1.InstallSnapshotChunk{Kind: &peerv1.InstallSnapshotChunk_Request{Request: m}}
}

// TestConvertRoundTrip checks that every message survives the trip through
// protobuf, and that a valid request is accepted.
func TestConvertRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	ae := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: 3, ID: []byte("n1"), Addr: []byte("h:1")},
		//lint:ignore SA1019 the transport carries raft's deprecated Leader field too
		Term: 4, Leader: []byte("h:1"), PrevLogEntry: 7, PrevLogTerm: 3, LeaderCommitIndex: 6,
		Entries: []*raft.Log{
			{Index: 8, Term: 3, Type: raft.LogCommand, Data: []byte("a"), Extensions: []byte("ext"), AppendedAt: at},
			{Index: 9, Term: 4, Type: raft.LogNoop},
		},
	}
	got, err := appendEntriesFromProto(roundTrip(t, appendEntriesToProto("g", ae)))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Entries[0].AppendedAt.Equal(at) || !got.Entries[1].AppendedAt.IsZero() {
		t.Fatalf("appended at: %v, %v", got.Entries[0].AppendedAt, got.Entries[1].AppendedAt)
	}
	for _, e := range append(got.Entries, ae.Entries...) {
		e.AppendedAt = time.Time{}
	}
	if !proto.Equal(appendEntriesToProto("g", got), appendEntriesToProto("g", ae)) {
		t.Fatalf("append entries: got %+v, want %+v", got, ae)
	}

	is := &raft.InstallSnapshotRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: 3, ID: []byte("n1"), Addr: []byte("h:1")}, SnapshotVersion: 1,
		Term: 5, LastLogIndex: 99, LastLogTerm: 5, Configuration: validConfiguration(), ConfigurationIndex: 3, Size: 1 << 20,
	}
	gotIS, err := installSnapshotFromProto(roundTrip(t, installSnapshotToProto("g", is)))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(installSnapshotToProto("g", gotIS), installSnapshotToProto("g", is)) {
		t.Fatalf("install snapshot: got %+v, want %+v", gotIS, is)
	}

	var resp raft.AppendEntriesResponse
	want := raft.AppendEntriesResponse{RPCHeader: ae.RPCHeader, Term: 4, LastLog: 9, Success: true, NoRetryBackoff: true}
	if err := appendEntriesResponseFromProto(roundTrip(t, appendEntriesResponseToProto(&want)), &resp); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(appendEntriesResponseToProto(&resp), appendEntriesResponseToProto(&want)) {
		t.Fatalf("response: got %+v, want %+v", resp, want)
	}
	if !isHeartbeat(&raft.AppendEntriesRequest{RPCHeader: ae.RPCHeader, Term: 1}) || isHeartbeat(ae) {
		t.Fatal("heartbeat detection")
	}
}

func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzAppendEntriesRequest feeds arbitrary bytes to the AppendEntries
// decoder: it must not panic, and what it accepts must convert back to the
// same message.
func FuzzAppendEntriesRequest(f *testing.F) {
	for _, m := range []*peerv1.AppendEntriesRequest{appendReq("g", nil), {}, appendReq("g", func(m *peerv1.AppendEntriesRequest) { m.Entries = nil })} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m peerv1.AppendEntriesRequest
		if (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &m) != nil {
			return
		}
		r, err := appendEntriesFromProto(&m)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v is not ErrInvalidRequest", err)
			}
			return
		}
		if back, want := appendEntriesToProto(m.Group, r), withoutGeneration(&m); !proto.Equal(back, want) {
			t.Fatalf("round trip: %v != %v", back, want)
		}
	})
}

// FuzzInstallSnapshotRequest does the same for the InstallSnapshot request.
func FuzzInstallSnapshotRequest(f *testing.F) {
	for _, m := range []*peerv1.InstallSnapshotRequest{snapReq("g", nil), {}} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m peerv1.InstallSnapshotRequest
		if (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &m) != nil {
			return
		}
		r, err := installSnapshotFromProto(&m)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v is not ErrInvalidRequest", err)
			}
			return
		}
		if back, want := installSnapshotToProto(m.Group, r), withoutGeneration(&m); !proto.Equal(back, want) {
			t.Fatalf("round trip: %v != %v", back, want)
		}
	})
}
