// Command calls draws the files of a package and the calls between them:
// for each pair of files, how many places in one use a function or method
// declared in the other — a call, a method value (run(t.m)), a method
// expression or a function passed as a value; a method promoted from an
// embedded field belongs to the file that declares it. A pair that calls each
// other both ways is listed with the uses of each way: the calls that run back
// up. It checks the root package and every package under internal/ (issue
// #47), each on its own, or the package directories given; tests and files
// other builds would compile are left out. It exits 1 if a pair in any of them
// calls both ways.
//
// With -files, only the pairs where both files are in the comma-separated
// list. With -all, every pair, not only those that call both ways. With
// -chains, it lists instead the chains of three field selections or more
// (c.t.cfg.hedge: t, cfg and hedge are fields) in those files, and exits 0.
//
//	go run ./scripts/calls [-files a.go,b.go] [-all] [-chains] [DIR...]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command; it returns the exit status: 0 no pair calls both ways,
// 1 one does, 2 a package could not be read.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("calls", flag.ContinueOnError)
	fl.SetOutput(stderr)
	only := fl.String("files", "", "comma-separated file names: only the pairs among them")
	all := fl.Bool("all", false, "list every pair, not only those that call both ways")
	chains := fl.Bool("chains", false, "list the chains of three field selections or more")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	dirs := fl.Args()
	if len(dirs) == 0 {
		var err error
		if dirs, err = packageDirs("."); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	keep := map[string]bool{}
	for _, f := range strings.Split(*only, ",") {
		if f != "" {
			keep[f] = true
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil) // shared: each dependency is checked once
	var failed []string
	for _, dir := range dirs {
		if len(dirs) > 1 {
			fmt.Fprintf(stdout, "== %s\n", dir)
		}
		files, info, pkg, err := load(fset, imp, dir)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", dir, err)
			return 2
		}
		if *chains {
			listChains(stdout, fset, files, info, keep)
			continue
		}
		if both := report(stdout, fset, info, pkg, keep, *all); both > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d", dir, both))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stdout, "FAIL: pairs of files that call both ways (%s)\n", strings.Join(failed, ", "))
		return 1
	}
	return 0
}

// packageDirs lists root and every package directory under root/internal:
// those with a non-test Go file, leaving out testdata and directories whose
// name starts with '.' or '_', as the go command does.
func packageDirs(root string) ([]string, error) {
	dirs := []string{root}
	internal := filepath.Join(root, "internal")
	if _, err := os.Stat(internal); err != nil {
		return dirs, nil
	}
	err := filepath.WalkDir(internal, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n := d.Name(); path != internal && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		names, err := goFiles(path)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

// goFiles lists the non-test Go files of dir that the default build compiles.
func goFiles(dir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, filepath.Base(n)); err != nil || !ok {
			continue
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// load parses and type-checks the package in dir.
func load(fset *token.FileSet, imp types.Importer, dir string) ([]*ast.File, *types.Info, *types.Package, error) {
	names, err := goFiles(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, nil, fmt.Errorf("no Go files")
	}
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			return nil, nil, nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check(dir, fset, files, info)
	return files, info, pkg, err
}

// pair is a file that uses a function or method declared in another.
type pair struct{ from, to string }

// edges counts, for each pair of files of pkg, the places in from that use
// a function or method declared in to: every use of its name, called or not.
func edges(fset *token.FileSet, info *types.Info, pkg *types.Package, keep map[string]bool) map[pair]int {
	out := map[pair]int{}
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if !ok || fn.Pkg() != pkg {
			continue
		}
		fn = fn.Origin() // a generic function's or method's declaration
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(fn.Pos()).Filename)
		if to != from && (len(keep) == 0 || keep[from] && keep[to]) {
			out[pair{from, to}]++
		}
	}
	return out
}

// report prints the pairs that call both ways (every pair with all) and a
// summary line; it returns how many pairs call both ways.
func report(w io.Writer, fset *token.FileSet, info *types.Info, pkg *types.Package, keep map[string]bool, all bool) int {
	e := edges(fset, info, pkg, keep)
	var pairs []pair
	for p := range e {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].from != pairs[j].from {
			return pairs[i].from < pairs[j].from
		}
		return pairs[i].to < pairs[j].to
	})
	both, back := 0, 0
	for _, p := range pairs {
		rev := e[pair{p.to, p.from}]
		if all {
			fmt.Fprintf(w, "%-16s -> %-16s %3d\n", p.from, p.to, e[p])
		}
		if rev > 0 && p.from < p.to {
			both++
			back += min(e[p], rev)
			fmt.Fprintf(w, "both ways: %-16s -> %-16s %3d, back %3d\n", p.from, p.to, e[p], rev)
		}
	}
	fmt.Fprintf(w, "pairs: %d, calling both ways: %d, calls that run back up (the smaller way of each): %d\n", len(pairs), both, back)
	return both
}

// listChains prints each selector chain of three field selections or more
// in files (those in keep, if any), the longest of each chain only.
func listChains(w io.Writer, fset *token.FileSet, files []*ast.File, info *types.Info, keep map[string]bool) {
	depth := func(e ast.Expr) int {
		n := 0
		for {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return n
			}
			s := info.Selections[sel]
			if s == nil || s.Kind() != types.FieldVal {
				return n
			}
			n += len(s.Index()) // an embedded field's selection counts each step
			e = sel.X
		}
	}
	total := 0
	for _, f := range files {
		name := filepath.Base(fset.Position(f.Pos()).Filename)
		if len(keep) > 0 && !keep[name] {
			continue
		}
		inner := map[ast.Expr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || inner[sel] {
				return true
			}
			inner[sel.X] = true
			x := ast.Expr(sel)
			if s := info.Selections[sel]; s != nil && s.Kind() != types.FieldVal {
				x = sel.X // a method call on a chain: the chain is its receiver
			}
			if depth(x) >= 3 {
				total++
				fmt.Fprintf(w, "%s: %s\n", fset.Position(sel.Pos()), types.ExprString(x))
			}
			return true
		})
	}
	fmt.Fprintf(w, "chains of three field selections or more: %d\n", total)
}
