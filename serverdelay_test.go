package resilient_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/resilienthttp/resilient"
)

func TestServerDelay(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	const year = 365 * 24 * time.Hour
	tests := []struct {
		name    string
		headers []string
		want    time.Duration
	}{
		{"none", nil, 0},
		{"Retry-After seconds", []string{"Retry-After: 7"}, 7 * time.Second},
		{"Retry-After date", []string{"Retry-After: Sun, 22 Nov 2026 12:00:30 GMT"}, 30 * time.Second},
		{"Retry-After huge: clamped", []string{"Retry-After: 99999999999999999999"}, year},
		{"Retry-After malformed: ignored", []string{"Retry-After: 5s"}, 0},
		{"Retry-After negative: ignored", []string{"Retry-After: -5"}, 0},
		{"Retry-After malformed falls back to RateLimit", []string{"Retry-After: x", `RateLimit: "default";r=0;t=4`}, 4 * time.Second},
		{"RateLimit r=0 t", []string{`RateLimit: "default";r=0;t=30`}, 30 * time.Second},
		{"RateLimit r=0 without t: no server delay", []string{`RateLimit: "default";r=0`}, 0},
		{"RateLimit r=0, t without value", []string{`RateLimit: "default";r=0;t`}, 0},
		{"RateLimit r=0, t empty", []string{`RateLimit: "default";r=0;t=`}, 0},
		{"RateLimit r=0, t negative", []string{`RateLimit: "default";r=0;t=-3`}, 0},
		{"RateLimit r=0, t fraction", []string{`RateLimit: "default";r=0;t=1.5`}, 0},
		{"RateLimit r=0, t huge: clamped", []string{`RateLimit: "default";r=0;t=999999999999999999999`}, year},
		{"RateLimit r=00", []string{`RateLimit: "default";r=00;t=3`}, 3 * time.Second},
		{"RateLimit r>0", []string{`RateLimit: "default";r=1;t=30`}, 0},
		{"RateLimit r missing", []string{`RateLimit: "default";t=30`}, 0},
		{"RateLimit spaces", []string{`RateLimit: "default"; r=0; t=9`}, 9 * time.Second},
		{"RateLimit second policy spent", []string{`RateLimit: "burst";r=5;t=1, "daily";r=0;t=3600`}, time.Hour},
		{"RateLimit longest spent policy", []string{`RateLimit: "a";r=0;t=2, "b";r=0;t=8, "c";r=0`}, 8 * time.Second},
		{"RateLimit garbage", []string{`RateLimit: ;;;,,,=`}, 0},
		{"RateLimit-Remaining 0 with reset", []string{"RateLimit-Remaining: 0", "RateLimit-Reset: 12"}, 12 * time.Second},
		{"RateLimit-Remaining 0 without reset: no server delay", []string{"RateLimit-Remaining: 0"}, 0},
		{"RateLimit-Remaining 0, reset malformed", []string{"RateLimit-Remaining: 0", "RateLimit-Reset: soon"}, 0},
		{"RateLimit-Remaining 3 with reset", []string{"RateLimit-Remaining: 3", "RateLimit-Reset: 12"}, 0},
		{"RateLimit-Remaining empty", []string{"RateLimit-Remaining:", "RateLimit-Reset: 12"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := response(429, "", tc.headers...)
			assert.Equal(t, tc.want, resilient.ServerDelay(resp.Header, now))
		})
	}
}

func FuzzServerDelay(f *testing.F) {
	f.Add("", `"default";r=0;t=30`, "", "")
	f.Add("soon", `"a";r=0;t=2, "b";r=0;t=99999999999999999999`, "0", "")
	f.Add("", `"x;r=0;t=1";r=1`, "00", "7")
	f.Add("-1", ";;,=;r=0;t", "0", "")
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, rateLimit, remaining, reset string) {
		h := http.Header{}
		for name, v := range map[string]string{"Retry-After": retryAfter, "RateLimit": rateLimit,
			"RateLimit-Remaining": remaining, "RateLimit-Reset": reset} {
			if v != "" {
				h.Set(name, v)
			}
		}
		d := resilient.ServerDelay(h, now)
		if d < 0 || d > 365*24*time.Hour {
			t.Fatalf("ServerDelay(%v) = %v", h, d)
		}
	})
}
