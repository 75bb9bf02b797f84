package wire

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Only a precondition that a request applied once fails when sent again
// is evidence: strong entity tags in If-Match, or If-None-Match: *.
func TestGuarded(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want bool
	}{
		{"none", http.Header{}, false},
		{"nil", nil, false},
		{"If-Match strong", http.Header{"If-Match": {`"v7"`}}, true},
		{"If-Match strong list", http.Header{"If-Match": {`"a", "b"`}}, true},
		{"If-Match strong list over lines", http.Header{"If-Match": {`"a"`, ` "b" `}}, true},
		{"If-Match tag holding a comma", http.Header{"If-Match": {`"a,b"`}}, true},
		{"If-Match empty tag", http.Header{"If-Match": {`""`}}, true},
		{"If-Match star", http.Header{"If-Match": {"*"}}, false},
		{"If-Match star and a tag", http.Header{"If-Match": {`*, "a"`}}, false},
		{"If-Match weak", http.Header{"If-Match": {`W/"v7"`}}, false},
		{"If-Match weak among strong", http.Header{"If-Match": {`"a", W/"b"`}}, false},
		{"If-Match unquoted", http.Header{"If-Match": {`v7`}}, false},
		{"If-Match unterminated", http.Header{"If-Match": {`"v7`}}, false},
		{"If-Match junk after a tag", http.Header{"If-Match": {`"v7"x`}}, false},
		{"If-Match blank", http.Header{"If-Match": {" , "}}, false},
		{"If-None-Match star", http.Header{"If-None-Match": {"*"}}, true},
		{"If-None-Match star with spaces", http.Header{"If-None-Match": {" * "}}, true},
		{"If-None-Match tag", http.Header{"If-None-Match": {`"v7"`}}, false},
		{"If-None-Match star over two lines", http.Header{"If-None-Match": {"*", "*"}}, false},
		{"If-Unmodified-Since", http.Header{"If-Unmodified-Since": {"Sun, 29 Nov 2026 05:00:00 GMT"}}, false},
		{"If-Match star, If-None-Match star", http.Header{"If-Match": {"*"}, "If-None-Match": {"*"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Guarded(tc.h))
		})
	}
}

// A 412 stands for an unknown outcome only after an attempt that may have
// been applied, of a method that applies something.
func TestPreconditionUnknown(t *testing.T) {
	r412 := &http.Response{StatusCode: http.StatusPreconditionFailed}
	for _, m := range []string{"PATCH", "POST", "PUT", "DELETE", "PROPPATCH"} {
		assert.True(t, PreconditionUnknown(m, r412, true), m)
	}
	for _, m := range []string{"GET", "HEAD", "OPTIONS", "TRACE", ""} {
		assert.False(t, PreconditionUnknown(m, r412, true), "%q applies nothing", m)
	}
	assert.False(t, PreconditionUnknown("PATCH", r412, false), "a first attempt's 412 is the server's plain answer")
	assert.False(t, PreconditionUnknown("PATCH", &http.Response{StatusCode: http.StatusConflict}, true))
	assert.False(t, PreconditionUnknown("PATCH", nil, true))
}
