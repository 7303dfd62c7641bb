package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A rule is one structural check, run on every parsed file of the module.
type rule struct {
	name  string
	check func(f *sourceFile, report reportFunc)
}

// reportFunc records a violation at n.
type reportFunc func(n ast.Node, format string, args ...any)

// rules are the project's lint rules. Each rule's scope and exemptions are
// declared next to its check.
var rules = []rule{
	{"bbolt-owner", checkBboltOwner},
	{"pure-core", checkPureCore},
	{"status-tables", checkStatusTables},
	{"no-ctx-in-struct", checkNoCtxInStruct},
	{"test-hooks", checkTestHooks},
}

// TestLint runs every rule over the whole module; the tree must be clean.
func TestLint(t *testing.T) {
	root := moduleRoot(t)
	files, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, files)
	found := run(files)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			for _, f := range found {
				if f.rule == r.name {
					t.Errorf("%s", f)
				}
			}
		})
	}
}

// checkLoaded guards the rules against a loader that silently finds
// nothing and against exemptions that outlived their code: the storage
// package must be seen importing bbolt, every error table must exist, and
// every allowlisted function must still build a status.
func checkLoaded(t *testing.T, files []*sourceFile) {
	t.Helper()
	byPath := map[string]*sourceFile{}
	storageUsesBolt := false
	for _, f := range files {
		byPath[f.path] = f
		if f.pkgDir == storageDir && f.importsPath(bboltPath) {
			storageUsesBolt = true
		}
	}
	if !storageUsesBolt {
		t.Errorf("loaded %d files but none of %s imports %s: is the loader broken?", len(files), storageDir, bboltPath)
	}
	for p := range statusTables {
		if byPath[p] == nil {
			t.Errorf("status-tables: error table %s does not exist; update statusTables", p)
		}
	}
	for p, funcs := range statusAllowed {
		f := byPath[p]
		for fn := range funcs {
			if f == nil || !buildsStatus(f, fn) {
				t.Errorf("status-tables: %s %s is allowlisted but builds no status; remove it from statusAllowed", p, fn)
			}
		}
	}
}

// --- bbolt-owner ---------------------------------------------------------

const (
	bboltPath  = "go.etcd.io/bbolt"
	storageDir = "internal/storage"
)

// checkBboltOwner: one package owns bbolt (docs/storage.md), so that the
// bucket layout, the key encodings and the copy-before-leaving-a-transaction
// discipline live in one place. internal/storage and its own tests may
// import bbolt (and its subpackages); nothing else may, tests included: a
// test elsewhere that needs to inspect or damage a state file does it
// through internal/storage's API. bench/ has no exemption either: the etcd
// comparison talks to etcd over its client API and never opens a bbolt
// file itself.
func checkBboltOwner(f *sourceFile, report reportFunc) {
	if f.under(storageDir) {
		return
	}
	for _, imp := range f.ast.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p == bboltPath || strings.HasPrefix(p, bboltPath+"/") {
			report(imp, "imports %s: only %s may use bbolt", p, storageDir)
		}
	}
}

// --- pure-core -----------------------------------------------------------

// pureCore are the protocol packages that must stay deterministic in their
// inputs (STYLE.md habit 1): the driver owns clocks, timers, randomness and
// goroutines. Their tests are exempt (a test may time itself or seed a
// source from the clock and print the seed).
var pureCore = []string{"internal/causal", "internal/causalcheck", "internal/placement"}

// clockFuncs are the functions of package time that read the wall clock or
// start a timer.
var clockFuncs = set("Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker")

// randAllowed are the names of math/rand and math/rand/v2 that do not touch
// the global source: constructors of an explicit source and their types.
// rand.New(src) with a source passed in by the caller is fine.
var randAllowed = set("New", "NewSource", "NewPCG", "NewChaCha8", "NewZipf", "Rand", "Source", "Source64", "Zipf", "PCG", "ChaCha8")

func checkPureCore(f *sourceFile, report reportFunc) {
	if f.test {
		return
	}
	inScope := false
	for _, d := range pureCore {
		inScope = inScope || f.under(d)
	}
	if !inScope {
		return
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "starts a goroutine: pure code leaves goroutines to its driver")
		case *ast.SelectorExpr:
			switch pkg, name := f.pkgOf(n), n.Sel.Name; pkg {
			case "time":
				if clockFuncs[name] {
					report(n, "uses time.%s: pure code takes the time as an input", name)
				}
			case "math/rand", "math/rand/v2":
				if !randAllowed[name] {
					report(n, "uses %s.%s, the global random source: take a *rand.Rand or a seed as an input", pkg, name)
				}
			case "crypto/rand":
				report(n, "uses crypto/rand.%s: pure code takes randomness as an input", name)
			}
		}
		return true
	})
}

// --- status-tables -------------------------------------------------------

const statusPath = "google.golang.org/grpc/status"

// statusConstructors are the functions of package status that build a
// status from a code or an arbitrary error. status.Code, status.FromError
// and status.Convert only inspect an error and may be used anywhere.
var statusConstructors = set("Error", "Errorf", "New", "Newf", "ErrorProto", "FromProto", "FromContextError")

// statusTables are the error tables (STYLE.md habit 4): each API edge maps
// its sentinel errors to gRPC codes in one file, and only there are
// statuses built.
var statusTables = map[string]string{
	"internal/rpc/errors.go":       "the kv API",
	"internal/rpc/admin_errors.go": "the admin API",
	"internal/peer/errors.go":      "the peer API",
	"internal/transport/errors.go": "the raft transport",
	// The peer Chain and Cluster services answer other nodes' shippers
	// and joins; their few statuses are built at their edge.
	"internal/geo/serve.go":       "the peer Chain service",
	"internal/cluster/service.go": "the peer Cluster service",
}

// statusAllowed are single functions outside the tables that may build a
// status, by file and function (Type.method for methods), with the reason.
var statusAllowed = map[string]map[string]string{
	"internal/server/server.go": {
		// A panic is not an error value that a table could map: the
		// interceptor wraps every service of the node (kv, admin, peer,
		// raft), and its status deliberately carries no internal detail.
		"Server.recoverUnary": "panic recovery interceptor",
	},
	"internal/server/incarnation.go": {
		// Like recoverUnary, an interceptor in front of every service of
		// the node (kv, admin, peer): a caller of another incarnation of
		// the site is refused before any API's handler, and its table,
		// sees the call.
		"Server.checkIncarnation": "site incarnation interceptor",
	},
	"internal/grpcopts/malformed.go": {
		// grpc-go answers a request it cannot decode INTERNAL before any
		// handler, and its table, sees the call; the registrar of the
		// client-facing services turns that error into INVALID_ARGUMENT.
		"malformedError": "undecodable request codec",
	},
}

// checkStatusTables exempts client/ (the client library builds statuses for
// client-side failures, and it is not an API edge of the server), test files
// (fake servers answer with whatever status a test needs) and generated code
// (protoc-gen-go-grpc's Unimplemented stubs).
func checkStatusTables(f *sourceFile, report reportFunc) {
	if f.test || f.generated || f.under("client") || statusTables[f.path] != "" || !f.importsPath(statusPath) {
		return
	}
	allowed := statusAllowed[f.path]
	for _, d := range f.ast.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && allowed[funcName(fd)] != "" {
			continue
		}
		ast.Inspect(d, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && f.pkgOf(sel) == statusPath && statusConstructors[sel.Sel.Name] {
				report(sel, "builds a gRPC status with status.%s outside the error tables: add the error to the table of its API", sel.Sel.Name)
			}
			return true
		})
	}
}

// buildsStatus reports whether function fn of f calls a status constructor.
func buildsStatus(f *sourceFile, fn string) bool {
	found := false
	for _, d := range f.ast.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && funcName(fd) == fn {
			ast.Inspect(fd, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && f.pkgOf(sel) == statusPath && statusConstructors[sel.Sel.Name] {
					found = true
				}
				return !found
			})
		}
	}
	return found
}

// funcName returns "name" for a function and "Type.name" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// --- no-ctx-in-struct ----------------------------------------------------

// checkNoCtxInStruct: a context is the first parameter of the call it
// scopes and is never stored (STYLE.md habit 7). The rule covers every
// struct type, named or anonymous, test tables included; only generated
// code is exempt. A field of a func type that takes a context is fine.
func checkNoCtxInStruct(f *sourceFile, report reportFunc) {
	if f.generated {
		return
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		st, ok := n.(*ast.StructType)
		if !ok {
			return true
		}
		for _, field := range st.Fields.List {
			if holdsContext(f, field.Type) {
				what := "embeds context.Context"
				if len(field.Names) > 0 {
					what = "field " + field.Names[0].Name + " holds a context.Context"
				}
				report(field, "%s: pass ctx as the first parameter instead", what)
			}
		}
		return true
	})
}

// holdsContext reports whether a field of type t stores a context: the
// type itself, a pointer to it, or a container of it.
func holdsContext(f *sourceFile, t ast.Expr) bool {
	switch t := t.(type) {
	case *ast.SelectorExpr:
		return f.pkgOf(t) == "context" && t.Sel.Name == "Context"
	case *ast.StarExpr:
		return holdsContext(f, t.X)
	case *ast.ArrayType:
		return holdsContext(f, t.Elt)
	case *ast.MapType:
		return holdsContext(f, t.Key) || holdsContext(f, t.Value)
	case *ast.ChanType:
		return holdsContext(f, t.Value)
	case *ast.ParenExpr:
		return holdsContext(f, t.X)
	}
	return false
}

// --- test-hooks ----------------------------------------------------------

const (
	// testHookSuffix ends the name of every test hook: a function that
	// exists only for tests, such as storage.CorruptForTest, which damages
	// a replica's state past the state machine.
	testHookSuffix = "ForTest"
	// testHookFile is the only kind of non-test file that may declare or
	// call a test hook (a hook may delegate to another package's hook).
	testHookFile = "testhooks.go"
)

// checkTestHooks: no code path of a normal build may reach a test hook, so
// that the linker leaves every hook out of the binaries. A function whose
// name ends in ForTest is declared only in a file named testhooks.go, and
// only _test.go files and testhooks.go files refer to one. Generated code
// is exempt.
func checkTestHooks(f *sourceFile, report reportFunc) {
	if f.test || f.generated || path.Base(f.path) == testHookFile {
		return
	}
	isHook := func(name string) bool {
		return len(name) > len(testHookSuffix) && strings.HasSuffix(name, testHookSuffix)
	}
	declared := map[*ast.Ident]bool{}
	for _, d := range f.ast.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && isHook(fd.Name.Name) {
			declared[fd.Name] = true
			report(fd.Name, "declares test hook %s outside a %s file", fd.Name.Name, testHookFile)
		}
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && isHook(id.Name) && !declared[id] {
			report(id, "refers to test hook %s: only _test.go and %s files may", id.Name, testHookFile)
		}
		return true
	})
}

// --- loading -------------------------------------------------------------

// A finding is one violation of a rule.
type finding struct {
	file string // relative to the module root, slash-separated
	line int
	rule string
	msg  string
}

func (f finding) String() string {
	return fmt.Sprintf("%s:%d: [%s] %s", f.file, f.line, f.rule, f.msg)
}

// sourceFile is one parsed .go file of the module.
type sourceFile struct {
	fset      *token.FileSet
	path      string // relative to the module root, slash-separated
	pkgDir    string // the file's directory, relative to the module root
	test      bool
	generated bool
	ast       *ast.File
	imports   map[string]string // the name the file uses for an import → its path
}

// importsPath reports whether f imports the package at path p.
func (f *sourceFile) importsPath(p string) bool {
	for _, q := range f.imports {
		if q == p {
			return true
		}
	}
	return false
}

// under reports whether f belongs to the package in dir or below it.
func (f *sourceFile) under(dir string) bool {
	return f.pkgDir == dir || strings.HasPrefix(f.pkgDir, dir+"/")
}

// pkgOf returns the import path of the package that sel is qualified with,
// or "" when sel is not a qualified identifier (a field or method selection,
// or a local variable shadowing an import name). Dot imports are not
// followed; staticcheck (ST1001) rejects them.
func (f *sourceFile) pkgOf(sel *ast.SelectorExpr) string {
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Obj != nil { // Obj is set for identifiers declared in the file
		return ""
	}
	return f.imports[id.Name]
}

// run applies every rule to files and returns the findings, sorted.
func run(files []*sourceFile) []finding {
	var out []finding
	for _, f := range files {
		for _, r := range rules {
			r.check(f, func(n ast.Node, format string, args ...any) {
				out = append(out, finding{
					file: f.path,
					line: f.fset.Position(n.Pos()).Line,
					rule: r.name,
					msg:  fmt.Sprintf(format, args...),
				})
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out
}

// moduleRoot returns the directory of the go.mod of the module under test.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside a module")
	}
	return filepath.Dir(gomod)
}

// load lists the packages of the module at root with go list (which skips
// testdata, vendor and nested modules) and parses every .go file of their
// directories, whatever its build constraints.
func load(root string) ([]*sourceFile, error) {
	cmd := exec.Command("go", "list", "-e", "-find", "-json=Dir", "./...")
	cmd.Dir = root
	// -find resolves no dependency, so nothing is downloaded.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=readonly")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	fset := token.NewFileSet()
	var files []*sourceFile
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ Dir string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(p.Dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, e.Name()), nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			dir := filepath.ToSlash(rel)
			files = append(files, &sourceFile{
				fset:      fset,
				path:      path.Join(dir, e.Name()),
				pkgDir:    dir,
				test:      strings.HasSuffix(e.Name(), "_test.go"),
				generated: ast.IsGenerated(af),
				ast:       af,
				imports:   importNames(af),
			})
		}
	}
	return files, nil
}

// importNames maps the name under which af uses each import to its path.
func importNames(af *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range af.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if imp.Name != nil {
			m[imp.Name.Name] = p
			continue
		}
		// The default name is the last path element, skipping a major
		// version suffix (math/rand/v2 is rand).
		elems := strings.Split(p, "/")
		name := elems[len(elems)-1]
		if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
			name = elems[len(elems)-2]
		}
		m[name] = p
	}
	return m
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
