package retryafter

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"Sun, 22 Nov 2026 12:00:30 GMT", 30 * time.Second, true},  // IMF-fixdate
		{"Sunday, 22-Nov-26 12:00:30 GMT", 30 * time.Second, true}, // RFC 850
		{"Sun Nov 22 12:00:30 2026", 30 * time.Second, true},       // ANSI C asctime
		{"Sun, 22 Nov 2026 11:00:00 GMT", 0, true},                 // past: retry now
		{"99999999999999999999999", 365 * 24 * time.Hour, true},    // huge: clamped
		{"-1", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{strings.Repeat("9", 10000), 365 * 24 * time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.in[:min(len(tc.in), 30)], func(t *testing.T) {
			got, ok := Parse(tc.in, now)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "120", "Sun, 22 Nov 2026 12:00:30 GMT", "-1", "1e9", "\x00"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := Parse(v, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("Parse(%q) = %v, %v", v, d, ok)
		}
	})
}
