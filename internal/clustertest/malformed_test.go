package clustertest

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// rawBytes sends a method's request as the bytes given, as a client with
// a broken encoder would, and takes the reply's bytes.
type rawBytes struct{}

func (rawBytes) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawBytes) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawBytes) Name() string { return "proto" }

// TestMalformedRequestsAreInvalidArgument: a request that is not a valid
// message of its method (garbage, a truncated field, a keyspace that is
// not UTF-8) was answered INTERNAL by grpc-go's decoder, which tells the
// caller the node failed. Every method of the client API answers it
// INVALID_ARGUMENT, naming the message type, the call stream included,
// and the node serves valid requests as before (docs/api.md, Errors).
func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	c := New(t, 1, nil)
	ctx := ctxT(t, time.Minute)
	conn, err := grpc.NewClient(c.Node("n1").Srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// header{keyspace: "\xff\xfe"}: a string field that is not UTF-8.
	header := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})
	notUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), header)
	garbage := []byte{0xff, 0xff, 0xff, 0xff, 0x01}
	for method, want := range map[string]string{
		kvv1.KV_Put_FullMethodName:            "causeway.kv.v1.PutRequest",
		kvv1.KV_Get_FullMethodName:            "causeway.kv.v1.GetRequest",
		kvv1.KV_GetTxn_FullMethodName:         "causeway.kv.v1.GetTxnRequest",
		kvv1.KV_Scan_FullMethodName:           "causeway.kv.v1.ScanRequest",
		kvv1.KV_CompareAndSwap_FullMethodName: "causeway.kv.v1.CompareAndSwapRequest",
		adminv1.Admin_Drain_FullMethodName:    "causeway.admin.v1.DrainRequest",
		adminv1.Geo_Sites_FullMethodName:      "causeway.admin.v1.SitesRequest",
	} {
		for name, req := range map[string][]byte{"garbage": garbage, "keyspace not UTF-8": notUTF8} {
			if method == adminv1.Admin_Drain_FullMethodName || method == adminv1.Geo_Sites_FullMethodName {
				if name != "garbage" {
					continue // no header in these requests
				}
			}
			var reply []byte
			err := conn.Invoke(ctx, method, &req, &reply, grpc.ForceCodec(rawBytes{}))
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) {
				t.Errorf("%s with %s: %v, want InvalidArgument naming %s", method, name, err, want)
			}
		}
	}
	stream, err := conn.NewStream(ctx, &kvv1.KV_ServiceDesc.Streams[0], kvv1.KV_Stream_FullMethodName, grpc.ForceCodec(rawBytes{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&garbage); err != nil {
		t.Fatal(err)
	}
	var reply []byte
	if err := stream.RecvMsg(&reply); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "causeway.kv.v1.StreamRequest") {
		t.Errorf("call stream with garbage: %v, want InvalidArgument naming causeway.kv.v1.StreamRequest", err)
	}
	if _, err := kvv1.NewKVClient(conn).Put(ctx, &kvv1.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("a valid Put after the malformed ones: %v", err)
	}
}
