package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/causeway-db/causeway/client"
)

// maxValueBytes bounds a value read from stdin or --file (the largest
// value limit a server accepts).
const maxValueBytes = 64 << 20

// readValue returns the value of put and cas: args[i] if present, else the
// content of --file, else stdin.
func (a *app) readValue(args []string, i int, file string) ([]byte, error) {
	if len(args) > i {
		if file != "" {
			return nil, usageErrorf("give the value either as VALUE or with --file, not both")
		}
		return []byte(args[i]), nil
	}
	var r io.Reader
	switch file {
	case "", "-":
		if f, ok := a.env.Stdin.(*os.File); ok && isTerminal(f) {
			return nil, usageErrorf("no VALUE given and stdin is a terminal: pass VALUE, --file PATH or pipe the value in")
		}
		r = a.env.Stdin
	default:
		f, err := os.Open(file)
		if err != nil {
			return nil, usageErrorf("--file: %v", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, usageErrorf("--file: %s is a directory: give the path of a file", file)
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxValueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read value: %w", err)
	}
	if len(data) > maxValueBytes {
		return nil, usageErrorf("value exceeds %d bytes", maxValueBytes)
	}
	return data, nil
}

// isTerminal reports whether f is, as far as can be told without an ioctl,
// a terminal: a character device other than the null device. Stdin
// redirected from /dev/null (cron, systemd) reads as an empty value, like
// an empty pipe.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// writeFlags are the durability flags of mutations.
type writeFlags struct {
	durability string
	minSites   int
}

func (w *writeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&w.durability, "durability", "local", "acknowledge after: local (this site), sites=N (the first N sites of the chain), all (every site of the keyspace)")
	cmd.Flags().IntVar(&w.minSites, "min-sites", 0, "number of sites for --durability sites")
}

func (w *writeFlags) options() ([]client.Option, error) {
	if w.minSites < 0 || int64(w.minSites) > math.MaxUint32 {
		return nil, usageErrorf("invalid --min-sites %d: needs 1 <= N <= %d", w.minSites, uint32(math.MaxUint32))
	}
	if n, ok := strings.CutPrefix(w.durability, "sites="); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 1 || v > math.MaxUint32 {
			return nil, usageErrorf("invalid --durability %q: sites=N needs 1 <= N <= %d", w.durability, uint32(math.MaxUint32))
		}
		if w.minSites != 0 && int64(w.minSites) != v {
			return nil, usageErrorf("--durability %s and --min-sites %d disagree", w.durability, w.minSites)
		}
		return []client.Option{client.WithMinSites(int(v))}, nil
	}
	switch w.durability {
	case "local", "":
		if w.minSites != 0 {
			return nil, usageErrorf("--min-sites needs --durability sites")
		}
		return []client.Option{client.WithDurability(client.DurabilityLocal)}, nil
	case "sites":
		if w.minSites < 1 {
			return nil, usageErrorf("--durability sites needs N: --durability sites=N")
		}
		return []client.Option{client.WithMinSites(w.minSites)}, nil
	case "all":
		if w.minSites != 0 {
			return nil, usageErrorf("--min-sites needs --durability sites")
		}
		return []client.Option{client.WithDurability(client.DurabilityAll)}, nil
	}
	return nil, usageErrorf("invalid --durability %q: use local, sites=N or all", w.durability)
}

func readOptions(strong bool) []client.Option {
	if strong {
		return []client.Option{client.WithConsistency(client.Strong)}
	}
	return nil
}

func (a *app) putCommand() *cobra.Command {
	var file string
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   "put KEY [VALUE]",
		Short: "Write a value",
		Long: `Write VALUE under KEY and print the new version.

Without VALUE, the value is read from --file PATH, or else from stdin (all of
it, byte for byte: "echo hi | kvctl put k" stores "hi\n").`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			value, err := a.readValue(args, 1, file)
			if err != nil {
				return err
			}
			opts, err := wf.options()
			if err != nil {
				return err
			}
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				v, err := c.Put(ctx, key, value, opts...)
				if err != nil {
					return err
				}
				if a.json() {
					return writeJSON(a.env.Stdout, struct {
						Key     jsonBytes    `json:"key"`
						Version *jsonVersion `json:"version"`
					}{key, versionJSON(v)})
				}
				_, err = fmt.Fprintln(a.env.Stdout, v)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&file, "file", "", `read the value from PATH ("-": stdin)`)
	wf.register(cmd)
	return cmd
}

func (a *app) getCommand() *cobra.Command {
	var strong bool
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Read a value",
		Long: `Print the value of KEY followed by a newline. A missing or deleted key prints
nothing and exits with code 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				it, err := c.Get(ctx, key, readOptions(strong)...)
				if err != nil {
					return err
				}
				if a.json() {
					doc := struct {
						Key     jsonBytes    `json:"key"`
						Found   bool         `json:"found"`
						Value   jsonBytes    `json:"value,omitzero"`
						Version *jsonVersion `json:"version,omitempty"`
					}{Key: key, Found: it.Found, Version: versionJSON(it.Version)}
					if it.Found {
						doc.Value = it.Value
						if doc.Value == nil {
							doc.Value = jsonBytes{}
						}
					}
					if err := writeJSON(a.env.Stdout, doc); err != nil {
						return err
					}
				} else if it.Found {
					w := bufio.NewWriter(a.env.Stdout)
					w.Write(it.Value)
					w.WriteByte('\n')
					if err := w.Flush(); err != nil {
						return err
					}
				}
				if !it.Found {
					return withCode(ExitNotFound, fmt.Errorf("key %q not found", key))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&strong, "strong", false, "linearizable read (within the local site) instead of causal")
	return cmd
}

func (a *app) delCommand() *cobra.Command {
	var wf writeFlags
	cmd := &cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete"},
		Short:   "Delete a key",
		Long:    "Write a tombstone for KEY and print its version. Deleting a missing key succeeds.",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			opts, err := wf.options()
			if err != nil {
				return err
			}
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				v, existed, err := c.Delete(ctx, key, opts...)
				if err != nil {
					return err
				}
				if a.json() {
					return writeJSON(a.env.Stdout, struct {
						Key     jsonBytes    `json:"key"`
						Existed bool         `json:"existed"`
						Version *jsonVersion `json:"version"`
					}{key, existed, versionJSON(v)})
				}
				_, err = fmt.Fprintln(a.env.Stdout, v)
				return err
			})
		},
	}
	wf.register(cmd)
	return cmd
}

type jsonItem struct {
	Key     jsonBytes    `json:"key"`
	Value   jsonBytes    `json:"value,omitzero"`
	Version *jsonVersion `json:"version,omitempty"`
}

func (a *app) scanCommand() *cobra.Command {
	var prefix, start, end string
	var limit int
	var keysOnly, strong bool
	cmd := &cobra.Command{
		Use:   "scan [--prefix P | --start S [--end E]]",
		Short: "List keys in byte order",
		Long: `List live keys in ascending byte order, as KEY<TAB>VALUE lines (KEY lines with
--keys-only): those starting with --prefix, or in the range [--start, --end)
(no --end: to the last key), or all keys. Pages are fetched until --limit keys
(0: all).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if prefix != "" && (start != "" || end != "") {
				return usageErrorf("--prefix cannot be combined with --start or --end")
			}
			if limit < 0 {
				return usageErrorf("invalid --limit %d: must not be negative", limit)
			}
			so := client.ScanOptions{Prefix: []byte(prefix), Start: []byte(start), End: []byte(end), Limit: limit, KeysOnly: keysOnly}
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				if a.json() {
					items := []jsonItem{}
					for it, err := range c.ScanAll(ctx, so, readOptions(strong)...) {
						if err != nil {
							return err
						}
						ji := jsonItem{Key: it.Key, Version: versionJSON(it.Version)}
						if !keysOnly {
							ji.Value = it.Value
							if ji.Value == nil {
								ji.Value = jsonBytes{}
							}
						}
						items = append(items, ji)
					}
					return writeJSON(a.env.Stdout, struct {
						Count int        `json:"count"`
						Items []jsonItem `json:"items"`
					}{len(items), items})
				}
				w := bufio.NewWriter(a.env.Stdout)
				defer w.Flush()
				for it, err := range c.ScanAll(ctx, so, readOptions(strong)...) {
					if err != nil {
						return err
					}
					w.Write(it.Key)
					if !keysOnly {
						w.WriteByte('\t')
						w.Write(it.Value)
					}
					if err := w.WriteByte('\n'); err != nil {
						return err
					}
				}
				return w.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&prefix, "prefix", "", "list keys starting with P")
	f.StringVar(&start, "start", "", "list keys from S (inclusive)")
	f.StringVar(&end, "end", "", "list keys before E (exclusive)")
	f.IntVar(&limit, "limit", 0, "maximum number of keys (0: all)")
	f.BoolVar(&keysOnly, "keys-only", false, "print keys without values")
	f.BoolVar(&strong, "strong", false, "linearizable read (within the local site) instead of causal")
	return cmd
}

// ParseVersion parses a version as printed by kvctl, WALL.LOGICAL@SITE (for
// example 1723456789012.0@local). Its errors exit with ExitUsage.
func ParseVersion(s string) (client.Version, error) {
	v, err := client.ParseVersion(s)
	if err != nil {
		return client.Version{}, withCode(ExitUsage, errors.New(strings.TrimPrefix(err.Error(), "client: ")))
	}
	return v, nil
}

func (a *app) casCommand() *cobra.Command {
	var expectVersion, file string
	var expectAbsent, del bool
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   "cas KEY [VALUE] (--expect-version VERSION | --expect-absent) [--delete]",
		Short: "Compare and swap",
		Long: `Write VALUE under KEY only if the key's current version is --expect-version
(as printed by put, get -o json or history), or only if the key is absent with
--expect-absent; with --delete, write a tombstone instead. Prints the new
version. If the key holds something else, exits with code 3 and reports the
current version.

Without VALUE (and without --delete), the value is read from --file PATH, or
else from stdin.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			var expect client.Expect
			switch {
			case expectVersion != "" && expectAbsent:
				return usageErrorf("--expect-version and --expect-absent are exclusive")
			case expectAbsent:
				expect = client.ExpectAbsent()
			case expectVersion != "":
				v, err := ParseVersion(expectVersion)
				if err != nil {
					return usageErrorf("--expect-version: %v", err)
				}
				expect = client.ExpectVersion(v)
			default:
				return usageErrorf("cas needs --expect-version VERSION or --expect-absent")
			}
			var value []byte
			if del {
				if len(args) > 1 || file != "" {
					return usageErrorf("--delete takes no VALUE or --file")
				}
				if expectAbsent {
					return usageErrorf("--delete with --expect-absent deletes nothing: a delete expects the version it removes (--expect-version)")
				}
			} else {
				var err error
				if value, err = a.readValue(args, 1, file); err != nil {
					return err
				}
			}
			opts, err := wf.options()
			if err != nil {
				return err
			}
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				var v client.Version
				var err error
				if del {
					v, err = c.CompareAndDelete(ctx, key, expect, opts...)
				} else {
					v, err = c.CompareAndSwap(ctx, key, expect, value, opts...)
				}
				if err != nil {
					return a.casError(key, err)
				}
				if a.json() {
					return writeJSON(a.env.Stdout, struct {
						Key     jsonBytes    `json:"key"`
						Swapped bool         `json:"swapped"`
						Version *jsonVersion `json:"version"`
					}{key, true, versionJSON(v)})
				}
				_, err = fmt.Fprintln(a.env.Stdout, v)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&expectVersion, "expect-version", "", "swap only if the current version is VERSION (WALL.LOGICAL@SITE)")
	f.BoolVar(&expectAbsent, "expect-absent", false, "swap only if the key is absent (never written, or deleted)")
	f.BoolVar(&del, "delete", false, "write a tombstone instead of a value")
	f.StringVar(&file, "file", "", `read the value from PATH ("-": stdin)`)
	wf.register(cmd)
	return cmd
}

// casError turns a failed compare-and-swap into ExitConflict (printing the
// current version in JSON mode) or passes other errors through.
func (a *app) casError(key []byte, err error) error {
	var ce *client.ConflictError
	if errors.As(err, &ce) {
		if a.json() {
			if jerr := writeJSON(a.env.Stdout, struct {
				Key     jsonBytes    `json:"key"`
				Swapped bool         `json:"swapped"`
				Found   bool         `json:"found"`
				Current *jsonVersion `json:"current,omitempty"`
			}{key, false, ce.Found, versionJSON(ce.Current)}); jerr != nil {
				return jerr
			}
		}
		return withCode(ExitConflict, fmt.Errorf("cas %q: %s", key, strings.TrimPrefix(ce.Error(), "client: ")))
	}
	// Other failures, without the conflict's detail, are no conflict: an
	// unknown keyspace (NotFound), a keyspace this site does not hold
	// (FailedPrecondition), ... exit as from every other command.
	return err
}

func (a *app) historyCommand() *cobra.Command {
	var limit int
	var strong bool
	cmd := &cobra.Command{
		Use:   "history KEY",
		Short: "List the retained versions of a key",
		Long: `List the retained versions of KEY, newest first, as VERSION<TAB>VALUE lines
(VERSION<TAB>(deleted) for a delete). A key never written has an empty history.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := []byte(args[0])
			if limit < 0 {
				return usageErrorf("invalid --limit %d: must not be negative", limit)
			}
			return a.withClient(cmd, true, func(ctx context.Context, c *client.Client) error {
				h, err := c.History(ctx, key, limit, readOptions(strong)...)
				if err != nil {
					return err
				}
				if a.json() {
					type entry struct {
						Version   *jsonVersion `json:"version"`
						Value     jsonBytes    `json:"value,omitzero"`
						Tombstone bool         `json:"tombstone"`
					}
					doc := struct {
						Key      jsonBytes `json:"key"`
						Versions []entry   `json:"versions"`
					}{Key: key, Versions: []entry{}}
					for _, e := range h {
						je := entry{Version: versionJSON(e.Version), Tombstone: e.Tombstone}
						if !e.Tombstone {
							je.Value = e.Value
							if je.Value == nil {
								je.Value = jsonBytes{}
							}
						}
						doc.Versions = append(doc.Versions, je)
					}
					return writeJSON(a.env.Stdout, doc)
				}
				w := bufio.NewWriter(a.env.Stdout)
				for _, e := range h {
					w.WriteString(e.Version.String())
					w.WriteByte('\t')
					if e.Tombstone {
						w.WriteString("(deleted)")
					} else {
						w.Write(e.Value)
					}
					w.WriteByte('\n')
				}
				return w.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "maximum number of versions (0: server default, 10)")
	cmd.Flags().BoolVar(&strong, "strong", false, "linearizable read (within the local site) instead of causal")
	return cmd
}
