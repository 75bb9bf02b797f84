package fakeserver

import (
	"net/http"
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
	fp := func(body string) [32]byte {
		obj, err := decodeObject([]byte(body))
		require.NoError(t, err)
		return fingerprint("POST", "/v1/charges", canonicalJSON(nil, obj))
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
	obj, _ := decodeObject([]byte(`{"a":1}`))
	assert.NotEqual(t, fingerprint("POST", "/v1/charges", canonicalJSON(nil, obj)),
		fingerprint("POST", "/v1/refunds", canonicalJSON(nil, obj)), "the path is part of the fingerprint")
}

func TestCanonicalStrings(t *testing.T) {
	obj, err := decodeObject([]byte(`{"s":"a\"b\\c\n\u0001é<>&","\ud83d\ude00":1}`))
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
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.vals {
			h.Add("Idempotency-Key", v)
		}
		key, present, err := parseKey(h)
		assert.Equal(t, tt.key, key, tt.vals)
		assert.Equal(t, tt.present, present, tt.vals)
		assert.Equal(t, tt.err, err != nil, tt.vals)
	}
}

func TestTableNeverEvictsInProgress(t *testing.T) {
	tb := newTable()
	now := time.Unix(0, 0)
	a := scope{key: "a"}
	ra, c, _ := tb.begin(a, [32]byte{1}, now, time.Hour, 1)
	require.Equal(t, claimed, c)
	// The table is full of an in-progress record: b is still admitted, a kept.
	_, c, _ = tb.begin(scope{key: "b"}, [32]byte{2}, now, time.Hour, 1)
	require.Equal(t, claimed, c)
	_, c, _ = tb.begin(a, [32]byte{1}, now, time.Hour, 1)
	assert.Equal(t, inProgress, c)

	tb.complete(a, ra, &response{status: 201})
	_, c, _ = tb.begin(scope{key: "c"}, [32]byte{3}, now, time.Hour, 2)
	require.Equal(t, claimed, c)
	_, c, _ = tb.begin(a, [32]byte{1}, now, time.Hour, 3)
	assert.Equal(t, claimed, c, "the completed record was evicted first")
}

func TestTableCompactsStaleEntries(t *testing.T) {
	tb := newTable()
	now := time.Unix(0, 0)
	for i := range 10_000 {
		s := scope{key: string(rune(i))}
		r, _, _ := tb.begin(s, [32]byte{}, now, time.Hour, 100)
		tb.release(s, r) // a transient failure: nothing is kept
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	assert.Empty(t, tb.recs)
	assert.Less(t, len(tb.fifo)-tb.head, 2000, "stale fifo entries are compacted")
}

func TestIDPrefix(t *testing.T) {
	for in, want := range map[string]string{"refunds": "rf", "charges": "ch", "orders": "or", "a": "a", "ae": "ae", "x1": "x1"} {
		assert.Equal(t, want, idPrefix(in), in)
	}
}
