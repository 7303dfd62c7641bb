package cli

import (
	"bufio"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/causeway-db/causeway/client"
)

func (a *app) txnGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn-get KEY...",
		Short: "Read several keys as one causally consistent snapshot",
		Long: `Read KEYs (on any shards) as one snapshot: it includes everything this
session wrote or read, and never shows a version without the versions it
depends on (docs/consistency.md). Prints KEY<TAB>VALUE per key found, in
argument order; a missing key prints nothing. Exits with code 1 if any key
is missing.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keys := make([][]byte, len(args))
			for i, k := range args {
				keys[i] = []byte(k)
			}
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				items, snap, err := c.GetTxnAt(ctx, keys)
				if err != nil {
					return err
				}
				missing := 0
				for _, it := range items {
					if !it.Found {
						missing++
					}
				}
				if a.json() {
					type item struct {
						Key     jsonBytes    `json:"key"`
						Found   bool         `json:"found"`
						Value   jsonBytes    `json:"value,omitzero"`
						Version *jsonVersion `json:"version,omitempty"`
					}
					doc := struct {
						Snapshot uint64 `json:"snapshot_hlc"`
						Items    []item `json:"items"`
					}{Snapshot: snap, Items: []item{}}
					for _, it := range items {
						d := item{Key: it.Key, Found: it.Found, Version: versionJSON(it.Version)}
						if it.Found {
							d.Value = it.Value
							if d.Value == nil {
								d.Value = jsonBytes{}
							}
						}
						doc.Items = append(doc.Items, d)
					}
					if err := writeJSON(a.env.Stdout, doc); err != nil {
						return err
					}
				} else {
					w := bufio.NewWriter(a.env.Stdout)
					for _, it := range items {
						if !it.Found {
							continue
						}
						w.Write(it.Key)
						w.WriteByte('\t')
						w.Write(it.Value)
						w.WriteByte('\n')
					}
					if err := w.Flush(); err != nil {
						return err
					}
				}
				if missing > 0 {
					return withCode(ExitNotFound, fmt.Errorf("%d of %d keys not found", missing, len(items)))
				}
				return nil
			})
		},
	}
	return cmd
}
