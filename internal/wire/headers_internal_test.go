package wire

import (
	"fmt"
	"net/http"
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

// keyFieldLookup is keyField as it was before checkHeader found the key
// field itself: the canonical name looked up, else the other spelling the
// scan found. The reference for TestKeyFieldFromTheScan.
func keyFieldLookup(h http.Header, canonical, alt string) (string, []string) {
	if vs, ok := h[canonical]; ok {
		return canonical, vs
	}
	if alt != "" {
		return alt, h[alt]
	}
	return "", nil
}

// TestKeyFieldFromTheScan: the key field found from checkRequest's scan is
// the one a lookup of the canonical name, then of another spelling, finds:
// the canonical spelling wins whatever the map's order, an empty canonical
// field included. A header without a spelling of the key header is not
// looked up at all.
func TestKeyFieldFromTheScan(t *testing.T) {
	const canonical = "Idempotency-Key"
	for _, tc := range []struct {
		name   string
		header http.Header
		want   string   // the map key found, "" if none
		values []string // its values
	}{
		{"empty", http.Header{}, "", nil},
		{"none", http.Header{"Content-Type": {"a"}, "Idempotency-Kez": {"x"}}, "", nil},
		{"canonical", http.Header{"Content-Type": {"a"}, canonical: {"k1"}}, canonical, []string{"k1"}},
		{"lower case", http.Header{"idempotency-key": {"k2"}}, "idempotency-key", []string{"k2"}},
		{"both", http.Header{"idempotency-key": {"k2"}, canonical: {"k1"}, "IDEMPOTENCY-KEY": {"k3"}, "A": {"b"}}, canonical, []string{"k1"}},
		{"empty canonical", http.Header{"idempotency-key": {"k2"}, canonical: {}}, canonical, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Map order varies from one range to the next: scan often.
			for range 50 {
				hs, err := checkHeader(tc.header, canonical, defaultAttemptHeader)
				require.NoError(t, err)
				name, vs := KeyField(tc.header, canonical, hs.Alt)
				refName, refVs := keyFieldLookup(tc.header, canonical, hs.Alt)
				require.Equal(t, tc.want, name)
				require.Equal(t, tc.values, vs)
				require.Equal(t, refName, name)
				require.Equal(t, refVs, vs)
			}
		})
	}
}

// TestValidMethod: the common methods pass without a look at each byte;
// any other method is valid when it is a token.
func TestValidMethod(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PROPFIND", "get", "M-SEARCH"} {
		_, known := methodBit(m)
		require.True(t, validMethod(m, known), m)
	}
	for _, m := range []string{"GE T", "GET\n", "PO(ST", "\x00", "ÉTÉ", ""} {
		_, known := methodBit(m)
		require.False(t, validMethod(m, known), "%q", m)
	}
}

// TestValidFieldName: the names known without a look at each byte are
// tokens, and any other name is valid exactly when it is one.
func TestValidFieldName(t *testing.T) {
	for _, n := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control", "Connection",
		"Content-Length", "Content-Type", "Cookie", "Idempotency-Key", "Traceparent", "User-Agent", "X-Custom", "content-type", "a"} {
		require.True(t, isToken(n), n)
		require.True(t, validFieldName(n), n)
	}
	for _, n := range []string{"", "Content Type", "Content-Type:", "Accept\r\n", "Ünicode", "(x)"} {
		require.False(t, validFieldName(n), "%q", n)
	}
}

// TestCheckHeaderSmallHeaderByLookups: a small header of common fields,
// scanned by lookups instead of a range, gives what a scan of every field
// gives: the same scan, or an error for the same field. Key and attempt
// headers named as the common fields are noted as in any other field.
func TestCheckHeaderSmallHeaderByLookups(t *testing.T) {
	spare := make([]string, 1, 2)
	spare[0] = "application/json"
	for _, tc := range []struct {
		name               string
		header             http.Header
		keyHeader, attempt string
		wantErr            string // "" for none
	}{
		{"content type", http.Header{"Content-Type": {"application/json"}}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"both", http.Header{"Content-Type": {"a"}, "Authorization": {"Bearer x"}}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"spare capacity", http.Header{"Content-Type": spare}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"no values", http.Header{"Content-Type": nil}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"bad value", http.Header{"Content-Type": {"a\nb"}}, "Idempotency-Key", defaultAttemptHeader, `invalid value for header field "Content-Type"`},
		{"bad second value", http.Header{"Content-Type": {"a"}, "Authorization": {"ok", "x\x7f"}}, "Idempotency-Key", defaultAttemptHeader, `invalid value for header field "Authorization"`},
		{"key header named so", http.Header{"Content-Type": {"k"}}, "Content-Type", defaultAttemptHeader, ""},
		{"attempt header named so", http.Header{"Authorization": {"2"}, "Content-Type": {"a"}}, "Idempotency-Key", "Authorization", ""},
		{"other field", http.Header{"Content-Type": {"a"}, "X-Trace": {"b"}}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"other first", http.Header{"Authorization": {"a"}}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"other spelling", http.Header{"content-type": {"a"}}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"mark", http.Header{"Content-Type": {"a"}, "X-Stainless-Retry-Count": {"1"}}, "Idempotency-Key", defaultAttemptHeader, ""},
		{"bad name", http.Header{"Content-Type": {"a"}, "Bad Name": {"b"}}, "Idempotency-Key", defaultAttemptHeader, `invalid header field name "Bad Name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs, err := checkHeader(tc.header, tc.keyHeader, tc.attempt)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			want := HeaderScan{Clipped: true}
			for name, values := range tc.header {
				require.NoError(t, want.field(name, values, tc.keyHeader, tc.attempt))
			}
			require.Equal(t, want, hs)
			switch tc.name {
			case "key header named so":
				require.Equal(t, "Content-Type", hs.Alt)
			case "attempt header named so":
				require.True(t, hs.AttemptSet)
			case "spare capacity":
				require.False(t, hs.Clipped)
			case "mark":
				require.True(t, hs.Marked)
			case "content type", "both":
				require.Equal(t, HeaderScan{Clipped: true}, hs)
			}
		})
	}
}

// defaultAttemptHeader is the root's DefaultAttemptHeader.
const defaultAttemptHeader = "Retry-Attempt"
