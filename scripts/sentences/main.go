// Command sentences measures the sentences of a package's doc comments and
// fails when they run long.
//
// It reads the Go files the default build of DIR compiles (tests and files
// behind build tags left out). It measures every doc comment: the package's,
// and those of top-level declarations, exported and unexported alike, with
// the docs of their struct fields and interface methods. Comments inside
// function bodies are not doc comments and are not measured.
//
// A sentence ends at '.', '?' or '!' followed by a space or a line end; the
// end of a paragraph also ends one. Code blocks (indented lines), list items,
// table rows ('|') and headings ('#') are not sentences. A word is a run of
// non-space characters.
//
// It prints the number of sentences, their mean length in words, the 90th
// percentile and how many exceed the long limit. With -v it also lists the
// longest sentences with file:line. It exits 1 when the 90th percentile
// exceeds -p90 or more than -over percent of sentences exceed -long words.
//
//	go run ./scripts/sentences [-v] [-n 20] [-p90 25] [-long 35] [-over 1] [DIR]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// sentence is one measured sentence and the file:line where it starts.
type sentence struct {
	pos   string
	words int
	text  string
}

func main() {
	verbose := flag.Bool("v", false, "list the longest sentences with file:line")
	top := flag.Int("n", 20, "how many sentences -v lists")
	maxP90 := flag.Int("p90", 25, "fail when the 90th percentile exceeds this many words")
	long := flag.Int("long", 35, "a sentence over this many words is long")
	maxOver := flag.Float64("over", 1, "fail when more than this percentage of sentences is long")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	pkg, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sentences:", err)
		os.Exit(2)
	}
	fset := token.NewFileSet()
	var all []sentence
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sentences:", err)
			os.Exit(2)
		}
		for _, cg := range docs(f) {
			p := fset.Position(cg.Pos())
			all = append(all, split(cg.Text(), name, p.Line)...)
		}
	}
	if len(all) == 0 {
		fmt.Println("no sentences")
		return
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].words > all[j].words })
	total, over := 0, 0
	for _, s := range all {
		total += s.words
		if s.words > *long {
			over++
		}
	}
	n := len(all)
	// Nearest rank: the smallest length at least 90 % of sentences do not exceed.
	p90 := all[n-int(math.Ceil(0.9*float64(n)))].words
	pct := 100 * float64(over) / float64(n)
	fmt.Printf("%d sentences, mean %.1f words, p90 %d, %d over %d words (%.1f %%)\n",
		n, float64(total)/float64(n), p90, over, *long, pct)
	if *verbose {
		for _, s := range all[:min(*top, n)] {
			fmt.Printf("%3d  %s  %s\n", s.words, s.pos, s.text)
		}
	}
	bad := false
	if p90 > *maxP90 {
		fmt.Printf("FAIL: p90 %d exceeds %d words\n", p90, *maxP90)
		bad = true
	}
	if pct > *maxOver {
		fmt.Printf("FAIL: %.1f %% of sentences exceed %d words (limit %g %%)\n", pct, *long, *maxOver)
		bad = true
	}
	if bad {
		os.Exit(1)
	}
}

// docs returns the doc comments of f: the package's, each top-level
// declaration's, and those of struct fields and interface methods in them.
func docs(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(cg *ast.CommentGroup) {
		if cg != nil {
			out = append(out, cg)
		}
	}
	add(f.Doc)
	fields := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit, *ast.BlockStmt:
				return false
			case *ast.Field:
				add(n.Doc)
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			add(d.Doc)
		case *ast.GenDecl:
			add(d.Doc)
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					add(s.Doc)
					fields(s.Type)
				case *ast.ValueSpec:
					add(s.Doc)
				}
			}
		}
	}
	return out
}

// split cuts a comment's text into sentences, skipping code blocks, list
// items, table rows and headings. The comment starts at line first of file;
// a line number is off when the comment opens with blank lines.
func split(text, file string, first int) []sentence {
	var out []sentence
	var words []string
	start := first
	flush := func() {
		if len(words) > 0 {
			out = append(out, sentence{pos: fmt.Sprintf("%s:%d", file, start), words: len(words), text: strings.Join(words, " ")})
			words = nil
		}
	}
	inList := false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			flush()
			inList = false
			continue
		case line[0] == ' ' || line[0] == '\t', isListItem(trimmed),
			strings.HasPrefix(trimmed, "|"), strings.HasPrefix(trimmed, "# "):
			// A list item's wrapped lines are indented, so they land
			// here too; a list ends at a blank line.
			flush()
			inList = isListItem(trimmed) || inList
			continue
		}
		if inList {
			continue
		}
		for _, w := range strings.Fields(line) {
			if len(words) == 0 {
				start = first + i
			}
			words = append(words, w)
			if strings.HasSuffix(w, ".") || strings.HasSuffix(w, "?") || strings.HasSuffix(w, "!") {
				flush()
			}
		}
	}
	flush()
	return out
}

// isListItem reports whether a line starts a list item: "- ", "* ", "+ "
// or a number followed by ". " or ") ".
func isListItem(s string) bool {
	if strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "* ") || strings.HasPrefix(s, "+ ") {
		return true
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(s) && (s[i] == '.' || s[i] == ')') && s[i+1] == ' '
}
