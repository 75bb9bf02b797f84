package resilient

import (
	"strings"
	"testing"
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
