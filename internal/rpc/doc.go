// Package rpc serves the public gRPC services (kv.v1 KV, admin.v1 Admin).
//
// Every request is validated here before anything is routed or written
// (validate.go); every internal error is translated to a gRPC status in one
// table (errors.go). The services decode the caller's session token, enforce
// its causal floors on reads, raise the node's clock above it before writes,
// and return the updated token with every response.
package rpc
