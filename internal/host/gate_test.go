package host

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestFitsAnyDeadline: whether a wait fits before the caller's deadline is
// right for any deadline, past the years whose Unix nanoseconds fit in an
// int64 too (a context.WithTimeout of math.MaxInt64 ends in 2318).
func TestFitsAnyDeadline(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name     string
		deadline time.Time
		wait     time.Duration
		fits     bool
	}{
		{"well before", now.Add(time.Hour), time.Second, true},
		{"past it", now.Add(time.Second), time.Hour, false},
		{"a deadline in 2318", now.Add(math.MaxInt64), time.Hour, true},
		{"a deadline in 3000", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Hour, true},
		{"a deadline in 1600", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), 0, false},
		{"the longest wait", now.Add(time.Hour), math.MaxInt64, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithDeadline(context.Background(), tt.deadline)
			defer cancel()
			g := Applicant{Ctx: ctx}
			assert.Equal(t, tt.fits, g.Fits(now.UnixNano(), tt.wait))
		})
	}
}
