// Package rpc serves the public gRPC services (kv.v1 KV, admin.v1 Admin).
//
// Every request is validated here before anything is routed or written
// (validate.go); every internal error is translated to a gRPC status in one
// table per service (errors.go for KV, admin_errors.go for Admin, which
// falls back to the KV table for the errors they share); nothing else in
// the package builds a status (internal/lint checks it). The services decode the caller's session token, enforce
// its causal floors on reads, raise the node's clock above it before writes,
// and return the updated token with every response.
package rpc
