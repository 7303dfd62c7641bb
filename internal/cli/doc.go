// Package cli implements kvctl, Causeway's command-line client: each command
// parses its arguments, makes its calls through package client, and prints
// the result as text or JSON.
//
// Main runs one kvctl invocation in-process against injected standard
// streams and environment, and returns the process exit code (ExitOK,
// ExitNotFound, ...), so cmd/kvctl stays a thin wrapper and tests can drive
// every command without spawning processes.
//
// Consecutive invocations share one causal session through a session file:
// data commands load the session token from it before their call and save
// the merged token after it (atomically: temporary file and rename).
package cli
