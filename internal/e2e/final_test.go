//go:build e2e || geoload

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/causalcheck"
)

// siteClient returns a client of eps whose attempts last at most
// attempt, with three retries.
func siteClient(t *testing.T, eps []string, attempt time.Duration) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = eps
	cfg.RequestTimeout = attempt
	cfg.MaxRetries = 3
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// finalVersions reads every key's newest version at every site (STRONG,
// on the shard leaders: tombstones included).
func finalVersions(readers map[string]*client.Client, keys []string) (causalcheck.Final, error) {
	final := causalcheck.Final{}
	for site, c := range readers {
		m := map[string]causal.Version{}
		for _, k := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			h, err := c.History(ctx, []byte(k), 1, client.WithConsistency(client.Strong))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s at %s: %w", k, site, err)
			}
			if len(h) > 0 {
				m[k] = h[0].Version
			}
		}
		final[site] = m
	}
	return final, nil
}

// converged reports whether every site of order holds the same newest
// versions.
func converged(order []string, final causalcheck.Final) error {
	ref := final[order[0]]
	for _, site := range order[1:] {
		m := final[site]
		for k, v := range ref {
			if m[k] != v {
				return fmt.Errorf("%s: %v at %s, %v at %s", k, v, order[0], m[k], site)
			}
		}
		for k, v := range m {
			if _, ok := ref[k]; !ok {
				return fmt.Errorf("%s: absent at %s, %v at %s", k, order[0], v, site)
			}
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
