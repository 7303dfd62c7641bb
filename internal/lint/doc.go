// Package lint holds the project's structural rules as tests: rules that
// go vet and staticcheck cannot know because they are about this code
// base's architecture. TestLint loads every package of the module (go list
// names them; go/parser reads every .go file, whatever its build tags) and
// reports each violation with its position and the rule's name:
//
//   - bbolt-owner: only internal/storage (and its tests) imports
//     go.etcd.io/bbolt.
//   - pure-core: the non-test code of internal/causal and
//     internal/placement reads no clock, starts no timer, uses no global
//     randomness and starts no goroutine.
//   - status-tables: gRPC statuses are built only in the error tables at
//     the API edges.
//   - no-ctx-in-struct: no struct type has a field of type context.Context.
//
// Each rule's exemptions are listed next to it in lint_test.go, with the
// reason. TestRulesBite runs the checker on a scratch module holding one
// violation of each rule (and code each rule must accept) to show that
// every rule reports what it is meant to. docs/testing.md describes the
// rules and how to run them.
package lint
