package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPublished(t *testing.T) {
	tests := []struct {
		path, name string
		want       bool
	}{
		{modulePath, "resilient", true},
		{modulePath + "/persist/bolt", "bolt", true},
		{modulePath + "/persist/postgres/pgtest", "pgtest", true},
		{modulePath + "/internal/clock", "clock", false},
		{modulePath + "/idempotency/internal/x", "x", false},
		{modulePath + "/fakeserver/cmd/fakeserver", "main", false},
		{modulePath + "/bench/storm", "storm", false},
		{modulePath + "/e2e/sdk", "sdk", false},
		{modulePath + "/examples/orders", "orders", false},
		{modulePath + "/scripts/shape", "shape", false},
		{modulePath + "/sim", "sim", false},
		{modulePath + "x/y", "y", false},
		{"example.com/other", "other", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, published(tt.path, tt.name))
		})
	}
}

func TestFileNameRoundTrip(t *testing.T) {
	tests := []struct{ path, file string }{
		{modulePath, "resilient"},
		{modulePath + "/pushback", "pushback"},
		{modulePath + "/persist/postgres/pgtest", "persist.postgres.pgtest"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			assert.Equal(t, tt.file, fileName(tt.path))
			assert.Equal(t, tt.path, importPath(tt.file))
		})
	}
}

func TestModuleVersion(t *testing.T) {
	out := "/bin/apidiff: go1.26.8\n\tpath\tgolang.org/x/exp/cmd/apidiff\n\tmod\tgolang.org/x/exp\tv0.0.0-1\th1:x=\n\tdep\tgolang.org/x/mod\tv0.42.0\n"
	assert.Equal(t, "v0.0.0-1", moduleVersion(out, "golang.org/x/exp"))
	assert.Equal(t, "", moduleVersion(out, "golang.org/x/tools"))
}

// TestPinMatchesTestCommand: scripts/test installs the version this command
// requires.
func TestPinMatchesTestCommand(t *testing.T) {
	b, err := os.ReadFile("../test")
	require.NoError(t, err)
	m := regexp.MustCompile(`golang\.org/x/exp/cmd/apidiff@\$\{?(\w+)\}?`).FindSubmatch(b)
	require.NotNil(t, m, "scripts/test installs apidiff")
	v := regexp.MustCompile(string(m[1]) + `="([^"]+)"`).FindSubmatch(b)
	require.NotNil(t, v, "scripts/test sets %s", m[1])
	assert.Equal(t, apidiffVersion, string(v[1]))
}

// TestCheck writes a baseline of a small module, then checks versions of it:
// an added function passes, a renamed or removed one, a changed signature,
// an exported type turned into an alias of an internal one, and a removed
// package fail.
func TestCheck(t *testing.T) {
	tool, err := findApidiff("")
	require.NoError(t, err, "scripts/test installs the pinned apidiff")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "-mod=mod")

	v1 := map[string]string{
		"a.go":             "package resilient\n\n// Decision is one.\ntype Decision struct{ Retry bool }\n\n// Do does.\nfunc Do(d Decision) int { return helper() }\n\nfunc helper() int { return 1 }\n",
		"sub/sub.go":       "package sub\n\n// Sub is one.\nfunc Sub() {}\n",
		"internal/x/x.go":  "package x\n\n// Decision is one.\ntype Decision struct{ Retry bool }\n",
		"cmd/tool/main.go": "package main\n\nfunc main() {}\n",
	}
	tests := []struct {
		name    string
		edit    map[string]string // file -> new content; "" removes it
		status  int
		reports []string
	}{
		{"unchanged", nil, 0, nil},
		{"added and unexported changes", map[string]string{
			"a.go": "package resilient\n\n// Decision is one.\ntype Decision struct{ Retry bool }\n\n// Do does.\nfunc Do(d Decision) int { return other() }\n\n// New is new.\nfunc New() {}\n\nfunc other() int { return 2 }\n",
		}, 0, nil},
		{"renamed", map[string]string{
			"a.go": "package resilient\n\n// Decision is one.\ntype Decision struct{ Retry bool }\n\n// Does does.\nfunc Does(d Decision) int { return 1 }\n",
		}, 1, []string{"INCOMPATIBLE " + modulePath + ":", "Do: removed"}},
		{"signature", map[string]string{
			"a.go": "package resilient\n\n// Decision is one.\ntype Decision struct{ Retry bool }\n\n// Do does.\nfunc Do(d Decision, n int) int { return n }\n",
		}, 1, []string{"Do: changed from func(Decision) int to func(Decision, int) int"}},
		{"alias of an internal type", map[string]string{
			"a.go": "package resilient\n\nimport \"" + modulePath + "/internal/x\"\n\n// Decision is one.\ntype Decision = x.Decision\n\n// Do does.\nfunc Do(d Decision) int { return 1 }\n",
		}, 1, []string{"Decision: changed from Decision to " + modulePath + "/internal/x.Decision"}},
		{"package removed", map[string]string{"sub/sub.go": ""}, 1, []string{"INCOMPATIBLE " + modulePath + "/sub: the package is gone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, v1)
			base := filepath.Join(t.TempDir(), "baseline")
			require.NoError(t, os.MkdirAll(base, 0o755))
			for _, pkg := range []string{modulePath, modulePath + "/sub"} {
				_, err := apidiff(tool, root, "-w", filepath.Join(base, fileName(pkg)+".export"), pkg)
				require.NoError(t, err)
			}
			require.NoError(t, os.WriteFile(filepath.Join(base, "VERSION"), []byte("apidiff golang.org/x/exp@"+apidiffVersion+"\n"), 0o644))
			writeTree(t, root, tt.edit)

			var stdout, stderr bytes.Buffer
			status := check(root, base, tool, false, &stdout, &stderr)
			assert.Equal(t, tt.status, status, "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
			for _, r := range tt.reports {
				assert.Contains(t, stdout.String(), r)
			}
			assert.Contains(t, stdout.String(), "published packages checked against "+baselineRev+": 2")
		})
	}
}

// TestCheckRefusesAnotherVersion: a baseline written by another apidiff is
// not read.
func TestCheckRefusesAnotherVersion(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(base, "VERSION"), []byte("apidiff golang.org/x/exp@v0.0.0-other\n"), 0o644))
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, check(t.TempDir(), base, "apidiff", false, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "was not written by apidiff golang.org/x/exp@"+apidiffVersion)
}

// TestBaselineIsCurrentVersion: the committed baseline was written by the
// pinned apidiff and covers the root package.
func TestBaselineIsCurrentVersion(t *testing.T) {
	require.NoError(t, checkVersionFile("baseline"))
	_, err := os.Stat(filepath.Join("baseline", "resilient.export"))
	require.NoError(t, err)
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26\n"), 0o644))
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if body == "" {
			require.NoError(t, os.Remove(p))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}
