package grpcopts

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawCodec sends and receives a method's messages as the bytes given, as
// a client with a broken encoder (or none) would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestMalformedRequestsAreInvalidArgument: a request that is not a valid
// message of its method was answered INTERNAL by grpc-go ("failed to
// unmarshal the received message"), which says the server failed. A
// service registered through Malformed answers INVALID_ARGUMENT naming
// the message type, on unary and streaming methods, and serves valid
// requests as before.
func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMalformed()
	srv := grpc.NewServer(m.ServerOption())
	healthpb.RegisterHealthServer(m.Registrar(srv), health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// HealthCheckRequest{service: "\xff"}: a string field that is not UTF-8.
	notUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})
	// A field whose length runs past the end of the message.
	truncated := append(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.BytesType), 100), 'x')
	for name, req := range map[string][]byte{"not UTF-8": notUTF8, "truncated": truncated, "garbage": {0xff, 0xff, 0xff, 0xff}} {
		var reply []byte
		err := cc.Invoke(ctx, healthpb.Health_Check_FullMethodName, &req, &reply, grpc.ForceCodec(rawCodec{}))
		checkMalformed(t, "Check "+name, err)

		st, err := cc.NewStream(ctx, &healthpb.Health_ServiceDesc.Streams[0], healthpb.Health_Watch_FullMethodName, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&req); err != nil {
			t.Fatal(err)
		}
		_ = st.CloseSend()
		checkMalformed(t, "Watch "+name, st.RecvMsg(&reply))
	}
	// A valid request is served as before.
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check of a valid request: %v", err)
	}
}

func checkMalformed(t *testing.T, call string, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "grpc.health.v1.HealthCheckRequest") {
		t.Fatalf("%s: %v, want InvalidArgument naming grpc.health.v1.HealthCheckRequest", call, err)
	}
}

// TestMalformedCodecFailsOtherServicesAsBefore: the codec keeps the
// decoding error only for the request types of services registered
// through Registrar, whose handlers answer with it; any other request it
// cannot decode fails in the codec as before, never reaching a handler as
// an empty message.
func TestMalformedCodecFailsOtherServicesAsBefore(t *testing.T) {
	m := NewMalformed()
	var req healthpb.HealthCheckRequest
	if err := (malformedCodec{m}).Unmarshal(mem.BufferSlice{mem.SliceBuffer{0xff, 0xff, 0xff}}, &req); err == nil {
		t.Fatal("a request of a service not registered through Registrar decoded from garbage without an error")
	}
}
