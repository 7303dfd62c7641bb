package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/causeway-db/causeway/client"
)

// Environment variables read by kvctl.
const (
	// EnvEndpoints is the default of --endpoints.
	EnvEndpoints = "CAUSEWAY_ENDPOINTS"
	// EnvSessionFile is the default of --session-file.
	EnvSessionFile = "CAUSEWAY_SESSION_FILE"
)

// DefaultEndpoint is the client address of a kvd started without flags.
const DefaultEndpoint = "127.0.0.1:7379"

// Env is what a kvctl invocation reads and writes besides its arguments.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv looks up environment variables; nil means os.Getenv.
	Getenv func(string) string
}

// app holds one invocation's streams and global flags.
type app struct {
	env Env

	endpoints   string
	keyspace    string
	output      string
	timeout     time.Duration
	sessionFile string

	// attemptTimeout, if set, bounds each attempt of a call instead of
	// --timeout (for commands whose deadline is longer than --timeout).
	attemptTimeout time.Duration

	// ran is set once cobra has parsed the command line and handed over to
	// kvctl's own code: errors before that are usage errors.
	ran bool
}

// Main runs kvctl with args (without the program name) and returns the exit
// code. Errors are printed as one line "kvctl: <message>" on env.Stderr.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	a := &app{env: env}
	root := a.rootCommand()
	if f := unknownLeadingFlag(root, args); f != "" {
		// cobra would take the flag's next word as its value and then
		// complain about the word after it ("unknown command").
		fmt.Fprintf(env.Stderr, "kvctl: unknown flag: %s (see 'kvctl --help')\n", f)
		return ExitUsage
	}
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code, msg := ExitUsage, errorMessage(err)
	if a.ran {
		code = ExitCode(err)
	}
	if (!a.ran || isUsageError(err)) && cmd != nil {
		msg += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
	}
	fmt.Fprintf(env.Stderr, "kvctl: %s\n", msg)
	return code
}

// unknownLeadingFlag returns the first flag of args, before the command
// name, that is not one of root's persistent flags ("" if none).
func unknownLeadingFlag(root *cobra.Command, args []string) string {
	flags := root.PersistentFlags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return ""
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		if strings.HasPrefix(a, "--") {
			f = flags.Lookup(name)
		} else if name != "" {
			// -o json, -ojson, -o=json
			hasValue = hasValue || len(name) > 1
			name = name[:1]
			f = flags.ShorthandLookup(name)
		}
		switch {
		case name == "help" || name == "h":
			return ""
		case f == nil:
			return strings.SplitN(a, "=", 2)[0]
		case !hasValue && f.NoOptDefVal == "":
			i++ // the flag's value
		}
	}
	return ""
}

const rootLong = `kvctl is the command-line client of Causeway, a geo-replicated key-value
database.

Consecutive kvctl invocations form one causal session (read-your-writes,
monotonic reads, ...) through a session file holding the session token: it
is read before and updated after every data command. Use a separate
--session-file per cluster, and "none" to disable it.

Versions are printed and accepted as WALL.LOGICAL@SITE, for example
1723456789012.0@local (hybrid logical clock milliseconds and counter, and the
site the write originated at).

Environment:
  CAUSEWAY_ENDPOINTS      default of --endpoints
  CAUSEWAY_SESSION_FILE   default of --session-file

Exit codes:
  0  success
  1  not found: get of a missing or deleted key, or any command naming a
     keyspace, shard or node that does not exist (NotFound from the server:
     --keyspace of data commands, keyspace show and set-sites, cluster shards
     and repair, shard recover, admin snapshot, node drain and remove), node
     remove of a node removed already
  2  usage error or invalid argument (bad flags or version text, InvalidArgument
     from the server, such as an unknown site in --site or --sites, corrupt
     session file or one that is a directory)
  3  compare-and-swap conflict (cas found another version than expected)
  4  unavailable or timed out (Unavailable, DeadlineExceeded)
  5  any other error
  6  dry run of a command that can lose data (shard recover without --force)`

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "kvctl",
		Short:         "Command-line client of the Causeway key-value database",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.ran = true
			return a.validateGlobal()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })

	endpoints := a.env.Getenv(EnvEndpoints)
	if endpoints == "" {
		endpoints = DefaultEndpoint
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.endpoints, "endpoints", endpoints, "comma-separated client addresses of Causeway nodes (env "+EnvEndpoints+")")
	pf.StringVar(&a.keyspace, "keyspace", client.DefaultKeyspace, "keyspace of data commands")
	pf.StringVarP(&a.output, "output", "o", formatText, "output format: text or json")
	pf.DurationVar(&a.timeout, "timeout", 10*time.Second, "deadline of the whole command, retries included (0: none); 10 s outlasts an election after a leader crashes")
	pf.StringVar(&a.sessionFile, "session-file", a.defaultSessionFile(), `file holding the causal session token; "" or "none" disables it (env `+EnvSessionFile+")")

	root.AddCommand(
		a.putCommand(),
		a.getCommand(),
		a.txnGetCommand(),
		a.delCommand(),
		a.scanCommand(),
		a.casCommand(),
		a.historyCommand(),
		a.clusterCommand(),
		a.keyspaceCommand(),
		a.siteCommand(),
		a.nodeCommand(),
		a.shardCommand(),
		a.adminCommand(),
		a.debugCommand(),
	)
	// cobra's completion command only holds subcommands and would print
	// its help, exiting 0, for a shell it does not know: it refuses one
	// as the other groups do.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = groupRun
		}
	}
	return root
}

// defaultSessionFile is $CAUSEWAY_SESSION_FILE, else causeway/session in the
// user's configuration directory, else none.
func (a *app) defaultSessionFile() string {
	if p := a.env.Getenv(EnvSessionFile); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "causeway", "session")
}

func (a *app) validateGlobal() error {
	switch a.output {
	case formatText, "table":
		a.output = formatText
	case formatJSON:
	default:
		return usageErrorf("invalid --output %q: use text or json", a.output)
	}
	if a.timeout < 0 {
		return usageErrorf("invalid --timeout %v: must not be negative", a.timeout)
	}
	if len(a.endpointList()) == 0 {
		return usageErrorf("--endpoints is empty")
	}
	if a.keyspace == "" {
		return usageErrorf("--keyspace is empty")
	}
	return nil
}

func (a *app) endpointList() []string {
	var out []string
	for _, e := range strings.Split(a.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func (a *app) sessionPath() string {
	if a.sessionFile == "none" {
		return ""
	}
	return a.sessionFile
}

// clientConfig returns the client configuration of the global flags.
func (a *app) clientConfig() client.Config {
	cfg := client.DefaultConfig()
	cfg.Endpoints = a.endpointList()
	cfg.Keyspace = a.keyspace
	if a.timeout > 0 {
		// A connection may take the whole command; a little longer, so
		// that a command whose endpoints never answer ends by its own
		// deadline and says how far each connection got.
		cfg.DialTimeout = a.timeout + time.Second
		// Leave time to fail over from a node that hangs.
		cfg.RequestTimeout = a.timeout
		if len(cfg.Endpoints) > 1 {
			cfg.RequestTimeout = a.timeout / 2
		}
	}
	if a.attemptTimeout > 0 {
		cfg.DialTimeout = min(cfg.DialTimeout, a.attemptTimeout)
		cfg.RequestTimeout = a.attemptTimeout
	}
	return cfg
}

// withClient runs fn with a client of the global flags, under the command's
// deadline. With session set, the client resumes the session file's session
// and the file is updated afterwards (also after a failed call: the session
// only ever holds what replies returned).
func (a *app) withClient(cmd *cobra.Command, session bool, fn func(ctx context.Context, c *client.Client) error) error {
	return a.withClientDeadline(cmd, session, a.timeout, fn)
}

// withClientDeadline is withClient with the command's deadline d (0: none)
// instead of --timeout.
func (a *app) withClientDeadline(cmd *cobra.Command, session bool, d time.Duration, fn func(ctx context.Context, c *client.Client) error) error {
	ctx := cmd.Context()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	cfg := a.clientConfig()
	path := ""
	if session {
		path = a.sessionPath()
	}
	if path != "" {
		tok, err := loadSession(path)
		if err != nil {
			return err
		}
		cfg.SessionToken = tok
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil && d > 0 {
			return fmt.Errorf("the command's deadline (--timeout %v) passed before it could start: %w", d, err)
		}
		return err
	}
	defer c.Close()
	err = fn(ctx, c)
	replace := false
	if path != "" && len(cfg.SessionToken) > 0 && client.IsForeignSession(err) {
		// The file holds a session of another cluster (other endpoints,
		// or this cluster rebuilt from empty data directories). The server
		// refused the request before doing anything: run it again in a
		// new session, which replaces the file's.
		fmt.Fprintf(a.env.Stderr, "kvctl: the session in %s belongs to another cluster; starting a new session\n", path)
		c.Close()
		cfg.SessionToken = nil
		if c, err = client.New(ctx, cfg); err != nil {
			return err
		}
		defer c.Close()
		err = fn(ctx, c)
		replace = true
	}
	if path != "" {
		if tok := c.SessionToken(); len(tok) > 0 && string(tok) != string(cfg.SessionToken) {
			if serr := saveSession(path, tok, replace); serr != nil {
				fmt.Fprintf(a.env.Stderr, "kvctl: warning: could not save the session to %s: %v\n", path, serr)
			}
		} else if replace {
			// The new session has nothing to keep yet (a read of a
			// missing key): the other cluster's session goes all the
			// same, so that the next command does not meet it again.
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				fmt.Fprintf(a.env.Stderr, "kvctl: warning: could not remove the other cluster's session %s: %v\n", path, rerr)
			}
		}
	}
	return err
}

// json reports whether the output format is JSON.
func (a *app) json() bool { return a.output == formatJSON }

// groupCommand returns a command that only holds subcommands.
func groupCommand(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		RunE:  groupRun,
	}
	cmd.AddCommand(subs...)
	return cmd
}

// groupRun runs a command that only holds subcommands: it names the word
// that is not one of them, or asks for one.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usageErrorf("%s needs a subcommand", cmd.CommandPath())
}
