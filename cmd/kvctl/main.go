// Command kvctl is the command-line client of the Causeway key-value
// database. See internal/cli, or run "kvctl --help".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/causeway-db/causeway/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
