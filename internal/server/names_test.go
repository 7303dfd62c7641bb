package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// TestLongKeyspaceNamesAreCutInErrors: a request may name a keyspace of
// any length; the errors that repeat the name cut it (a valid name has at
// most 63 bytes) and say how long it was, instead of sending it back.
func TestLongKeyspaceNamesAreCutInErrors(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	conn, err := grpc.NewClient(n.srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	geo := adminv1.NewGeoClient(conn)
	long := strings.Repeat("x", 100_000)
	c := context.Background()
	for _, tc := range []struct {
		name string
		code codes.Code
		call func() error
	}{
		{"put", codes.NotFound, func() error {
			_, err := n.kv.Put(c, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Keyspace: long}, Key: []byte("k"), Value: []byte("v")})
			return err
		}},
		{"get keyspace", codes.NotFound, func() error {
			_, err := geo.GetKeyspace(c, &adminv1.GetKeyspaceRequest{Name: long})
			return err
		}},
		{"create keyspace", codes.InvalidArgument, func() error {
			_, err := geo.CreateKeyspace(c, &adminv1.CreateKeyspaceRequest{Name: long, Shards: 1})
			return err
		}},
		{"set keyspace sites", codes.NotFound, func() error {
			_, err := geo.SetKeyspaceSites(c, &adminv1.SetKeyspaceSitesRequest{Name: long, Sites: []string{"local"}})
			return err
		}},
	} {
		err := tc.call()
		msg := status.Convert(err).Message()
		if status.Code(err) != tc.code || len(msg) > 500 || !strings.Contains(msg, `"`+strings.Repeat("x", 64)+`"... (a name of 100000 bytes)`) {
			t.Errorf("%s: %v (%d bytes of message), want %v naming the first 64 bytes of the name and its length", tc.name, status.Code(err), len(msg), tc.code)
		}
	}
}
