// Command delayproxy forwards TCP connections with a fixed one-way delay
// in each direction (package bench/delayproxy), for benchmarks that
// stretch a system over simulated sites. One process serves any number of
// listen=target pairs and runs until SIGTERM or SIGINT.
//
//	go run ./bench/cmd/delayproxy -delay 50ms 127.0.0.1:22385=127.0.0.1:22380 127.0.0.1:22395=127.0.0.1:22390
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/causeway-db/causeway/bench/delayproxy"
)

func main() {
	delay := flag.Duration("delay", 50*time.Millisecond, "one-way delay of each direction")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: delayproxy [-delay D] LISTEN=TARGET...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*delay, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "delayproxy:", err)
		os.Exit(1)
	}
}

func run(delay time.Duration, pairs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var proxies []*delayproxy.Proxy
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
	}()
	for _, pr := range pairs {
		listen, target, ok := strings.Cut(pr, "=")
		if !ok || listen == "" || target == "" {
			return fmt.Errorf("%q: want LISTEN=TARGET", pr)
		}
		p, err := delayproxy.Listen(listen, target, delay)
		if err != nil {
			return err
		}
		proxies = append(proxies, p)
		p.Start()
		fmt.Printf("delayproxy: %s -> %s, %v each way\n", p.Addr(), target, delay)
	}
	<-ctx.Done()
	return nil
}
