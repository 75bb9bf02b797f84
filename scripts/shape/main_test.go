package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunLimits writes a package into a temporary directory and checks
// which limits it exceeds.
func TestRunLimits(t *testing.T) {
	files := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("f%02d.go", i)] = fmt.Sprintf("package p\n\n// F%d does nothing.\nfunc F%d() {}\n", i, i)
		}
		return m
	}
	with := func(m map[string]string, name, body string) map[string]string {
		m[name] = body
		return m
	}
	long := "package p\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 60) + "}\n"
	tests := []struct {
		name   string
		files  map[string]string
		status int
		lines  []string
	}{
		{"20 files", files(20), 0, []string{"files (non-test .go): 20 (limit 20)"}},
		{"21 files", files(21), 1, []string{"files (non-test .go): 21 (limit 20)"}},
		{"tests are not counted", with(files(20), "f_test.go", "package p\n"), 0, []string{"files (non-test .go): 20 (limit 20)"}},
		{"a long function", with(files(1), "long.go", long), 1, []string{"files (non-test .go): 2 (limit 20)", "functions over 60 lines: 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
			var stdout, stderr bytes.Buffer
			status := run([]string{dir}, &stdout, &stderr)
			assert.Equal(t, tt.status, status, "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
			for _, l := range tt.lines {
				assert.Contains(t, stdout.String(), l+"\n")
			}
		})
	}
}
