package resilient

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/stubtest"
)

// TestPlainSuccessNotesEvidenceWithItsTime: a keyed answer that shows the
// server dedupes, to an operation whose first attempt is a plain success
// (call.succeeded), is noted as evidence at the time it came.
func TestPlainSuccessNotesEvidenceWithItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(stubtest.New(stubtest.Deduping([]int{200})...)) // echoes the key
		req := stubtest.Post(context.Background(), "{}")
		if got := roundTrip(t, tr, req); got != 200 {
			t.Fatalf("status %d", got)
		}
		v, _ := tr.hosts.M.Load("api.test")
		if !v.(*host.State).Evidence.Has(host.RouteOf(req), time.Now().UnixNano()) {
			t.Fatal("evidence not noted now")
		}
	})
}
