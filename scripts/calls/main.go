// Command calls draws the root package's files and the calls between them:
// for each pair of files, how many call sites of one call a function or
// method declared in the other. A pair that calls each other both ways is
// listed with the call sites of each way: the calls that run back up. With
// -files, only the pairs where both files are in the comma-separated list.
//
//	go run ./scripts/calls [-files a.go,b.go] [-all] [DIR]
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
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
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
