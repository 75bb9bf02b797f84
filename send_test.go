package resilient

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// TestWatchContextCarriesTheTrace: the key httptrace keeps a ClientTrace
// under was found (else every keyed attempt pays WithClientTrace's
// context), and a watch seen as a context gives httptrace its trace and
// its parent everything else.
func TestWatchContextCarriesTheTrace(t *testing.T) {
	if traceKey == nil {
		t.Fatal("httptrace's context key was not found: keyed attempts fall back to WithClientTrace")
	}
	type k struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), k{}, "v"), time.Hour)
	defer cancel()
	w := &writeWatch{}
	ctx := w.context(parent)
	if got := httptrace.ContextClientTrace(ctx); got != &w.trace {
		t.Fatalf("ContextClientTrace = %p, want the watch's %p", got, &w.trace)
	}
	if ctx.Value(k{}) != "v" {
		t.Error("parent's value lost")
	}
	if dl, ok := ctx.Deadline(); !ok || dl.IsZero() {
		t.Error("parent's deadline lost")
	}
	cancel()
	<-ctx.Done()
	if ctx.Err() != context.Canceled || context.Cause(ctx) != context.Canceled {
		t.Errorf("Err %v, Cause %v", ctx.Err(), context.Cause(ctx))
	}
	// A caller's trace is composed by httptrace, not hidden.
	var called int
	traced := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { called++ }})
	w2 := &writeWatch{}
	w2.trace.WroteRequest = w2.wroteRequest
	httptrace.ContextClientTrace(w2.context(traced)).WroteRequest(httptrace.WroteRequestInfo{})
	if called != 1 || w2.wrote.Load() != 1 {
		t.Errorf("composed trace: caller's hook %d calls, watch %d", called, w2.wrote.Load())
	}
}

// TestAttemptHeaderCopies: both ways of copying the caller's header (a
// runtime copy of the map when its value slices are clipped, else a new
// map with each slice clipped) give a map of the caller's fields that can
// take the key and attempt headers and appends without writing the
// caller's map or arrays.
func TestAttemptHeaderCopies(t *testing.T) {
	for _, clipped := range []bool{true, false} {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-Trace", "caller")
		h2 := attemptHeader(h, 2, clipped)
		h2["Idempotency-Key"] = []string{"k"}
		h2["Retry-Attempt"] = []string{"0"}
		h2.Add("X-Trace", "attempt")
		if len(h) != 2 || h.Get("Idempotency-Key") != "" || len(h["X-Trace"]) != 1 || h["X-Trace"][0] != "caller" {
			t.Errorf("clipped %v: the caller's header changed: %v", clipped, h)
		}
		if len(h2) != 4 || h2.Get("Content-Type") != "application/json" || len(h2["X-Trace"]) != 2 {
			t.Errorf("clipped %v: attempt header %v", clipped, h2)
		}
	}
}
