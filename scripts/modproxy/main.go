// Command modproxy writes Go modules from directories of this repository into
// a directory laid out as a module proxy, so that the go command can resolve
// them with GOPROXY=file://DIR before they are published:
//
//	DIR/<module path>/@v/list            one version per line
//	DIR/<module path>/@v/<version>.info  {"Version": …, "Time": …}
//	DIR/<module path>/@v/<version>.mod   the module's go.mod
//	DIR/<module path>/@v/<version>.zip   the module zip (golang.org/x/mod/zip)
//
// Usage:
//
//	modproxy -out DIR MODDIR@VERSION...
//
// Each argument names a module by its directory (the module path is read from
// its go.mod) and the version to publish it as. The zip holds what the go
// command would fetch for a tag of that version: the directory's files,
// without nested modules, vendor directories or VCS metadata. Paths in the
// proxy are case-encoded as the protocol requires.
//
// scripts/consumer-build uses it to build consumers of the published modules;
// scripts/tidy uses it to tidy sub-modules that require an unpublished version
// of the root module.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "proxy `directory` to write (created if missing; other modules in it are kept)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modproxy -out DIR MODDIR@VERSION...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, arg := range flag.Args() {
		dir, version, ok := strings.Cut(arg, "@")
		if !ok {
			fmt.Fprintf(os.Stderr, "modproxy: %q: want MODDIR@VERSION\n", arg)
			os.Exit(2)
		}
		path, err := add(*out, dir, version, time.Now().UTC())
		if err != nil {
			fmt.Fprintln(os.Stderr, "modproxy:", err)
			os.Exit(1)
		}
		fmt.Printf("%s@%s\n", path, version)
	}
}

// add writes the module in dir, as version, into the proxy directory out and
// returns its module path.
func add(out, dir, version string, now time.Time) (string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return "", fmt.Errorf("%s: %q is not a canonical semantic version", dir, version)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", fmt.Errorf("%s/go.mod: no module path", dir)
	}
	m := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return "", err
	}
	escPath, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(vdir, escVersion)

	zf, err := os.Create(base + ".zip")
	if err != nil {
		return "", err
	}
	if err := zip.CreateFromDir(zf, m, dir); err != nil {
		zf.Close()
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	if err := zf.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, now})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return "", err
	}
	return path, addToList(filepath.Join(vdir, "list"), version)
}

// addToList adds version to the list file, once, sorted by semver.
func addToList(list, version string) error {
	data, err := os.ReadFile(list)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(list, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
