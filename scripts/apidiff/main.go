// Command apidiff checks that the public API of every published package of
// the repository is compatible with its API at the baseline commit (issue
// #47: e10c1d1, before the root package's machinery moved to internal/).
//
// A published package is one a consumer can import: a package of a published
// module (every module of the repository but the tools bench, e2e, examples,
// scripts and sim; see docs/modules.md) that is not a command (package main),
// has non-test Go files, and has no "internal" element in its path.
//
// The baseline is export data written by golang.org/x/exp/cmd/apidiff -w, one
// file per package in scripts/apidiff/baseline (NAME.export, NAME the package's
// path inside the repository with '/' as '.', "resilient" for the root), so
// the check needs no git history: CI's clone may be shallow. The file
// baseline/VERSION records the commit and the apidiff version that wrote it.
//
// Check (the default; ./scripts/test runs it): for each baseline file, in the
// directory of the module that holds the package, it runs
//
//	apidiff -incompatible baseline/NAME.export IMPORTPATH
//
// and fails if apidiff prints anything (apidiff exits 0 even when it reports
// incompatible changes), fails to run, or the package is gone. Compatible
// changes (additions, unexported changes) pass. Packages published since the
// baseline are listed; they have no earlier API to break.
//
// Write: go run ./scripts/apidiff -write [-rev e10c1d1] checks out REV in a
// temporary git worktree ($TMPDIR/resilient-apidiff-<commit>, detached,
// removed afterwards; a fixed path, since the export data records the
// files' paths), lists its published packages there and writes their export
// data into scripts/apidiff/baseline, replacing what was there. Written twice,
// the baseline is byte-identical.
//
// Both need apidiff at the pinned version (the export data's reader and writer
// must agree): ./scripts/test installs it with
//
//	go install golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4
//
// and this command refuses another version.
//
//	go run ./scripts/apidiff [-v] [-apidiff PATH] [-write [-rev REV]]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const (
	// apidiffVersion is the pinned golang.org/x/exp version of the apidiff
	// command; scripts/test installs the same one.
	apidiffVersion = "v0.0.0-20261113113407-e3970619a1a4"
	// baselineRev is the commit whose API the check holds the packages to.
	baselineRev = "e10c1d1"
	// modulePath is the root module's path.
	modulePath = "github.com/resilienthttp/resilient"
	// baselineDir is where the export data lives, from the repository's root.
	baselineDir = "scripts/apidiff/baseline"
)

// toolDirs are the top-level directories whose modules are tools, never
// published (docs/modules.md).
var toolDirs = map[string]bool{"bench": true, "e2e": true, "examples": true, "scripts": true, "sim": true}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status (0 pass, 1 an incompatible
// change or a gone package, 2 the check could not run).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apidiff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	write := fs.Bool("write", false, "write the baseline from -rev instead of checking")
	rev := fs.String("rev", baselineRev, "with -write: the commit to take the baseline from")
	bin := fs.String("apidiff", "", "the apidiff command (default: GOBIN, GOPATH/bin, then PATH)")
	verbose := fs.Bool("v", false, "print the compatible changes too")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(stderr, "scripts/apidiff:", err)
		return 2
	}
	tool, err := findApidiff(*bin)
	if err != nil {
		fmt.Fprintln(stderr, "scripts/apidiff:", err)
		return 2
	}
	if *write {
		if err := writeBaseline(root, *rev, tool, stdout); err != nil {
			fmt.Fprintln(stderr, "scripts/apidiff:", err)
			return 2
		}
		return 0
	}
	return check(root, filepath.Join(root, baselineDir), tool, *verbose, stdout, stderr)
}

// check compares every baseline file in dir with the package in the tree
// at root.
func check(root, dir, tool string, verbose bool, stdout, stderr io.Writer) int {
	if err := checkVersionFile(dir); err != nil {
		fmt.Fprintln(stderr, "scripts/apidiff:", err)
		return 2
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.export"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(stderr, "scripts/apidiff: no baseline in %s (go run ./scripts/apidiff -write)\n", dir)
		return 2
	}
	sort.Strings(files)
	current, err := publishedPackages(root)
	if err != nil {
		fmt.Fprintln(stderr, "scripts/apidiff:", err)
		return 2
	}
	bad := 0
	seen := map[string]bool{}
	for _, f := range files {
		pkg := importPath(strings.TrimSuffix(filepath.Base(f), ".export"))
		seen[pkg] = true
		modDir, ok := current[pkg]
		if !ok {
			fmt.Fprintf(stdout, "INCOMPATIBLE %s: the package is gone (or no longer published)\n", pkg)
			bad++
			continue
		}
		out, err := apidiff(tool, modDir, "-incompatible", f, pkg)
		if err != nil {
			fmt.Fprintf(stderr, "scripts/apidiff: %s: %v\n", pkg, err)
			return 2
		}
		if out = strings.TrimSpace(out); out != "" {
			fmt.Fprintf(stdout, "INCOMPATIBLE %s:\n", pkg)
			for _, l := range strings.Split(out, "\n") {
				fmt.Fprintf(stdout, "  %s\n", l)
			}
			bad++
			continue
		}
		if verbose {
			all, err := apidiff(tool, modDir, f, pkg)
			if err != nil {
				fmt.Fprintf(stderr, "scripts/apidiff: %s: %v\n", pkg, err)
				return 2
			}
			for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
				if l != "" {
					fmt.Fprintf(stdout, "  %s: %s\n", pkg, l)
				}
			}
		}
	}
	var added []string
	for pkg := range current {
		if !seen[pkg] {
			added = append(added, pkg)
		}
	}
	sort.Strings(added)
	for _, pkg := range added {
		fmt.Fprintf(stdout, "new since the baseline (nothing to break): %s\n", pkg)
	}
	fmt.Fprintf(stdout, "published packages checked against %s: %d, incompatible: %d\n", baselineRev, len(files), bad)
	if bad > 0 {
		return 1
	}
	return 0
}

// writeBaseline writes the export data of every package published at rev
// into the baseline directory of the tree at root.
func writeBaseline(root, rev, tool string, stdout io.Writer) error {
	full, err := output(root, "git", "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return fmt.Errorf("%s is not a commit here (a shallow clone? fetch it first): %w", rev, err)
	}
	full = strings.TrimSpace(full)
	// The export data holds the files' paths: a fixed one keeps the
	// baseline byte-identical from one writing to the next.
	tree := filepath.Join(os.TempDir(), "resilient-apidiff-"+full[:12])
	if _, err := os.Stat(tree); err == nil {
		return fmt.Errorf("%s exists (a write that did not finish?): git worktree remove --force %s", tree, tree)
	}
	if _, err := output(root, "git", "worktree", "add", "--detach", tree, full); err != nil {
		return err
	}
	defer func() {
		_, _ = output(root, "git", "worktree", "remove", "--force", tree)
	}()
	pkgs, err := publishedPackages(tree)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, baselineDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.export"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(pkgs))
	for pkg := range pkgs {
		names = append(names, pkg)
	}
	sort.Strings(names)
	for _, pkg := range names {
		f := filepath.Join(dir, fileName(pkg)+".export")
		if _, err := apidiff(tool, pkgs[pkg], "-w", f, pkg); err != nil {
			return fmt.Errorf("%s: %w", pkg, err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	goVersion, err := output(root, "go", "env", "GOVERSION")
	if err != nil {
		return err
	}
	version := fmt.Sprintf("commit %s\napidiff golang.org/x/exp@%s\ngo %s\n", full, apidiffVersion, strings.TrimSpace(goVersion))
	return os.WriteFile(filepath.Join(dir, "VERSION"), []byte(version), 0o644)
}

// checkVersionFile fails when the baseline was written by another apidiff.
func checkVersionFile(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return fmt.Errorf("the baseline has no VERSION file: %w", err)
	}
	want := "apidiff golang.org/x/exp@" + apidiffVersion
	for _, l := range strings.Split(string(b), "\n") {
		if l == want {
			return nil
		}
	}
	return fmt.Errorf("the baseline in %s was not written by %s: rewrite it (go run ./scripts/apidiff -write)", dir, want)
}

// publishedPackages lists the published packages of the tree at root, each
// with the directory of its module.
func publishedPackages(root string) (map[string]string, error) {
	mods, err := modules(root)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]string{}
	for _, m := range mods {
		out, err := output(m, "go", "list", "-f", "{{.ImportPath}} {{.Name}} {{len .GoFiles}}", "./...")
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			if n, _ := strconv.Atoi(f[2]); n > 0 && published(f[0], f[1]) {
				pkgs[f[0]] = m
			}
		}
	}
	return pkgs, nil
}

// published reports whether a consumer can import the package: not a
// command, not internal, not in a tool directory.
func published(importPath, name string) bool {
	if name == "main" {
		return false
	}
	rel, ok := strings.CutPrefix(importPath, modulePath)
	if !ok || rel != "" && rel[0] != '/' {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	if toolDirs[parts[0]] {
		return false
	}
	for _, p := range parts {
		if p == "internal" {
			return false
		}
	}
	return true
}

// modules lists the directories of the published modules of the tree at
// root: each directory with a go.mod outside the tool directories.
func modules(root string) ([]string, error) {
	var mods []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			top := strings.Split(filepath.ToSlash(rel), "/")[0]
			if toolDirs[top] || strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "go.mod" {
			mods = append(mods, filepath.Dir(path))
		}
		return nil
	})
	sort.Strings(mods)
	return mods, err
}

// fileName is the baseline's name for a package: its path inside the
// repository with '/' as '.', "resilient" for the root.
func fileName(importPath string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(importPath, modulePath), "/")
	if rel == "" {
		return "resilient"
	}
	return strings.ReplaceAll(rel, "/", ".")
}

// importPath is fileName's inverse.
func importPath(name string) string {
	if name == "resilient" {
		return modulePath
	}
	return modulePath + "/" + strings.ReplaceAll(name, ".", "/")
}

// apidiff runs the apidiff command in dir and returns what it printed.
func apidiff(tool, dir string, args ...string) (string, error) {
	return output(dir, tool, args...)
}

// findApidiff returns the apidiff command to run: flagValue if set, else the
// first found in GOBIN, GOPATH/bin and PATH; it must be the pinned version.
func findApidiff(flagValue string) (string, error) {
	candidates := []string{flagValue}
	if flagValue == "" {
		candidates = nil
		for _, v := range []string{"GOBIN", "GOPATH"} {
			out, err := output(".", "go", "env", v)
			if err != nil {
				return "", err
			}
			if d := strings.TrimSpace(out); d != "" {
				if v == "GOPATH" {
					d = filepath.Join(filepath.SplitList(d)[0], "bin")
				}
				candidates = append(candidates, filepath.Join(d, "apidiff"))
			}
		}
		if p, err := exec.LookPath("apidiff"); err == nil {
			candidates = append(candidates, p)
		}
	}
	var seen []string
	for _, tool := range candidates {
		if !isFile(tool) {
			continue
		}
		out, err := output(".", "go", "version", "-m", tool)
		if err != nil {
			return "", err
		}
		v := moduleVersion(out, "golang.org/x/exp")
		if v == apidiffVersion {
			return tool, nil
		}
		seen = append(seen, tool+" is golang.org/x/exp@"+v)
	}
	found := "not found"
	if len(seen) > 0 {
		found = strings.Join(seen, "; ")
	}
	return "", fmt.Errorf("apidiff at golang.org/x/exp@%s %s: go install golang.org/x/exp/cmd/apidiff@%s", apidiffVersion, found, apidiffVersion)
}

// moduleVersion finds the version of the main module mod in the output of
// go version -m.
func moduleVersion(goVersionM, mod string) string {
	sc := bufio.NewScanner(strings.NewReader(goVersionM))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "mod" && f[1] == mod {
			return f[2]
		}
	}
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// repoRoot is the top of the git work tree this command runs in.
func repoRoot() (string, error) {
	out, err := output(".", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// output runs name in dir, without -mod=mod in GOFLAGS (workspace mode
// refuses it), and returns its standard output; its standard error is in the
// error.
func output(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// cleanEnv is the environment with -mod=mod removed from GOFLAGS.
func cleanEnv() []string {
	env := os.Environ()
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "GOFLAGS="); ok {
			var keep []string
			for _, f := range strings.Fields(v) {
				if f != "-mod=mod" {
					keep = append(keep, f)
				}
			}
			env[i] = "GOFLAGS=" + strings.Join(keep, " ")
		}
	}
	return env
}
