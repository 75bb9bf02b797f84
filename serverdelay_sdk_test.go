package resilient_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
)

// TestServerDelaySDKHeaders: the delays the SDKs honour — Retry-After-Ms
// (Stainless) first, X-Amz-Retry-After (AWS) last and at most 5 s — and an
// HTTP-date Retry-After measured against the response's Date.
func TestServerDelaySDKHeaders(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"Retry-After-Ms", http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{"Retry-After-Ms with a fraction", http.Header{"Retry-After-Ms": {"1.5"}}, 1500 * time.Microsecond},
		{"Retry-After-Ms before Retry-After", http.Header{"Retry-After-Ms": {"100"}, "Retry-After": {"2"}}, 100 * time.Millisecond},
		{"malformed Retry-After-Ms: Retry-After", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second},
		{"negative Retry-After-Ms is ignored", http.Header{"Retry-After-Ms": {"-5"}}, 0},
		{"huge Retry-After-Ms is clamped", http.Header{"Retry-After-Ms": {"1e300"}}, 365 * 24 * time.Hour},
		{"x-ms-retry-after-ms", http.Header{"X-Ms-Retry-After-Ms": {"700"}}, 700 * time.Millisecond},
		{"x-ms-retry-after-ms before Retry-After", http.Header{"X-Ms-Retry-After-Ms": {"700"}, "Retry-After": {"2"}}, 700 * time.Millisecond},
		{"Retry-After-Ms before x-ms-retry-after-ms", http.Header{"Retry-After-Ms": {"100"}, "X-Ms-Retry-After-Ms": {"700"}}, 100 * time.Millisecond},
		{"X-Amz-Retry-After", http.Header{"X-Amz-Retry-After": {"1200"}}, 1200 * time.Millisecond},
		{"X-Amz-Retry-After at most 5 s", http.Header{"X-Amz-Retry-After": {"60000"}}, 5 * time.Second},
		{"Retry-After before X-Amz-Retry-After", http.Header{"X-Amz-Retry-After": {"1200"}, "Retry-After": {"3"}}, 3 * time.Second},
		{"HTTP-date against Date", http.Header{"Retry-After": {date(now.Add(-time.Hour + 10*time.Second))}, "Date": {date(now.Add(-time.Hour))}}, 10 * time.Second},
		{"HTTP-date without Date: against now", http.Header{"Retry-After": {date(now.Add(10 * time.Second))}}, 10 * time.Second},
		{"HTTP-date with a malformed Date: against now", http.Header{"Retry-After": {date(now.Add(10 * time.Second))}, "Date": {"yesterday"}}, 10 * time.Second},
		{"HTTP-date before Date", http.Header{"Retry-After": {date(now.Add(-time.Minute))}, "Date": {date(now)}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, resilient.ServerDelay(tt.header, now))
		})
	}
}
