package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is the root module's path.
const module = "github.com/resilienthttp/resilient"

// goTree is what docs/architecture.md may name of the root package and of
// internal/: files, declarations and imports, parsed with go/parser.
type goTree struct {
	// files: each file's declarations, by its path from the root
	// ("transport.go", "internal/host/gate.go"). A function is "Name", a
	// method "Recv.Name".
	files map[string]map[string]bool
	// names: each package's top-level names, by its path ("resilient",
	// "internal/host"), test files included.
	names map[string]map[string]bool
	// imports: the packages of the module each package's non-test files
	// import ("resilient", "internal/wire", "persist").
	imports map[string][]string
	// rootFiles: the root package's non-test files.
	rootFiles []string
}

// parseTree parses the root package and every package under internal/.
func parseTree(t *testing.T) *goTree {
	t.Helper()
	tr := &goTree{files: map[string]map[string]bool{}, names: map[string]map[string]bool{}, imports: map[string][]string{}}
	dirs, err := filepath.Glob(filepath.Join(root, "internal", "*"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, dir := range append([]string{root}, dirs...) {
		pkg := "resilient"
		if dir != root {
			pkg = "internal/" + filepath.Base(dir)
		}
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		names, imports := map[string]bool{}, map[string]bool{}
		for _, p := range paths {
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
			decls := map[string]bool{}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						decls[d.Name.Name], names[d.Name.Name] = true, true
					} else {
						decls[recvName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							names[s.Name.Name] = true
						case *ast.ValueSpec:
							for _, n := range s.Names {
								names[n.Name] = true
							}
						}
					}
				}
			}
			tr.files[rel] = decls
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			if pkg == "resilient" {
				tr.rootFiles = append(tr.rootFiles, rel)
			}
			for _, im := range f.Imports {
				path, err := strconv.Unquote(im.Path.Value)
				require.NoError(t, err)
				if path == module {
					imports["resilient"] = true
				} else if rest, ok := strings.CutPrefix(path, module+"/"); ok {
					imports[rest] = true
				}
			}
		}
		tr.names[pkg] = names
		tr.imports[pkg] = slices.Sorted(maps.Keys(imports))
	}
	return tr
}

// recvName is the type name of a method's receiver: T of *T or T[K].
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

// The references the page makes, each in backquotes: a file (`settle.go`,
// `internal/host/gate.go`), a function or method (`decide()`,
// `call.run()`, `wire.CheckRequest()`), a package (`internal/host`) and a
// name of an internal package (`host.Config`).
var (
	fileRef = regexp.MustCompile("`((?:internal/[a-z0-9]+/)?[a-z0-9_]+\\.go)`")
	funcRef = regexp.MustCompile("`(?:([A-Za-z_]\\w*)\\.)?([A-Za-z_]\\w*)\\(\\)`")
	pkgRef  = regexp.MustCompile("`(resilient|internal/[a-z0-9]+)`")
	nameRef = regexp.MustCompile("`([a-z]+)\\.([A-Z]\\w*)`")
)

// unit is a block of the page: a paragraph, a list item or a table row,
// under its section (the last "## " heading).
type unit struct {
	section, text string
	line          int
	item          bool // a numbered list item
}

var listItem = regexp.MustCompile(`^(\d+\.|-) `)

// units splits md into its blocks.
func units(md string) []unit {
	var (
		us      []unit
		section string
		cur     *unit
	)
	flush := func() {
		if cur != nil {
			us = append(us, *cur)
			cur = nil
		}
	}
	fenced := false
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			flush()
			continue
		}
		switch {
		case fenced:
		case strings.TrimSpace(l) == "":
			flush()
		case strings.HasPrefix(l, "#"):
			flush()
			if h, ok := strings.CutPrefix(l, "## "); ok {
				section = h
			}
		case strings.HasPrefix(l, "|") || listItem.MatchString(l):
			flush()
			cur = &unit{section: section, text: l, line: i + 1, item: l[0] >= '0' && l[0] <= '9'}
			if strings.HasPrefix(l, "|") {
				flush()
			}
		case cur == nil:
			cur = &unit{section: section, text: l, line: i + 1}
		default:
			cur.text += "\n" + l
		}
	}
	flush()
	return us
}

// fn is a function or method a unit names, with the file it is declared
// in (one of the unit's files, or its package's for `pkg.F()`).
type fn struct{ file, name string }

// resolve returns the files and functions unit u names, and what of them
// is not in tr: a file that does not exist, a function not declared in
// any file u names, a package or a name that does not exist.
func (tr *goTree) resolve(u unit) (files []string, fns []fn, problems []string) {
	for _, m := range fileRef.FindAllStringSubmatch(u.text, -1) {
		if _, ok := tr.files[m[1]]; !ok {
			problems = append(problems, "no file "+m[1])
			continue
		}
		if !slices.Contains(files, m[1]) {
			files = append(files, m[1])
		}
	}
	for _, m := range pkgRef.FindAllStringSubmatch(u.text, -1) {
		if _, ok := tr.names[m[1]]; !ok {
			problems = append(problems, "no package "+m[1])
		}
	}
	for _, m := range nameRef.FindAllStringSubmatch(u.text, -1) {
		if names, ok := tr.names["internal/"+m[1]]; ok && !names[m[2]] {
			problems = append(problems, fmt.Sprintf("internal/%s declares no %s", m[1], m[2]))
		}
	}
	for _, m := range funcRef.FindAllStringSubmatch(u.text, -1) {
		name := m[2]
		if m[1] != "" {
			if names, ok := tr.names["internal/"+m[1]]; ok {
				// A package's function: `wire.CheckRequest()`.
				if !names[m[2]] {
					problems = append(problems, fmt.Sprintf("internal/%s declares no %s", m[1], m[2]))
				}
				continue
			}
			name = m[1] + "." + m[2]
		}
		where := ""
		for _, f := range files {
			if tr.files[f][name] {
				where = f
			}
		}
		if where == "" {
			problems = append(problems, fmt.Sprintf("%s() is declared in none of %v", name, files))
			continue
		}
		if f := (fn{where, name}); !slices.Contains(fns, f) {
			fns = append(fns, f)
		}
	}
	return files, fns, problems
}

func architecture(t *testing.T) (string, *goTree) {
	t.Helper()
	return read(t, "docs/architecture.md"), parseTree(t)
}

// TestArchitectureChecker: the checks of the page find what is wrong.
func TestArchitectureChecker(t *testing.T) {
	tr := parseTree(t)
	tests := []struct {
		name, text string
		files, fns int
		problems   []string
	}{
		{"a function in its file", "`decide.go`: `guard()`", 1, 1, nil},
		{"a method in an internal file", "`internal/host/gate.go` `State.Reserve()`, `Reservation.Wait()`", 1, 2, nil},
		{"one of two files", "`settle.go`, `decide.go`: `call.verdict()`", 2, 1, nil},
		{"a package's name", "`host.Config`, `wire.CheckRequest()`, `internal/loops`", 0, 0, nil},
		{"a function in another file", "`settle.go`: `guard()`", 1, 0, []string{"guard() is declared in none of [settle.go]"}},
		{"a function without a file", "`call.run()`", 0, 0, []string{"call.run() is declared in none of []"}},
		{"a file that does not exist", "`plain.go`", 0, 0, []string{"no file plain.go"}},
		{"a method of another type", "`transport.go` `Transport.run()`", 1, 0, []string{"Transport.run() is declared in none of [transport.go]"}},
		{"a package that does not exist", "`internal/gate`", 0, 0, []string{"no package internal/gate"}},
		{"a name a package does not declare", "`host.Decision`, `wire.Classify()`", 0, 0,
			[]string{"internal/host declares no Decision", "internal/wire declares no Classify"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, fns, problems := tr.resolve(unit{text: tt.text})
			assert.Len(t, files, tt.files)
			assert.Len(t, fns, tt.fns)
			assert.Equal(t, tt.problems, problems)
		})
	}
}

// TestArchitecturePackages: the page's table of packages lists packages
// that exist, with the packages of this table each imports, exactly; it
// lists every internal package the root imports; none of them imports the
// root.
func TestArchitecturePackages(t *testing.T) {
	md, tr := architecture(t)
	rows := table(t, md, "| package | what it is | imports |")
	listed := map[string]bool{}
	for _, r := range rows {
		require.Len(t, r, 3)
		listed[strings.Trim(r[0], "`")] = true
	}
	for _, r := range rows {
		pkg := strings.Trim(r[0], "`")
		t.Run(pkg, func(t *testing.T) {
			require.Contains(t, tr.names, pkg, "no such package")
			want := []string{}
			for _, m := range pkgRef.FindAllStringSubmatch(r[2], -1) {
				want = append(want, m[1])
			}
			if len(want) == 0 {
				assert.Equal(t, "none", r[2])
			}
			got := []string{}
			for _, im := range tr.imports[pkg] {
				if listed[im] || strings.HasPrefix(im, "internal/") {
					got = append(got, im)
				}
			}
			assert.Equal(t, want, got, "its imports among the packages of the table, in order")
			assert.NotContains(t, tr.imports[pkg], "resilient", "imports the root")
		})
	}
	for _, im := range tr.imports["resilient"] {
		if strings.HasPrefix(im, "internal/") {
			assert.True(t, listed[im], "the root imports %s: not listed", im)
		}
	}
}

// TestArchitectureRootFiles: the page names the root package's non-test
// files, all of them, and counts them.
func TestArchitectureRootFiles(t *testing.T) {
	md, tr := architecture(t)
	count := regexp.MustCompile(`The root's (\d+) files`)
	for _, u := range units(md) {
		m := count.FindStringSubmatch(u.text)
		if m == nil {
			continue
		}
		var named []string
		for _, f := range fileRef.FindAllStringSubmatch(u.text, -1) {
			named = append(named, f[1])
		}
		assert.ElementsMatch(t, tr.rootFiles, named)
		assert.Equal(t, strconv.Itoa(len(tr.rootFiles)), m[1])
		return
	}
	t.Fatalf("no %q", count)
}

// TestArchitectureNames: every file, function, package and name the page
// names exists, each function in a file its paragraph, list item or table
// row names.
func TestArchitectureNames(t *testing.T) {
	md, tr := architecture(t)
	n := 0
	for _, u := range units(md) {
		files, fns, problems := tr.resolve(u)
		if len(files)+len(fns)+len(problems) == 0 {
			continue
		}
		n += len(fns)
		t.Run(strconv.Itoa(u.line), func(t *testing.T) {
			assert.Empty(t, problems, "docs/architecture.md:%d: %s", u.line, u.text)
		})
	}
	assert.GreaterOrEqual(t, n, 80, "functions checked")
}

// TestArchitectureWalk: the counts the page gives for the walk of the 503
// question are the distinct files and functions its numbered list names.
func TestArchitectureWalk(t *testing.T) {
	md, tr := architecture(t)
	const section = "Is a 503 with Retry-After on a keyed POST retried, and why?"
	var (
		files  = map[string]bool{}
		fns    = map[fn]bool{}
		counts []string
		steps  int
	)
	count := regexp.MustCompile(`\*\*(\d+) files and (\d+) functions\*\*`)
	for _, u := range units(md) {
		if u.section != section {
			continue
		}
		if m := count.FindStringSubmatch(u.text); m != nil {
			counts = m[1:]
		}
		if !u.item {
			continue
		}
		steps++
		fs, ffs, problems := tr.resolve(u)
		assert.Empty(t, problems, "docs/architecture.md:%d", u.line)
		assert.NotEmpty(t, ffs, "docs/architecture.md:%d: a step names a function", u.line)
		for _, f := range fs {
			files[f] = true
		}
		for _, f := range ffs {
			fns[f] = true
		}
	}
	require.NotZero(t, steps, "no numbered steps under %q", section)
	require.Len(t, counts, 2, "no **N files and M functions** under %q", section)
	assert.Equal(t, strconv.Itoa(len(files)), counts[0], "files: %v", slices.Sorted(maps.Keys(files)))
	assert.Equal(t, strconv.Itoa(len(fns)), counts[1], "functions")
	assert.Len(t, fns, steps, "one function per step")
}
