package host

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/internal/retrycontrol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			assert.Equal(t, tt.fits, g.fits(now.UnixNano(), tt.wait))
		})
	}
}

// TestGateAdmitsAFirstAttemptWithoutAllocating: admitting a first attempt
// (reserve, wait: the pause check, the deposits) and releasing it allocates
// nothing, with the defaults (retry tokens) and with a per-host budget.
func TestGateAdmitsAFirstAttemptWithoutAllocating(t *testing.T) {
	for name, budget := range map[string]bool{
		"defaults": false,
		"budget":   true, // WithRetryControl(RetryTokens{}, RetryBudget{})
	} {
		t.Run(name, func(t *testing.T) {
			hs := newTable(retrycontrol.TokensConfig{})
			if budget {
				hs.Cfg.Budget = func(string) Budget { return retrycontrol.NewBudget(retrycontrol.BudgetConfig{}) }
			}
			g := &Applicant{Cfg: hs.Cfg, Ctx: context.Background()}
			now := time.Now()
			h := hs.Host("api.test", now.UnixNano())
			allocs := testing.AllocsPerRun(100, func() {
				var r Reservation
				var err error
				if r, err = h.Reserve(g, 0, 0, 0, false, now.UnixNano()); err != nil {
					t.Fatal(err)
				}
				if err := r.Wait(g); err != nil {
					t.Fatal(err)
				}
				r.Release(g, HealthOK)
			})
			assert.Zero(t, allocs)
		})
	}
}

// BenchmarkGateFirstAttempt measures the admission and release of a first
// attempt, with the defaults (retry tokens).
func BenchmarkGateFirstAttempt(b *testing.B) {
	hs := newTable(retrycontrol.TokensConfig{})
	g := &Applicant{Cfg: hs.Cfg, Ctx: context.Background()}
	now := time.Now()
	h := hs.Host("api.test", now.UnixNano())
	b.ReportAllocs()
	for b.Loop() {
		var r Reservation
		r, _ = h.Reserve(g, 0, 0, 0, false, now.UnixNano())
		r.Wait(g)
		r.Release(g, HealthOK)
	}
}

// TestReserveResetsEveryField: reserve fills the reservation field by field
// (a composite literal costs a copy); one left from the previous attempt's
// reservation would leak into the next. Every field is set to a non-zero
// value first, and a field added later without a reset fails here.
func TestReserveResetsEveryField(t *testing.T) {
	hs := newTable(retrycontrol.TokensConfig{})
	g := &Applicant{Cfg: hs.Cfg, Ctx: context.Background()}
	now := time.Now()
	h := hs.Host("api.test", now.UnixNano())
	var r Reservation
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem() // unexported
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(7)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Func:
			f.Set(reflect.ValueOf(func(error) {}))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(now.Add(-time.Hour)))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	var err error
	r, err = h.Reserve(g, 0, 0, 0, false, now.UnixNano())
	require.NoError(t, err)
	want := Reservation{H: h, First: true, At: now.UnixNano()}
	assert.True(t, reflect.DeepEqual(want, r), "got %+v", r)
}
