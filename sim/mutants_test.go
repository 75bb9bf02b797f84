package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rootPkg is the package the mutants are applied to.
const rootPkg = "github.com/resilienthttp/resilient"

// An edit rewrites one statement of one function of the root package. The
// statement is found by its anchor: its first line as gofmt prints it,
// comments aside. The anchor must match exactly one statement of the
// function, or the mutant fails to apply: a refactor cannot silently turn
// a mutant into a no-op.
type edit struct {
	file   string // a file of the root module, from its directory
	fn     string // "name" for a function, "type.name" for a method
	anchor string // the statement's first line, trimmed
	op     string // "replace" the statement, or insert code "before" or "after" it
	code   string
}

// A mutant is a known bug: edits that inject it into a copy of the source.
type mutant struct {
	name  string
	edits []edit
}

// mutants are the known bugs the sweep must catch, one at a time.
var mutants = []mutant{
	{"newkey", []edit{{ // a retry is sent under a new key
		file: "internal/wire/send.go", fn: "Sender.attemptRequest",
		anchor: "w = &wr.w", op: "after",
		code: "if p.I > 0 { var ks KeySource; w.key[0], _ = ks.Mint() }",
	}}},
	{"redirectdone", []edit{{ // a redirect answer is recorded Done in the Store
		file: "ledger.go", fn: "isRedirect",
		anchor: "if resp == nil {", op: "before",
		code: "return false",
	}}},
	{"unsaferesend", []edit{{ // an unsafe request is re-sent without evidence
		file: "decide.go", fn: "call.verdict",
		anchor: `if !a.Sent || !op.unsafe && (op.key != "" || idempotentMethod(c.Req.Method)) {`, op: "replace",
		code: "return v",
	}}},
	{"anyprecondition", []edit{{ // every request counts as guarded by a strong precondition
		file: "internal/wire/precondition.go", fn: "Guarded",
		anchor: "if len(h) == 0 {", op: "before",
		code: "return true",
	}}},
	{"nofinish", []edit{{ // the final Store Finish is skipped
		file: "operation.go", fn: "operation.record",
		anchor: "s := cfg.store", op: "before",
		code: "return nil",
	}}},
	{"sleeppast", []edit{{ // a retry's wait ignores the deadline...
		file: "internal/host/gate.go", fn: "Applicant.fits",
		anchor: "dl, ok := g.Ctx.Deadline()", op: "before",
		code: "return true",
	}, { // ...and the context
		file: "internal/host/gate.go", fn: "sleep",
		anchor: "if d <= 0 {", op: "before",
		code: "ctx = context.WithoutCancel(ctx)",
	}}},
}

// applyMutant writes the files m rewrites, copied from the root package in
// dir root and edited, to dir, and returns the path of the overlay file
// that maps each original to its copy.
func applyMutant(root string, m mutant, dir string) (string, error) {
	srcs := map[string][]byte{}
	for _, e := range m.edits {
		path := filepath.Join(root, e.file)
		src, ok := srcs[path]
		if !ok {
			var err error
			if src, err = os.ReadFile(path); err != nil {
				return "", err
			}
		}
		src, err := applyEdit(src, e)
		if err != nil {
			return "", fmt.Errorf("%s: %w", e.file, err)
		}
		srcs[path] = src
	}
	replace := map[string]string{}
	for path, src := range srcs {
		cp := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(cp, src, 0o644); err != nil {
			return "", err
		}
		replace[path] = cp
	}
	js, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, js, 0o644)
}

// applyEdit returns src with e applied, or an error if e's function or
// anchor is not found exactly once.
func applyEdit(src []byte, e edit) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return nil, err
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && funcName(d) == e.fn {
			fn = d
		}
	}
	if fn == nil || fn.Body == nil {
		return nil, fmt.Errorf("function %s not found", e.fn)
	}
	var found []ast.Stmt
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		s, ok := n.(ast.Stmt)
		if !ok {
			return true
		}
		if _, ok := s.(*ast.BlockStmt); ok {
			return true
		}
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, s); err == nil {
			first, _, _ := strings.Cut(b.String(), "\n")
			if strings.TrimSpace(first) == e.anchor {
				found = append(found, s)
			}
		}
		return true
	})
	if len(found) != 1 {
		return nil, fmt.Errorf("anchor %q found %d times in %s, want once", e.anchor, len(found), e.fn)
	}
	start, end := fset.Position(found[0].Pos()).Offset, fset.Position(found[0].End()).Offset
	var out []byte
	switch e.op {
	case "replace":
		out = concat(src[:start], e.code, src[end:])
	case "before":
		out = concat(src[:start], e.code+"\n", src[start:])
	case "after":
		out = concat(src[:end], "\n"+e.code, src[end:])
	default:
		return nil, fmt.Errorf("unknown op %q", e.op)
	}
	if bytes.Equal(out, src) {
		return nil, fmt.Errorf("edit at %q changes nothing", e.anchor)
	}
	return format.Source(out)
}

// concat joins a, s and b into a new slice.
func concat(a []byte, s string, b []byte) []byte {
	out := append(append([]byte{}, a...), s...)
	return append(out, b...)
}

// funcName is d's name, prefixed with its receiver's type name for a method.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	typ := d.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}

// TestMutantAnchors checks that every mutant applies to the root package
// as it is, and that an edit whose function or anchor is missing or
// ambiguous is an error, not a silent no-op.
func TestMutantAnchors(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", rootPkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", rootPkg, err)
	}
	root := strings.TrimSpace(string(out))
	for _, m := range mutants {
		if _, err := applyMutant(root, m, t.TempDir()); err != nil {
			t.Errorf("mutant %s: %v", m.name, err)
		}
	}
	src := []byte("package p\n\nfunc f(x int) int {\n\tif x > 0 {\n\t\treturn 1\n\t}\n\treturn 1\n}\n")
	for _, tc := range []struct {
		name string
		e    edit
		want string
	}{
		{"function missing", edit{fn: "g", anchor: "return 1", op: "replace", code: "return 2"}, "function g not found"},
		{"anchor missing", edit{fn: "f", anchor: "return 3", op: "replace", code: "return 2"}, "found 0 times"},
		{"anchor ambiguous", edit{fn: "f", anchor: "return 1", op: "replace", code: "return 2"}, "found 2 times"},
		{"no change", edit{fn: "f", anchor: "if x > 0 {", op: "replace", code: "if x > 0 {\n\t\treturn 1\n\t}"}, "changes nothing"},
	} {
		if _, err := applyEdit(src, tc.e); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	got, err := applyEdit(src, edit{fn: "f", anchor: "if x > 0 {", op: "before", code: "x = -x"})
	if err != nil || !strings.Contains(string(got), "\tx = -x\n\tif x > 0 {") {
		t.Errorf("before: got %s, %v", got, err)
	}
}
