// Command shape measures the root package against the limits of issues #25
// and #47: the number of non-test Go files, exported identifiers, function
// length, struct size and how many functions write each struct field. It
// prints what it finds and exits 1 when a limit is exceeded.
//
//	go run ./scripts/shape [-v] [DIR]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	maxFiles      = 20 // non-test .go files: the public surface only (#47)
	maxExported   = 90
	maxFuncLines  = 60
	maxFields     = 12
	maxFieldWrite = 2
)

// exemptStructs are allowed more than maxFields: the options' config.
var exemptStructs = map[string]bool{"config": true}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command; it returns the exit status: 0 within the limits, 1 a
// limit exceeded, 2 the package could not be read.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shape", flag.ContinueOnError)
	fl.SetOutput(stderr)
	verbose := fl.Bool("v", false, "list every file, exported identifier and field's writers")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	dir := "."
	if fl.NArg() > 0 {
		dir = fl.Arg(0)
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	sort.Strings(names)
	var files []*ast.File
	for _, n := range names {
		// Tests are not the package.
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	if _, err := conf.Check("root", fset, files, info); err != nil {
		fmt.Fprintln(stderr, "typecheck:", err)
		return 2
	}
	bad := false

	// Files: the root package is the public surface; the machinery lives
	// in internal/ packages (#47).
	fmt.Fprintf(stdout, "files (non-test .go): %d (limit %d)\n", len(files), maxFiles)
	if len(files) > maxFiles {
		bad = true
	}
	if *verbose {
		for _, f := range files {
			fmt.Fprintln(stdout, "  ", filepath.Base(fset.Position(f.Pos()).Filename))
		}
	}

	// Exported identifiers.
	var exported []string
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					exported = append(exported, "func "+d.Name.Name)
					continue
				}
				recv := recvName(d.Recv.List[0].Type)
				if ast.IsExported(recv) {
					exported = append(exported, "method "+recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				switch d.Tok {
				case token.TYPE:
					for _, s := range d.Specs {
						if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
							exported = append(exported, "type "+ts.Name.Name)
						}
					}
				case token.VAR:
					for _, s := range d.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							if n.IsExported() {
								exported = append(exported, "var "+n.Name)
							}
						}
					}
				case token.CONST:
					// A parenthesised group of one type counts once;
					// an untyped constant has no type to share and
					// counts alone.
					groups := map[string][]string{}
					var order []string
					for _, s := range d.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							if !n.IsExported() {
								continue
							}
							t := info.Defs[n].Type().String()
							key := t
							if !d.Lparen.IsValid() || strings.HasPrefix(t, "untyped ") {
								key = n.Name
							}
							if _, ok := groups[key]; !ok {
								order = append(order, key)
							}
							groups[key] = append(groups[key], n.Name)
						}
					}
					for _, k := range order {
						exported = append(exported, "const "+strings.Join(groups[k], ","))
					}
				}
			}
		}
	}
	fmt.Fprintf(stdout, "exported identifiers: %d (limit %d)\n", len(exported), maxExported)
	if len(exported) > maxExported {
		bad = true
	}
	if *verbose {
		for _, e := range exported {
			fmt.Fprintln(stdout, "  ", e)
		}
	}

	// Function length.
	var long []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines {
				long = append(long, fmt.Sprintf("%s %s: %d lines", base(fset, fd.Pos()), funcName(fd), n))
			}
		}
	}
	fmt.Fprintf(stdout, "functions over %d lines: %d\n", maxFuncLines, len(long))
	for _, l := range long {
		fmt.Fprintln(stdout, "  ", l)
	}
	bad = bad || len(long) > 0

	// Struct size.
	var big []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			count := 0
			for _, fl := range st.Fields.List {
				if len(fl.Names) == 0 {
					count++
				}
				count += len(fl.Names)
			}
			if count > maxFields && !exemptStructs[ts.Name.Name] {
				big = append(big, fmt.Sprintf("%s %s: %d fields", base(fset, ts.Pos()), ts.Name.Name, count))
			}
			return true
		})
	}
	fmt.Fprintf(stdout, "structs over %d fields (config exempt): %d\n", maxFields, len(big))
	for _, b := range big {
		fmt.Fprintln(stdout, "  ", b)
	}
	bad = bad || len(big) > 0

	// Field writers: assignments, ++/--, and mutating calls on sync/atomic
	// values, counted per enclosing top-level function. Construction in a
	// composite literal is not a write.
	writers := map[*types.Var]map[string]bool{}
	owner := map[*types.Var]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := funcName(fd)
			note := func(e ast.Expr) {
				for {
					if p, ok := e.(*ast.ParenExpr); ok {
						e = p.X
						continue
					}
					if st, ok := e.(*ast.StarExpr); ok {
						e = st.X
						continue
					}
					if ix, ok := e.(*ast.IndexExpr); ok {
						e = ix.X
						continue
					}
					break
				}
				sel, ok := e.(*ast.SelectorExpr)
				if !ok {
					return
				}
				s := info.Selections[sel]
				if s == nil || s.Kind() != types.FieldVal {
					return
				}
				v := s.Obj().(*types.Var)
				if v.Pkg() == nil || v.Pkg().Path() != "root" {
					return
				}
				if writers[v] == nil {
					writers[v] = map[string]bool{}
					owner[v] = types.TypeString(derefNamed(s.Recv()), func(*types.Package) string { return "" })
				}
				writers[v][name] = true
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					if n.Tok == token.DEFINE {
						return true
					}
					for _, l := range n.Lhs {
						note(l)
					}
				case *ast.IncDecStmt:
					note(n.X)
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					switch sel.Sel.Name {
					case "Store", "Add", "Swap", "CompareAndSwap", "Or", "And":
						if s := info.Selections[sel]; s != nil && s.Kind() == types.MethodVal {
							if p := s.Obj().Pkg(); p != nil && p.Path() == "sync/atomic" {
								note(sel.X)
							}
						}
					}
				}
				return true
			})
		}
	}
	var many []string
	for v, fs := range writers {
		if len(fs) > maxFieldWrite {
			var names []string
			for n := range fs {
				names = append(names, n)
			}
			sort.Strings(names)
			many = append(many, fmt.Sprintf("%s.%s: %d (%s)", owner[v], v.Name(), len(fs), strings.Join(names, ", ")))
		}
	}
	sort.Strings(many)
	fmt.Fprintf(stdout, "fields written from more than %d functions: %d\n", maxFieldWrite, len(many))
	for _, m := range many {
		fmt.Fprintln(stdout, "  ", m)
	}
	bad = bad || len(many) > 0
	if bad {
		return 1
	}
	return 0
}

func derefNamed(t types.Type) types.Type {
	if p, ok := t.(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	return "(" + recvName(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

func base(fset *token.FileSet, p token.Pos) string {
	pos := fset.Position(p)
	return fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line)
}
