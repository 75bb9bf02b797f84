// Command calls draws the root package's files and the calls between them:
// for each pair of files, how many call sites of one call a function or
// method declared in the other. A pair that calls each other both ways is
// listed with the call sites of each way: the calls that run back up. With
// -files, only the pairs where both files are in the comma-separated list.
// With -chains, it lists instead the chains of three field selections or
// more (c.t.cfg.hedge: t, cfg and hedge are fields) in those files.
//
//	go run ./scripts/calls [-files a.go,b.go] [-all] [-chains] [DIR]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	only := flag.String("files", "", "comma-separated file names: only the pairs among them")
	all := flag.Bool("all", false, "list every pair, not only those that call both ways")
	chains := flag.Bool("chains", false, "list the chains of three field selections or more")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("root", fset, files, info)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	keep := map[string]bool{}
	for _, f := range strings.Split(*only, ",") {
		if f != "" {
			keep[f] = true
		}
	}
	if *chains {
		listChains(fset, files, info, keep)
		return
	}
	type pair struct{ from, to string }
	edges := map[pair]int{}
	for _, f := range files {
		from := filepath.Base(fset.Position(f.Pos()).Filename)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch fn := ast.Unparen(call.Fun).(type) {
			case *ast.Ident:
				id = fn
			case *ast.SelectorExpr:
				id = fn.Sel
			case *ast.IndexExpr: // a generic function's instance
				if x, ok := fn.X.(*ast.Ident); ok {
					id = x
				}
			}
			if id == nil {
				return true
			}
			obj, ok := info.Uses[id].(*types.Func)
			if !ok || obj.Pkg() != pkg {
				return true
			}
			to := filepath.Base(fset.Position(obj.Pos()).Filename)
			if to != from && (len(keep) == 0 || keep[from] && keep[to]) {
				edges[pair{from, to}]++
			}
			return true
		})
	}
	var pairs []pair
	for p := range edges {
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
		rev := edges[pair{p.to, p.from}]
		if *all {
			fmt.Printf("%-16s -> %-16s %3d\n", p.from, p.to, edges[p])
		}
		if rev > 0 && p.from < p.to {
			both++
			back += min(edges[p], rev)
			fmt.Printf("both ways: %-16s -> %-16s %3d, back %3d\n", p.from, p.to, edges[p], rev)
		}
	}
	fmt.Printf("pairs: %d, calling both ways: %d, calls that run back up (the smaller way of each): %d\n", len(pairs), both, back)
}

// listChains prints each selector chain of three field selections or more
// in files (those in keep, if any), the longest of each chain only.
func listChains(fset *token.FileSet, files []*ast.File, info *types.Info, keep map[string]bool) {
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
				fmt.Printf("%s: %s\n", fset.Position(sel.Pos()), types.ExprString(x))
			}
			return true
		})
	}
	fmt.Printf("chains of three field selections or more: %d\n", total)
}
