package postgres_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeSnippetsAreExamples: every Go block of README.md is a run of
// lines of example_test.go (indentation aside), so the README shows code
// the test command runs.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	examples, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	src := "\n" + strings.Join(trimLines(string(examples)), "\n") + "\n"
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.GreaterOrEqual(t, len(blocks), 5, "the README's Go blocks")
	for _, b := range blocks {
		block := "\n" + strings.Join(trimLines(b[1]), "\n") + "\n"
		assert.Contains(t, src, block, "a README snippet that is not in example_test.go")
	}
}

// trimLines returns the lines of s without leading and trailing space, and
// without empty lines.
func trimLines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
