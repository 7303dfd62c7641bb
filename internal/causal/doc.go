// Package causal holds Causeway's pure causality bookkeeping: versions, the
// hybrid logical clock and the client session with its opaque token.
//
// Nothing in this package does I/O or reads the wall clock by itself: the
// clock takes its physical time source as a function, so every decision can
// be tested and fuzzed deterministically.
package causal
