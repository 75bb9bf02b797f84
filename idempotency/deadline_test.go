package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// The handler's context ends at the lease for whoever asks, however it
// asks (Done, Err, a child context, context.AfterFunc), and ends when the
// handler has returned: its timer starts only when asked for, which must
// change nothing a handler can see.
func TestHandlerContextEnds(t *testing.T) {
	type seen struct {
		err, childErr error
		waited        time.Duration
		ctx           context.Context
	}
	tests := []struct {
		name string
		run  func(ctx context.Context, s *seen)
	}{
		{"Done", func(ctx context.Context, s *seen) { <-ctx.Done(); s.err = ctx.Err() }},
		{"child context", func(ctx context.Context, s *seen) {
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			<-child.Done()
			s.err, s.childErr = ctx.Err(), child.Err()
		}},
		{"AfterFunc", func(ctx context.Context, s *seen) {
			fired := make(chan struct{})
			context.AfterFunc(ctx, func() { close(fired) })
			<-fired
			s.err = ctx.Err()
		}},
		{"Err after the lease", func(ctx context.Context, s *seen) { time.Sleep(2 * time.Minute); s.err = ctx.Err() }},
		{"never asked", func(ctx context.Context, s *seen) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mw, err := idempotency.New(idempotency.NewMemoryStore(), idempotency.Config{Lease: time.Minute})
				require.NoError(t, err)
				var s seen
				h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					start := time.Now()
					s.ctx = r.Context()
					tt.run(r.Context(), &s)
					s.waited = time.Since(start)
					w.WriteHeader(http.StatusCreated)
				}))
				req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", "k")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				require.Equal(t, http.StatusCreated, rec.Code)
				if tt.name == "never asked" {
					assert.ErrorIs(t, s.ctx.Err(), context.Canceled, "first asked after the handler returned: ended")
					select {
					case <-s.ctx.Done():
					default:
						t.Error("Done is not closed after the handler returned")
					}
					return
				}
				assert.ErrorIs(t, s.err, context.DeadlineExceeded)
				assert.GreaterOrEqual(t, s.waited, time.Minute, "not before the lease")
				if tt.name == "child context" {
					assert.ErrorIs(t, s.childErr, context.DeadlineExceeded)
				}
				if tt.name != "Err after the lease" {
					assert.Equal(t, time.Minute, s.waited, "at the lease")
				}
			})
		})
	}
}
