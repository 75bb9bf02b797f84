package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reference is the canonical JSON as the decoding path computes it:
// encoding/json's decoder, then canonicalJSON.
func reference(body []byte) ([]byte, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(nil, v), nil
}

var canonicalSeeds = []string{
	`{"amount": 1000, "currency": "eur", "customer": "cus_123"}`,
	`{"b":1,"a":2,"b":3}`,
	`{"a":{"z":1,"y":[{"d":0,"c":-0.0}]},"a":{"x":true}}`,
	`{"s":"a\"b\\c\/\u2028\n\t\u0001é<>&","\ud83d\ude00":1,"\ud800":2,"\udc00\ud800x":3}`,
	`[1, 1.0, 10e-1, 1e0, 0.0001e4, -12.500e-3, 0e10, -0, 123456789012345678901234567890, 1e-400, 1E400, 1e999999999999999999999]`,
	"\"bad \xff utf8 \xc3\"",
	`  {"x" : null , "y":[ ] , "z":{ } }  `,
	`{"a":1,}`, `[1,]`, `{"a" 1}`, `01`, `-`, `1.`, `1e`, `.5`, `"\x"`, `"\u12"`, `nul`, `truex`, `1 2`, ``, ` `,
	"\"a\x01\"", `{"a":1}x`, `[`, `{`, `"`, `{"\ud800\u0041":1}`, `"\ud800\uzzzz"`,
}

// TestCanonicalMatchesTheDecoder: the one-pass canonicaliser writes what
// the decoding path writes, and fails where it fails.
func TestCanonicalMatchesTheDecoder(t *testing.T) {
	// Unsorted objects nested deep, around a long string: the one pass
	// would move the string once per level; it decodes instead.
	deep := strings.Repeat(`{"b":`, 2000) + `"` + strings.Repeat("x", 100<<10) + `"` + strings.Repeat(`,"a":0}`, 2000)
	for _, s := range append(canonicalSeeds, strings.Repeat("[", maxDepth)+strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1)+strings.Repeat("]", maxDepth+1), deep, deep+"x") {
		want, werr := reference([]byte(s))
		got, err := appendCanonical([]byte("prefix"), []byte(s))
		if werr != nil {
			assert.Error(t, err, "%.80q", s)
			assert.Equal(t, "prefix", string(got), "dst is kept")
			continue
		}
		require.NoError(t, err, "%.80q", s)
		assert.Equal(t, "prefix"+string(want), string(got), "%.80q", s)
	}
}

// FuzzCanonical: on any input the one-pass canonicaliser equals the
// decoding path: the same bytes for valid JSON, an error for invalid.
func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := reference(body)
		got, err := appendCanonical(nil, body)
		if (werr != nil) != (err != nil) {
			t.Fatalf("%q: decoder error %v, canonicaliser error %v", body, werr, err)
		}
		if string(got) != string(want) {
			t.Fatalf("%q:\n got %q\nwant %q", body, got, want)
		}
	})
}

// TestCanonicalAllocatesNothing: once its scratch space has grown, the
// canonicaliser allocates nothing (appendCanonical reuses it through a
// sync.Pool).
func TestCanonicalAllocatesNothing(t *testing.T) {
	body := []byte(`{"amount": 1000, "currency": "eur", "customer": "cus_123", "meta": {"b": [1, 2.50], "a": "x"}}`)
	dst := make([]byte, 0, 256)
	var c canonicalizer
	_, _ = c.canonical(dst, body) // grow the scratch space once
	allocs := testing.AllocsPerRun(100, func() { _, _ = c.canonical(dst[:0], body) })
	assert.Zero(t, allocs)
}

// TestCanonicalMovesBoundedBytes: a document of unsorted objects nested
// deep is canonicalised by decoding, never by moving its members once per
// level (quadratic).
func TestCanonicalMovesBoundedBytes(t *testing.T) {
	deep := []byte(strings.Repeat(`{"b":`, 2000) + `"` + strings.Repeat("x", 100<<10) + `"` + strings.Repeat(`,"a":0}`, 2000))
	var c canonicalizer
	c.in = deep
	_, ok := c.value(nil)
	assert.False(t, ok, "the one pass gives up")
	assert.True(t, c.slow)
	assert.LessOrEqual(t, c.moved, maxMoved(len(deep))+len(deep), "it stopped at the bound")
}
