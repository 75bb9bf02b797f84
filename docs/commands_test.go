package docs_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// command is a go command of a page, with the directory it runs in; a
// subshell's closing parenthesis is not part of it.
var command = regexp.MustCompile("(?:cd ([\\w./-]+) && )?(?:[A-Z_]+=\\S+ )*go (run|test|get) ([^`|#)]*)")

// testNames returns the Test functions of dir's test files (and of its
// subdirectories when all is set).
func testNames(t *testing.T, dir string, all bool) []string {
	t.Helper()
	var names []string
	decl := regexp.MustCompile(`(?m)^func (Test\w*)\(`)
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && !all {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
				names = append(names, m[1])
			}
			return err
		}
		return nil
	}))
	return names
}

// TestCommandsFound: every go command of README.md and docs/*.md names what
// exists: go run a main package, go get a package of this repository, go
// test a directory and, with -run, a test that the pattern matches.
func TestCommandsFound(t *testing.T) {
	n := 0
	for _, page := range pages(t) {
		md, err := os.ReadFile(page)
		require.NoError(t, err)
		for i, line := range strings.Split(string(md), "\n") {
			for _, m := range command.FindAllStringSubmatch(line, -1) {
				where := fmt.Sprintf("%s:%d: %s", filepath.Base(page), i+1, strings.TrimSpace(m[0]))
				dir := filepath.Join(root, m[1])
				args := strings.Fields(m[3])
				switch m[2] {
				case "get":
					require.NotEmpty(t, args, where)
					rel, ok := strings.CutPrefix(args[0], "github.com/resilienthttp/resilient")
					require.True(t, ok, where)
					matches, _ := filepath.Glob(filepath.Join(root, rel, "*.go"))
					assert.NotEmpty(t, matches, "%s: no package", where)
					n++
				case "run":
					if len(args) == 0 || !strings.HasPrefix(args[0], "./") {
						continue
					}
					b, err := os.ReadFile(mainFile(t, filepath.Join(dir, args[0])))
					if assert.NoError(t, err, "%s: no main package", where) {
						assert.Contains(t, string(b), "package main", where)
					}
					n++
				case "test":
					run := ""
					for j, a := range args {
						if a == "-run" && j+1 < len(args) {
							run = strings.Trim(args[j+1], "'")
						}
						if strings.HasPrefix(a, "./") || a == "." {
							p := filepath.Join(dir, strings.TrimSuffix(a, "/..."))
							assert.DirExists(t, p, where)
							if run != "" && run != "^$" {
								re, err := regexp.Compile(run)
								require.NoError(t, err, where)
								found := false
								for _, name := range testNames(t, p, strings.HasSuffix(a, "...")) {
									found = found || re.MatchString(name)
								}
								assert.True(t, found, "%s: no test matches %q", where, run)
							}
							n++
						}
					}
				}
			}
		}
	}
	t.Logf("%d go commands checked", n)
	assert.GreaterOrEqual(t, n, 20, "go commands checked")
}

// mainFile returns a .go file of dir that is not a test, or dir itself.
func mainFile(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			return f
		}
	}
	return dir
}

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings.
func anchors(md string) map[string]bool {
	a := map[string]bool{}
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "#") {
			a[slug(strings.TrimLeft(l, "#"))] = true
		}
	}
	return a
}

// TestLinksResolve: every relative link of README.md and docs/*.md names a
// file or directory of the repository and, with #anchor, a heading of it.
func TestLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, page := range pages(t) {
		md, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(md), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); !assert.NoError(t, err, "%s: %s", page, target) {
				continue
			}
			if anchor != "" {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.True(t, anchors(string(b))[anchor], "%s: %s: no such heading", page, target)
			}
		}
	}
	assert.GreaterOrEqual(t, n, 30, "relative links checked")
}
