package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/causal"
)

// result is the outcome of one in-process kvctl invocation.
type result struct {
	code           int
	stdout, stderr string
}

// kvctl runs kvctl in-process with stdin and an environment holding only
// env (the session file defaults to "none" unless env sets it).
func kvctl(t *testing.T, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr strings.Builder
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == EnvSessionFile {
			return "none"
		}
		return ""
	}
	code := Main(context.Background(), args, Env{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: getenv})
	return result{code, stdout.String(), stderr.String()}
}

// checkErrLine checks that stderr is one "kvctl: " line containing want.
func checkErrLine(t *testing.T, r result, want string) {
	t.Helper()
	if !strings.HasPrefix(r.stderr, "kvctl: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr %q is not one kvctl: line", r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not contain %q", r.stderr, want)
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    client.Version
		wantErr string
	}{
		{in: "1723456789012.0@local", want: client.Version{HLC: causal.MakeHLC(1723456789012, 0), Site: "local"}},
		{in: "1723456789012.65535@eu-west-1", want: client.Version{HLC: causal.MakeHLC(1723456789012, 65535), Site: "eu-west-1"}},
		{in: "0.1@s", want: client.Version{HLC: 1, Site: "s"}},
		{in: "", wantErr: "missing @SITE"},
		{in: "1723456789012.0", wantErr: "missing @SITE"},
		{in: "1723456789012.0@", wantErr: "empty site"},
		{in: "1723456789012@local", wantErr: "missing .LOGICAL"},
		{in: "112945621843152896@local", wantErr: "missing .LOGICAL"}, // a raw hlc is not accepted
		{in: "abc.0@local", wantErr: "not a decimal number"},
		{in: "1.-1@local", wantErr: "not a decimal number"},
		{in: "1.65536@local", wantErr: "out of range"},
		{in: "281474976710656.0@local", wantErr: "out of range"},
		{in: ".0@local", wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseVersion(tt.in)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseVersion(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
				}
				if got.String() != tt.in {
					t.Fatalf("String() = %q, want %q", got.String(), tt.in)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseVersion(%q) = %v, want error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "WALL.LOGICAL@SITE") {
				t.Fatalf("error %q does not contain %q and the expected format", err, tt.wantErr)
			}
			if strings.HasPrefix(err.Error(), "client:") {
				t.Fatalf("error %q leaks the client prefix", err)
			}
			if ExitCode(err) != ExitUsage {
				t.Fatalf("ExitCode = %d, want %d", ExitCode(err), ExitUsage)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command arg", []string{"get"}, "accepts 1 arg(s)"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"get", "k", "--bogus"}, "unknown flag: --bogus"},
		{"bad output", []string{"-o", "yaml", "get", "k"}, `invalid --output "yaml"`},
		{"negative timeout", []string{"--timeout", "-1s", "get", "k"}, "invalid --timeout"},
		{"empty endpoints", []string{"--endpoints", " , ", "get", "k"}, "--endpoints is empty"},
		{"cas without expectation", []string{"cas", "k", "v"}, "needs --expect-version VERSION or --expect-absent"},
		{"cas with both expectations", []string{"cas", "k", "v", "--expect-absent", "--expect-version", "1.0@s"}, "exclusive"},
		{"cas bad version", []string{"cas", "k", "v", "--expect-version", "1@s"}, `invalid version "1@s"`},
		{"cas delete with value", []string{"cas", "k", "v", "--expect-absent", "--delete"}, "--delete takes no VALUE"},
		{"cas delete expecting absence", []string{"cas", "k", "--expect-absent", "--delete"}, "--delete with --expect-absent deletes nothing"},
		{"sites with an empty name", []string{"keyspace", "create", "ks", "--sites", "s1,"}, `--sites "s1," has an empty site name`},
		{"unknown global flag before the command", []string{"--bogus", "get", "greeting"}, "unknown flag: --bogus"},
		{"unknown global flag with a value", []string{"--bogus=1", "get", "greeting"}, "unknown flag: --bogus"},
		{"unknown shorthand before the command", []string{"-ojson", "-x", "get", "k"}, "unknown flag: -x"},
		{"scan prefix and start", []string{"scan", "--prefix", "a", "--start", "b"}, "--prefix cannot be combined"},
		{"scan prefix and end", []string{"scan", "--prefix", "a", "--end", "b"}, "--prefix cannot be combined"},
		{"scan negative limit", []string{"scan", "--limit", "-1"}, "invalid --limit -1"},
		{"scan with argument", []string{"scan", "x"}, "unknown command"},
		{"put value and file", []string{"put", "k", "v", "--file", "/dev/null"}, "either as VALUE or with --file"},
		{"put missing file", []string{"put", "k", "--file", "/nonexistent/value"}, "--file:"},
		{"put file is a directory", []string{"put", "k", "--file", "."}, "--file: . is a directory"},
		{"cas file is a directory", []string{"cas", "k", "--expect-absent", "--file", "."}, "--file: . is a directory"},
		{"bad durability", []string{"put", "k", "v", "--durability", "forever"}, `invalid --durability "forever"`},
		{"sites without min", []string{"put", "k", "v", "--durability", "sites"}, "--durability sites=N"},
		{"sites zero", []string{"put", "k", "v", "--durability", "sites=0"}, "sites=N needs 1 <= N <= 4294967295"},
		{"sites beyond uint32", []string{"put", "k", "v", "--durability", "sites=4294967297"}, `invalid --durability "sites=4294967297": sites=N needs 1 <= N`},
		{"sites far beyond uint32", []string{"put", "k", "v", "--durability", "sites=99999999999"}, `invalid --durability "sites=99999999999"`},
		{"sites beyond int64", []string{"cas", "k", "v", "--expect-absent", "--durability", "sites=99999999999999999999"}, "sites=N needs 1 <= N"},
		{"min-sites beyond uint32", []string{"put", "k", "v", "--durability", "sites", "--min-sites", "4294967297"}, "invalid --min-sites 4294967297: needs 1 <= N <= 4294967295"},
		{"negative min-sites", []string{"put", "k", "v", "--durability", "sites", "--min-sites", "-1"}, "invalid --min-sites -1"},
		{"sites disagree", []string{"put", "k", "v", "--durability", "sites=2", "--min-sites", "3"}, "disagree"},
		{"history negative limit", []string{"history", "k", "--limit", "-2"}, "invalid --limit -2"},
		{"group without subcommand", []string{"cluster"}, "needs a subcommand"},
		{"group unknown subcommand", []string{"admin", "vacuum"}, `unknown command "vacuum"`},
		{"debug partition from several sites", []string{"debug", "partition", "--site", "s1,s2"}, `--site "s1,s2" names more than one site: partition from one site per command`},
		{"completion unknown shell", []string{"completion", "nope"}, `unknown command "nope" for "kvctl completion"`},
		{"completion without shell", []string{"completion"}, "kvctl completion needs a subcommand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A dead endpoint: none of these may get as far as a call.
			args := append([]string{"--endpoints", "127.0.0.1:1", "--timeout", "1s"}, tt.args...)
			r := kvctl(t, "", nil, args...)
			if r.code != ExitUsage {
				t.Fatalf("exit %d, want %d (stderr %q)", r.code, ExitUsage, r.stderr)
			}
			checkErrLine(t, r, tt.want)
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	r := kvctl(t, "", nil, "--help")
	if r.code != ExitOK || !strings.Contains(r.stdout, "Exit codes:") || !strings.Contains(r.stdout, "3  compare-and-swap conflict") {
		t.Fatalf("help: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestEveryHelpExitsZeroAndReads: every command's --help exits 0 and its
// text holds no escape sequence a raw string literal printed as is ("the\n"
// in the middle of a sentence of cluster repair's help); a quoted example
// may show one ("echo hi | kvctl put k" stores "hi\n").
func TestEveryHelpExitsZeroAndReads(t *testing.T) {
	var paths [][]string
	var walk func(path []string, cmd *cobra.Command)
	walk = func(path []string, cmd *cobra.Command) {
		paths = append(paths, path)
		for _, sub := range cmd.Commands() {
			if sub.Name() != "help" {
				walk(append(slices.Clone(path), sub.Name()), sub)
			}
		}
	}
	walk(nil, (&app{env: Env{Getenv: func(string) string { return "" }}}).rootCommand())
	quoted := regexp.MustCompile(`"[^"\n]*"`)
	for _, path := range paths {
		r := kvctl(t, "", nil, append(path, "--help")...)
		if r.code != ExitOK || r.stderr != "" || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("kvctl %s --help: exit %d, stderr %q", strings.Join(path, " "), r.code, r.stderr)
			continue
		}
		if text := quoted.ReplaceAllString(r.stdout, ""); strings.Contains(text, `\n`) || strings.Contains(text, `\t`) {
			t.Errorf("kvctl %s --help prints an escape sequence:\n%s", strings.Join(path, " "), r.stdout)
		}
	}
	if len(paths) < 20 {
		t.Fatalf("walked %d commands: %v", len(paths), paths)
	}
}

func TestExitCode(t *testing.T) {
	wrap := func(c codes.Code) error { return fmt.Errorf("client: get: %w", status.Error(c, "boom")) }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"invalid argument", wrap(codes.InvalidArgument), ExitUsage},
		{"unavailable", wrap(codes.Unavailable), ExitUnavailable},
		{"deadline exceeded", wrap(codes.DeadlineExceeded), ExitUnavailable},
		{"context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), ExitUnavailable},
		{"internal", wrap(codes.Internal), ExitError},
		{"not found", wrap(codes.NotFound), ExitNotFound},
		{"failed precondition outside cas", wrap(codes.FailedPrecondition), ExitError},
		{"resource exhausted", wrap(codes.ResourceExhausted), ExitError},
		{"canceled", wrap(codes.Canceled), ExitError},
		{"plain error", errors.New("disk on fire"), ExitError},
		{"conflict", &client.ConflictError{Code: codes.FailedPrecondition}, ExitConflict},
		{"wrapped conflict", fmt.Errorf("cas: %w", &client.ConflictError{Code: codes.AlreadyExists}), ExitConflict},
		{"bad version", fmt.Errorf("x: %w", client.ErrBadVersion), ExitUsage},
		{"malformed session", client.ErrMalformedSession, ExitUsage},
		{"no endpoints", client.ErrNoEndpoints, ExitUsage},
		{"decided code", withCode(ExitNotFound, errors.New("key not found")), ExitNotFound},
		{"decided code wins", withCode(ExitConflict, wrap(codes.NotFound)), ExitConflict},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestCasErrorCodes(t *testing.T) {
	a := &app{env: Env{Stdout: &strings.Builder{}}, output: formatText}
	// Without the conflict's detail a failure is no conflict: an unknown
	// keyspace is not found, a keyspace held elsewhere another error.
	for c, want := range map[codes.Code]int{codes.NotFound: ExitNotFound, codes.FailedPrecondition: ExitError} {
		err := a.casError([]byte("k"), fmt.Errorf("client: compare-and-swap: %w", status.Error(c, "no")))
		if ExitCode(err) != want {
			t.Errorf("cas %v without detail: exit %d, want %d", c, ExitCode(err), want)
		}
	}
	if err := a.casError([]byte("k"), status.Error(codes.Unavailable, "down")); ExitCode(err) != ExitUnavailable {
		t.Errorf("cas Unavailable: exit %d", ExitCode(err))
	}
}

func TestErrorMessage(t *testing.T) {
	err := fmt.Errorf("client: get: %w", status.Error(codes.Unavailable, "connection refused\nretry later"))
	if got, want := errorMessage(err), "get: connection refused retry later (Unavailable)"; got != want {
		t.Fatalf("errorMessage = %q, want %q", got, want)
	}
	// A status of the client library itself: "get: client: the node ..."
	// said the library's name twice.
	err = fmt.Errorf("client: get: %w", status.Error(codes.Unavailable, "client: the node stopped answering"))
	if got, want := errorMessage(err), "get: the node stopped answering (Unavailable); the endpoint took"; !strings.HasPrefix(got, want) {
		t.Fatalf("errorMessage = %q, want it to start with %q", got, want)
	}
	if got := errorMessage(errors.New("plain")); got != "plain" {
		t.Fatalf("errorMessage = %q", got)
	}
}

func TestReadValue(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "value")
	if err := os.WriteFile(file, []byte("from file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &app{env: Env{Stdin: strings.NewReader("from\x00stdin\n")}}
	if v, err := a.readValue([]string{"k", "arg"}, 1, ""); err != nil || string(v) != "arg" {
		t.Fatalf("VALUE: %q, %v", v, err)
	}
	if v, err := a.readValue([]string{"k"}, 1, file); err != nil || string(v) != "from file\n" {
		t.Fatalf("--file: %q, %v", v, err)
	}
	if v, err := a.readValue([]string{"k"}, 1, ""); err != nil || string(v) != "from\x00stdin\n" {
		t.Fatalf("stdin: %q, %v (the value must be kept byte for byte)", v, err)
	}
	a.env.Stdin = strings.NewReader("dash")
	if v, err := a.readValue([]string{"k"}, 1, "-"); err != nil || string(v) != "dash" {
		t.Fatalf("--file -: %q, %v", v, err)
	}
	if _, err := a.readValue([]string{"k", "arg"}, 1, file); ExitCode(err) != ExitUsage {
		t.Fatalf("VALUE and --file: %v", err)
	}
	if _, err := a.readValue([]string{"k"}, 1, filepath.Join(dir, "missing")); ExitCode(err) != ExitUsage {
		t.Fatalf("missing --file: %v", err)
	}
	if _, err := a.readValue([]string{"k"}, 1, dir); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("--file of a directory: exit %d, %v", ExitCode(err), err)
	}
	// Stdin from /dev/null (cron, systemd) is a character device but not a
	// terminal: it reads as an empty value, as an empty pipe does.
	t.Run("stdin from the null device", func(t *testing.T) {
		null, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		if fi, err := null.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Skipf("%s is not a character device here (%v)", os.DevNull, err)
		}
		a := &app{env: Env{Stdin: null}}
		for _, f := range []string{"", "-"} {
			if v, err := a.readValue([]string{"k"}, 1, f); err != nil || len(v) != 0 {
				t.Fatalf("stdin from %s (--file %q): %q, %v", os.DevNull, f, v, err)
			}
		}
	})
	regular, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	a.env.Stdin = regular
	if v, err := a.readValue([]string{"k"}, 1, ""); err != nil || string(v) != "from file\n" {
		t.Fatalf("stdin from a file: %q, %v", v, err)
	}
}

func TestSessionFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf", "causeway", "session")
	tok, err := loadSession(path)
	if err != nil || tok != nil {
		t.Fatalf("missing file: %q, %v", tok, err)
	}
	var s causal.Session
	s.Observe("default", []byte("a"), causal.Version{HLC: 10, Site: "s1"})
	if err := saveSession(path, s.Encode(), false); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("session file mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("session dir mode %v, want 0700", di.Mode().Perm())
	}
	tok, err = loadSession(path)
	if err != nil || string(tok) != string(s.Encode()) {
		t.Fatalf("load after save: %q, %v", tok, err)
	}

	// A save merges with what another kvctl saved meanwhile.
	var o causal.Session
	o.Observe("default", []byte("b"), causal.Version{HLC: 20, Site: "s2"})
	if err := saveSession(path, o.Encode(), false); err != nil {
		t.Fatal(err)
	}
	tok, _ = loadSession(path)
	got, err := causal.DecodeSession(tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Floor("default", []byte("a")); !ok || got.MaxHLC != 20 {
		t.Fatalf("merged session = %+v, want floors of a and b", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("session dir holds %d entries, want 1 (temp files left?)", len(entries))
	}
	// Empty tokens are not written.
	empty := filepath.Join(t.TempDir(), "s")
	if err := saveSession(empty, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("empty session created a file: %v", err)
	}
}

func TestCorruptSessionFile(t *testing.T) {
	valid := func() []byte {
		var s causal.Session
		s.Observe("default", []byte("a"), causal.Version{HLC: 10, Site: "s1"})
		return s.Encode()
	}()
	flipped := append([]byte(nil), valid...)
	flipped[len(flipped)-1] ^= 0xff
	for name, content := range map[string]string{
		"not base64":   "%%% not a token %%%\n",
		"not a token":  base64.StdEncoding.EncodeToString([]byte("hello world")) + "\n",
		"bad checksum": base64.StdEncoding.EncodeToString(flipped) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "session")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadSession(path)
			if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "delete it") || !strings.Contains(err.Error(), path) {
				t.Fatalf("loadSession = %v (exit %d), want a usage error naming the file and telling to delete it", err, ExitCode(err))
			}
			// Through the command: exit 2 before any call is made.
			r := kvctl(t, "", nil, "--endpoints", "127.0.0.1:1", "--session-file", path, "get", "k")
			if r.code != ExitUsage {
				t.Fatalf("exit %d, want %d (%q)", r.code, ExitUsage, r.stderr)
			}
			checkErrLine(t, r, "is corrupt")
			if data, _ := os.ReadFile(path); string(data) != content {
				t.Fatal("a corrupt session file was modified")
			}
		})
	}
	// Whitespace-only files are empty sessions.
	path := filepath.Join(t.TempDir(), "session")
	os.WriteFile(path, []byte("\n"), 0o600)
	if tok, err := loadSession(path); err != nil || tok != nil {
		t.Fatalf("blank session file: %q, %v", tok, err)
	}
}

// TestSessionFileIsADirectory: a session file that is a directory stops
// kvctl before it calls the server, as a usage error that says how to
// name a file or run without a session.
func TestSessionFileIsADirectory(t *testing.T) {
	dir := t.TempDir()
	r := kvctl(t, "", nil, "--endpoints", "127.0.0.1:1", "--session-file", dir, "get", "k")
	if r.code != ExitUsage {
		t.Fatalf("exit %d, want %d (%q)", r.code, ExitUsage, r.stderr)
	}
	checkErrLine(t, r, "session file "+dir+" is a directory; name a file with --session-file PATH")
	checkErrLine(t, r, "--session-file none")
}

// TestSessionFileUnderAFile: a --session-file whose path goes through a
// file (a typo, or a file where the configuration directory should be)
// exited with code 5, as a server error does; it is a usage error, like a
// session file that is a directory, found before any call.
func TestSessionFileUnderAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "session")
	r := kvctl(t, "", nil, "--endpoints", "127.0.0.1:1", "--session-file", path, "get", "k")
	if r.code != ExitUsage {
		t.Fatalf("exit %d, want %d (%q)", r.code, ExitUsage, r.stderr)
	}
	checkErrLine(t, r, "session file "+path+": a part of its path is a file, not a directory")
}

// TestTimeoutOverBeforeTheStart: a --timeout that runs out before the
// command starts said only "context deadline exceeded".
func TestTimeoutOverBeforeTheStart(t *testing.T) {
	r := kvctl(t, "", nil, "--endpoints", "127.0.0.1:1", "--timeout", "1ns", "get", "k")
	if r.code != ExitUnavailable {
		t.Fatalf("exit %d, want %d (%q)", r.code, ExitUnavailable, r.stderr)
	}
	checkErrLine(t, r, "the command's deadline (--timeout 1ns) passed before it could start")
}

func TestJSONBytes(t *testing.T) {
	b, err := json.Marshal(struct {
		A jsonBytes `json:"a"`
		B jsonBytes `json:"b"`
		C jsonBytes `json:"c,omitzero"`
		D jsonBytes `json:"d,omitzero"`
	}{jsonBytes("héllo"), jsonBytes{0xff, 0x00}, nil, jsonBytes{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"a":"héllo","b":{"base64":"/wA="},"d":""}`; got != want {
		t.Fatalf("json = %s, want %s", got, want)
	}
}
