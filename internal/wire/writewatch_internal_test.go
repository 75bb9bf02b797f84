package wire

import (
	"context"
	"net/http/httptrace"
	"sync"
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

// TestWatchHookLookedUpAtOnce: the trace a watch's context gives carries
// the watch's WroteRequest, also when goroutines look it up at once (under
// -race); each write it reports is counted.
func TestWatchHookLookedUpAtOnce(t *testing.T) {
	w := &writeWatch{}
	w.trace.WroteRequest = w.wroteRequest
	ctx := w.context(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			tr := httptrace.ContextClientTrace(ctx)
			if tr == nil || tr.WroteRequest == nil {
				t.Error("the trace has no WroteRequest hook")
				return
			}
			tr.WroteRequest(httptrace.WroteRequestInfo{})
		})
	}
	wg.Wait()
	if got := w.seen(); !got.Any || !got.Again || got.Resends != 3 {
		t.Fatalf("seen %+v after 4 writes", got)
	}
}
