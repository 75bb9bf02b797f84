package idempotency

// Tests of the canonical JSON, the key parser and the bounded store's
// compaction, moved here from fakeserver with them (issue 39).

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.000", "0"}, {"0e10", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1e0", "1"}, {"10e-1", "1"}, {"0.1e1", "1"},
		{"100", "1e2"}, {"1E+2", "1e2"}, {"-1.50", "-15e-1"}, {"0.015", "15e-3"},
		{"123456789012345678901234567890", "12345678901234567890123456789e1"},
		{"1e99999999999999999999", "1e99999999999999999999"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, canonicalNumber(tt.in), tt.in)
	}
}

func TestFingerprintIgnoresFormatting(t *testing.T) {
	fp := func(body string) string {
		b, err := JSONBody(httptest.NewRequest("POST", "/v1/charges", nil), []byte(body))
		require.NoError(t, err)
		return string(b)
	}
	base := fp(`{"amount":100,"meta":{"b":[1,2.0,"x"],"a":null},"ok":true}`)
	tests := []struct {
		body string
		same bool
	}{
		{`{ "ok": true, "meta": {"a": null, "b": [1.0, 2, "x"]}, "amount": 1e2 }`, true},
		{`{"amount":100,"meta":{"b":[2,1,"x"],"a":null},"ok":true}`, false},
		{`{"amount":100,"meta":{"b":[1,2,"y"],"a":null},"ok":true}`, false},
		{`{"amount":"100","meta":{"b":[1,2,"x"],"a":null},"ok":true}`, false},
		{`{"amount":100,"meta":{"b":[1,2,"x"],"a":null},"ok":false}`, false},
		{`{"amount":100,"meta":{"b":[1,2,"x"]},"ok":true}`, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.same, fp(tt.body) == base, tt.body)
	}
	other, err := JSONBody(httptest.NewRequest("POST", "/v1/refunds", nil), []byte(`{"a":1}`))
	require.NoError(t, err)
	assert.NotEqual(t, fp(`{"a":1}`), string(other), "the path is part of the fingerprint")
}

func TestCanonicalStrings(t *testing.T) {
	obj, err := decodeJSON([]byte(`{"s":"a\"b\\c\n\u0001é<>&","\ud83d\ude00":1}`))
	require.NoError(t, err)
	assert.Equal(t, "{\"s\":\"a\\\"b\\\\c\\u000a\\u0001é<>&\",\"😀\":1}", string(canonicalJSON(nil, obj)))
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		vals    []string
		key     string
		present bool
		err     bool
	}{
		{nil, "", false, false},
		{[]string{"abc"}, "abc", true, false},
		{[]string{` "abc" `}, "abc", true, false},
		{[]string{`"a\"b"`}, `a"b`, true, false},
		{[]string{`"a\nb"`}, "", true, true},
		{[]string{"caf\xc3\xa9"}, "", true, true},
		{[]string{""}, "", true, true},
		{[]string{"a", "b"}, "", true, true},
		{[]string{"a, b"}, "", true, true},     // two lines merged by a proxy (RFC 9110 §5.3)
		{[]string{`"a", "b"`}, "", true, true}, // the same, quoted
		{[]string{`"a, b"`}, "a, b", true, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.vals {
			h.Add("Idempotency-Key", v)
		}
		key, present, err := parseKey(h, "Idempotency-Key")
		assert.Equal(t, tt.key, key, tt.vals)
		assert.Equal(t, tt.present, present, tt.vals)
		assert.Equal(t, tt.err, err != nil, tt.vals)
	}
}

func TestMemoryStoreCompactsStaleEntries(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore(MaxRecords(100))
	now := time.Unix(0, 0)
	for i := range 10_000 {
		b, err := m.Begin(ctx, Scope{Key: strconv.Itoa(i)}, Fingerprint{}, now, now.Add(time.Hour))
		require.NoError(t, err)
		require.NoError(t, b.Claim.Release(ctx)) // a transient failure: nothing is kept
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Empty(t, m.recs)
	assert.Less(t, len(m.fifo)-m.head, 2000, "stale fifo entries are compacted")
}
