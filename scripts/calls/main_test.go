package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRun(t *testing.T) {
	td := func(d string) string { return filepath.Join("testdata", d) }
	tests := []struct {
		name    string
		args    []string
		status  int
		reports []string
		absent  []string
	}{
		{"one way", []string{td("oneway")}, 0,
			[]string{"pairs: 1, calling both ways: 0"}, []string{"both ways: a.go", "FAIL"}},
		{"both ways", []string{td("bothways")}, 1,
			[]string{"both ways: a.go             -> b.go               1, back   2", "pairs: 2, calling both ways: 1", "FAIL"}, nil},
		{"a method promoted from an embedded field belongs to its declaring file", []string{td("embedded")}, 1,
			[]string{"both ways: a.go             -> b.go               1, back   2"}, nil},
		{"a method value is a use", []string{td("methodvalue")}, 1,
			[]string{"both ways: a.go             -> b.go               1, back   1"}, nil},
		{"an instance of a function with two type parameters", []string{td("generic")}, 1,
			[]string{"both ways: a.go             -> b.go               1, back   1"}, nil},
		{"-files keeps the pairs among them", []string{"-files", "a.go", td("bothways")}, 0,
			[]string{"pairs: 0, calling both ways: 0"}, nil},
		{"-all lists every pair", []string{"-all", td("oneway")}, 0,
			[]string{"a.go             -> b.go               1"}, nil},
		{"-chains lists chains and passes", []string{"-chains", td("bothways")}, 0,
			[]string{"chains of three field selections or more: 0"}, nil},
		{"each of several packages", []string{td("oneway"), td("bothways")}, 1,
			[]string{"== " + td("oneway"), "== " + td("bothways"), "FAIL: pairs of files that call both ways (" + td("bothways") + ": 1)"}, nil},
		{"a directory without Go files", []string{td("none")}, 2, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(tt.args, &stdout, &stderr)
			assert.Equal(t, tt.status, status, "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
			for _, r := range tt.reports {
				assert.Contains(t, stdout.String(), r)
			}
			for _, r := range tt.absent {
				assert.NotContains(t, stdout.String(), r)
			}
		})
	}
}

// TestRunRootAndInternal: with no directory it checks the root and each
// package under internal/, testdata left out, and fails on the internal
// package whose files call both ways.
func TestRunRootAndInternal(t *testing.T) {
	t.Chdir(filepath.Join("testdata", "tree"))
	var stdout, stderr bytes.Buffer
	status := run(nil, &stdout, &stderr)
	out := stdout.String()
	assert.Equal(t, 1, status, "stdout:\n%s\nstderr:\n%s", out, &stderr)
	assert.Contains(t, out, "== .\npairs: 0, calling both ways: 0")
	assert.Contains(t, out, "== "+filepath.Join("internal", "x")+"\nboth ways: a.go             -> b.go               1, back   1")
	assert.Contains(t, out, "== "+filepath.Join("internal", "y", "z")+"\npairs: 1, calling both ways: 0")
	assert.NotContains(t, out, "testdata")
	assert.Contains(t, out, "FAIL: pairs of files that call both ways ("+filepath.Join("internal", "x")+": 1)")
}
