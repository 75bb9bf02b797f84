package wire

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// inMemory takes for a body in memory what net/http does
// (isKnownInMemoryReader): those readers, bare or in io.NopCloser.
func TestInMemory(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	for _, tc := range []struct {
		name string
		r    io.Reader
		want bool
	}{
		{"bytes.Reader", bytes.NewReader(nil), true},
		{"bytes.Buffer", new(bytes.Buffer), true},
		{"strings.Reader", strings.NewReader("x"), true},
		{"NopCloser of bytes.Reader", io.NopCloser(bytes.NewReader(nil)), true},
		{"NopCloser of strings.Reader", io.NopCloser(strings.NewReader("x")), true},
		{"NopCloser of NopCloser", io.NopCloser(io.NopCloser(bytes.NewReader(nil))), true},
		{"NopCloser of nil", io.NopCloser(nil), false},
		{"io.Pipe", pr, false},
		{"NopCloser of io.Pipe", io.NopCloser(pr), false},
		{"MultiReader", io.MultiReader(bytes.NewReader(nil)), false},
		{"file", os.Stdin, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, inMemory(tc.r))
		})
	}
}
