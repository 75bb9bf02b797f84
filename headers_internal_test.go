package resilient

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIsTokenIsRFC9110 checks the token table byte by byte against RFC 9110's
// tchar: ALPHA, DIGIT and !#$%&'*+-.^_`|~.
func TestIsTokenIsRFC9110(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c < 128 && strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c))
		if got := isToken(string([]byte{byte(c)})); got != want {
			t.Errorf("isToken(%q) = %v, want %v", rune(c), got, want)
		}
	}
	if isToken("") {
		t.Error(`isToken("") = true`)
	}
}

// validFieldValueLoop is validFieldValue a byte at a time: the reference.
func validFieldValueLoop(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// TestValidFieldValue: every byte value at every position of values of
// every length up to 24, among allowed bytes (printable ASCII, HTAB, and
// bytes from 0x80), gives the byte loop's answer.
func TestValidFieldValue(t *testing.T) {
	fill := []byte("Bearer eyJhbGciOi\t\x80\xff~ zZ09")
	for n := range 25 {
		base := []byte(strings.Repeat(string(fill), 2)[:n])
		require.True(t, validFieldValue(string(base)), "%q", base)
		for pos := range n {
			for c := range 256 {
				v := slices.Clone(base)
				v[pos] = byte(c)
				if got, want := validFieldValue(string(v)), validFieldValueLoop(string(v)); got != want {
					t.Fatalf("validFieldValue(%q) = %v, want %v", v, got, want)
				}
			}
		}
	}
}

// BenchmarkValidFieldValue: a JSON content type and a bearer token, with
// validFieldValue and with a loop over the bytes.
func BenchmarkValidFieldValue(b *testing.B) {
	for _, v := range []string{"application/json", "Bearer " + strings.Repeat("eyJhbGciOiJSUzI1NiJ9", 40)} {
		b.Run(fmt.Sprintf("%d/words", len(v)), func(b *testing.B) {
			for b.Loop() {
				validFieldValue(v)
			}
		})
		b.Run(fmt.Sprintf("%d/bytes", len(v)), func(b *testing.B) {
			for b.Loop() {
				validFieldValueLoop(v)
			}
		})
	}
}
