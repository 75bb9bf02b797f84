package wire

import (
	"net/http"
	"testing"
)

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
