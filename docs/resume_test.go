package docs_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResumeTable: every row of docs/resume.md's table names a test case of
// the root's resume tests (name: "…" of a table) or, in parentheses, a
// test function, so that each claim of the table is one a test checks.
func TestResumeTable(t *testing.T) {
	md := read(t, "docs/resume.md")
	tests := read(t, "resume_test.go") + read(t, "resume_internal_test.go") + read(t, "eventstream_test.go")
	rows := table(t, md, "| the answer, or the resume's answer |")
	require.GreaterOrEqual(t, len(rows), 20)
	rows = append(rows, table(t, md, "| the stream |")...)
	for _, r := range rows {
		require.Len(t, r, 4, "%q", r)
		c := r[3]
		if fn, ok := strings.CutPrefix(c, "("); ok {
			assert.True(t, strings.Contains(tests, "func "+strings.TrimSuffix(fn, ")")+"("), "row %q: no %s", r[0], fn)
			continue
		}
		assert.True(t, strings.Contains(tests, `name: "`+c+`"`), "row %q: no case %q", r[0], c)
	}
}
