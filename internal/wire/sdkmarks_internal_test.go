package wire

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReadMark(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   Mark
		ok     bool
	}{
		{"none", http.Header{"Content-Type": {"application/json"}}, Mark{}, false},
		{"stainless first", http.Header{"X-Stainless-Retry-Count": {"0"}}, Mark{Count: 0, Respond: true}, true},
		{"stainless retry", http.Header{"X-Stainless-Retry-Count": {" 2 "}}, Mark{Count: 2, Respond: true}, true},
		{"stainless lower case", http.Header{"x-stainless-retry-count": {"1"}}, Mark{Count: 1, Respond: true}, true},
		{"stainless malformed", http.Header{"X-Stainless-Retry-Count": {"x"}}, Mark{}, false},
		{"stainless negative", http.Header{"X-Stainless-Retry-Count": {"-1"}}, Mark{}, false},
		{"aws", http.Header{"Amz-Sdk-Request": {"attempt=3; max=4"}, "Amz-Sdk-Invocation-Id": {"8f2c4d0e-1b7a-4c55-9a0b-3c8e4f1a2b3c"}},
			Mark{Count: 2, max: 4, Id: "8f2c4d0e-1b7a-4c55-9a0b-3c8e4f1a2b3c"}, true},
		{"aws with ttl", http.Header{"Amz-Sdk-Request": {"ttl=20260101T000000Z; attempt=1; max=1"}}, Mark{Count: 0, max: 1}, true},
		{"aws without attempt", http.Header{"Amz-Sdk-Request": {"max=3"}}, Mark{}, false},
		{"aws id alone", http.Header{"Amz-Sdk-Invocation-Id": {"abc"}}, Mark{}, false},
		{"google", http.Header{"X-Goog-Api-Client": {"gl-go/1.22 gccl/1.40.0 gccl-invocation-id/0b8e gccl-attempt-count/2"}},
			Mark{Count: 1, Id: "0b8e"}, true},
		{"google without id", http.Header{"X-Goog-Api-Client": {"gl-go/1.22 gccl/1.40.0"}}, Mark{}, false},
		{"stripe-go", http.Header{"X-Stripe-Client-User-Agent": {`{"bindings_version":"85.0.0"}`}}, Mark{Count: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := ReadMark(tt.header)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, m)
			marked := false
			for name := range tt.header {
				marked = marked || markField(name)
			}
			assert.Equal(t, tt.name != "none", marked, "checkHeader's look at the field names")
		})
	}
}

func TestMarkWillRetry(t *testing.T) {
	assert.True(t, Mark{Count: 0}.WillRetry(), "a Stainless first attempt: the SDK retries unless told not to")
	assert.True(t, Mark{Count: 2}.WillRetry())
	assert.True(t, Mark{Count: 0, max: 4}.WillRetry())
	assert.False(t, Mark{Count: 0, max: 1}.WillRetry(), "AWS says it sends one attempt")
	assert.False(t, Mark{Count: -1}.WillRetry(), "stripe-go: its repeated key says")
}

func TestMarkField(t *testing.T) {
	for _, name := range []string{"Accept-Encoding", "Content-Type", "", "X-Stainless-Retry-Countx", "Authorization", "Amz-Sdk-Requesx"} {
		assert.False(t, markField(name), name)
	}
	for _, name := range []string{"X-Stainless-Retry-Count", "amz-sdk-request", "AMZ-SDK-INVOCATION-ID", "X-Goog-Api-Client", "X-Stripe-Client-User-Agent"} {
		assert.True(t, markField(name), name)
	}
}
