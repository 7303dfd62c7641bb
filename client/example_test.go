package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/client"
)

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:7379"}
	c, err := client.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	v, err := c.Put(ctx, []byte("greeting"), []byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote version", v)

	// Same client, same causal session: this read sees the put.
	it, err := c.Get(ctx, []byte("greeting"))
	if err != nil {
		log.Fatal(err)
	}
	if it.Found {
		fmt.Printf("%s\n", it.Value)
	}

	// Linearizable (within the site) read, served by the key's shard leader.
	if _, err := c.Get(ctx, []byte("greeting"), client.WithConsistency(client.Strong)); err != nil {
		log.Fatal(err)
	}

	// A read of another keyspace, which must exist (kvctl keyspace create):
	// an unknown one fails with NotFound.
	_, err = c.Get(ctx, []byte("config"), client.WithKeyspace("settings"))
	switch {
	case status.Code(err) == codes.NotFound:
		fmt.Println("no keyspace settings:", err)
	case err != nil:
		log.Fatal(err)
	}
}

func ExampleClient_CompareAndSwap() {
	ctx := context.Background()
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:7379"}
	c, err := client.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Create the counter only if it does not exist yet.
	_, err = c.CompareAndSwap(ctx, []byte("counter"), client.ExpectAbsent(), []byte("0"))
	var conflict *client.ConflictError
	switch {
	case errors.As(err, &conflict):
		fmt.Println("already exists at version", conflict.Current)
	case err != nil:
		log.Fatal(err)
	}
}

func ExampleClient_ScanAll() {
	ctx := context.Background()
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:7379"}
	c, err := client.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for it, err := range c.ScanAll(ctx, client.ScanOptions{Prefix: []byte("user/"), Limit: 100}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\t%s\n", it.Key, it.Value)
	}
}

func ExampleConfig_SessionToken() {
	ctx := context.Background()
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:7379"}
	c, err := client.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		log.Fatal(err)
	}
	token := c.SessionToken() // store it (a file, a cookie, ...)
	c.Close()

	// Later, possibly in another process: continue the same causal session.
	cfg.SessionToken = token
	c2, err := client.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Get(ctx, []byte("k")); err != nil { // reads its own write
		log.Fatal(err)
	}
}
