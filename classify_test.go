package resilient_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func outcome(method string, keyed bool, resp *http.Response, err error) resilient.Outcome {
	req, _ := http.NewRequest(method, target, nil)
	if resp != nil {
		resp.Request = req
	}
	return resilient.Outcome{Request: req, Response: resp, Err: err, Keyed: keyed, Now: time.Unix(1_700_000_000, 0)}
}

func response(code int, body string, headers ...string) *http.Response {
	resp, _ := replyBody(code, body, headers...)(nil)
	return resp
}

func TestDefaultClassifierStatuses(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		body     string
		headers  []string
		keyed    bool
		action   resilient.Action
		category resilient.Category
		delay    time.Duration
		replayed bool
	}{
		{"201", 201, "", nil, true, resilient.Success, "", 0, false},
		{"replayed IETF", 201, "", []string{"Idempotency-Status: replayed"}, true, resilient.Success, "", 0, true},
		{"replayed Stripe", 200, "", []string{"Idempotent-Replayed: true"}, true, resilient.Success, "", 0, true},
		{"400", 400, "", nil, true, resilient.Terminal, resilient.CategoryValidation, 0, false},
		{"401", 401, "", nil, true, resilient.Terminal, resilient.CategoryAuth, 0, false},
		{"403", 403, "", nil, true, resilient.Terminal, resilient.CategoryAuth, 0, false},
		{"404", 404, "", nil, true, resilient.Terminal, resilient.CategoryNotFound, 0, false},
		{"422 validation", 422, `{"title":"amount must be positive"}`, nil, true, resilient.Terminal, resilient.CategoryValidation, 0, false},
		{"422 mismatch", 422, `{"type":"https://x/payload-mismatch","title":"idempotency.payload_mismatch"}`, nil, true, resilient.Terminal, resilient.CategoryPayloadMismatch, 0, false},
		{"409 mismatch", 409, `{"code":"CONFLICT.idempotency.payload_mismatch"}`, nil, true, resilient.Terminal, resilient.CategoryPayloadMismatch, 0, false},
		{"409 in progress", 409, `{"type":"https://x/in-progress","title":"request in progress"}`, nil, true, resilient.Retry, resilient.CategoryInProgress, 0, false},
		{"409 in progress with Retry-After", 409, `{}`, []string{"Retry-After: 1"}, true, resilient.Retry, resilient.CategoryInProgress, time.Second, false},
		{"409 in progress, unkeyed", 409, `{"title":"in progress"}`, nil, false, resilient.Terminal, resilient.CategoryConflict, 0, false},
		{"409 business conflict", 409, `{"title":"order already shipped"}`, nil, true, resilient.Terminal, resilient.CategoryConflict, 0, false},
		{"408", 408, "", nil, true, resilient.Retry, resilient.CategoryTimeout, 0, false},
		{"429 Retry-After", 429, "", []string{"Retry-After: 7"}, true, resilient.Retry, resilient.CategoryRateLimit, 7 * time.Second, false},
		{"429 RateLimit r=0", 429, "", []string{`RateLimit: "default";r=0;t=12`}, true, resilient.Retry, resilient.CategoryRateLimit, 12 * time.Second, false},
		{"429 Retry-After wins over RateLimit", 429, "", []string{"Retry-After: 2", `RateLimit: "default";r=0;t=12`}, true, resilient.Retry, resilient.CategoryRateLimit, 2 * time.Second, false},
		{"429 RateLimit r>0 ignored", 429, "", []string{`RateLimit: "default";r=5;t=12`}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"429 RateLimit r=0 without t: backoff", 429, "", []string{`RateLimit: "default";r=0`}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"429 RateLimit-Remaining 0 without reset: backoff", 429, "", []string{"RateLimit-Remaining: 0"}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"503 RateLimit r=0 without t: backoff", 503, "", []string{`RateLimit: "default";r=0`}, true, resilient.Retry, resilient.CategoryUnavailable, 0, false},
		{"429 garbage Retry-After", 429, "", []string{"Retry-After: tomorrow-ish"}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"500", 500, "", nil, true, resilient.Retry, resilient.CategoryTransient, 0, false},
		{"500 unkeyed POST", 500, "", nil, false, resilient.Terminal, resilient.CategoryTransient, 0, false},
		{"502", 502, "", nil, true, resilient.Retry, resilient.CategoryUnavailable, 0, false},
		{"503 unkeyed POST", 503, "", nil, false, resilient.Retry, resilient.CategoryUnavailable, 0, false},
		{"504", 504, "", nil, true, resilient.Retry, resilient.CategoryTimeout, 0, false},
		{"501", 501, "", nil, true, resilient.Terminal, resilient.CategoryTerminal, 0, false},
		{"hint false wins over 503", 503, "", []string{"X-Should-Retry: false"}, true, resilient.Terminal, resilient.CategoryUnavailable, 0, false},
		{"hint true wins over 400", 400, "", []string{"Stripe-Should-Retry: true"}, true, resilient.Retry, resilient.CategoryValidation, 0, false},
		{"malformed hint ignored", 503, "", []string{"X-Should-Retry: maybe"}, true, resilient.Retry, resilient.CategoryUnavailable, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := response(tc.code, tc.body, tc.headers...)
			d := resilient.DefaultClassifier(outcome(http.MethodPost, tc.keyed, resp, nil))
			assert.Equal(t, tc.action, d.Action)
			assert.Equal(t, tc.category, d.Category)
			assert.Equal(t, tc.delay, d.Delay)
			assert.Equal(t, tc.replayed, d.Replayed)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b), "the classifier leaves the body intact")
		})
	}
}

func TestDefaultClassifierErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		method    string
		keyed     bool
		action    resilient.Action
		ambiguous bool
	}{
		{"dial refused, unkeyed POST", dialErr(), http.MethodPost, false, resilient.Retry, false},
		{"reset, keyed POST", readErr(), http.MethodPost, true, resilient.Retry, true},
		{"reset, unkeyed POST", readErr(), http.MethodPost, false, resilient.Terminal, true},
		{"reset, GET", readErr(), http.MethodGet, false, resilient.Retry, true},
		{"attempt deadline, keyed", context.DeadlineExceeded, http.MethodPost, true, resilient.Retry, true},
		{"canceled", context.Canceled, http.MethodGet, false, resilient.Terminal, false},
		{"unknown authority", x509.UnknownAuthorityError{}, http.MethodGet, false, resilient.Terminal, false},
		{"wrapped EOF", errors.Join(errors.New("read"), io.EOF), http.MethodPost, true, resilient.Retry, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := resilient.DefaultClassifier(outcome(tc.method, tc.keyed, nil, tc.err))
			assert.Equal(t, tc.action, d.Action)
			assert.Equal(t, tc.ambiguous, d.Ambiguous)
		})
	}
}

func TestValidateKey(t *testing.T) {
	k, err := resilient.NewKey()
	require.NoError(t, err)
	assert.NoError(t, resilient.ValidateKey(k))
	ts, ok := resilient.KeyTime(k)
	require.True(t, ok)
	assert.WithinDuration(t, time.Now(), ts, time.Second)
	_, ok = resilient.KeyTime("not-a-uuid")
	assert.False(t, ok)
	for _, bad := range []string{"", " lead", "trail ", "tab\t", "é", strings.Repeat("a", 256)} {
		assert.ErrorIs(t, resilient.ValidateKey(bad), resilient.ErrInvalidKey, "%q", bad)
	}
}

func FuzzDefaultClassifier(f *testing.F) {
	f.Add(409, "Retry-After: 1\nContent-Type: application/problem+json", []byte(`{"type":"/in-progress"}`), true)
	f.Add(429, `RateLimit: "default";r=0;t=30`, []byte{}, false)
	f.Add(503, "Retry-After: Sun, 22 Nov 2026 12:00:30 GMT", []byte("busy"), true)
	f.Add(422, "X-Should-Retry: true", bytes.Repeat([]byte("mismatch"), 1000), true)
	f.Add(-1, "Stripe-Should-Retry: false", []byte(nil), false)
	f.Fuzz(func(t *testing.T, code int, headers string, body []byte, keyed bool) {
		var hs []string
		for _, line := range strings.Split(headers, "\n") {
			if strings.Contains(line, ":") {
				hs = append(hs, line)
			}
		}
		resp := response(code, string(body), hs...)
		d := resilient.DefaultClassifier(outcome(http.MethodPost, keyed, resp, nil))
		if d.Delay < 0 {
			t.Fatalf("negative delay %v", d.Delay)
		}
		if d.Action > resilient.Terminal {
			t.Fatalf("unknown action %v", d.Action)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("body changed by the classifier: %q, %v", got, err)
		}
	})
}
