package resilient

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/stubtest"
)

// TestEvidenceFreshRouteAgreesWithTheMap: the lock-free copy of the route
// noted last answers as the map would, for that route and for others, and
// its evidence expires with the map's.
func TestEvidenceFreshRouteAgreesWithTheMap(t *testing.T) {
	var ev evidence
	t0 := time.Unix(1_700_000_000, 0)
	a, b := route{"POST", "/v1/charges"}, route{"POST", "/v1/refunds"}
	if ev.has(a, t0.UnixNano()) {
		t.Fatal("evidence before any note")
	}
	ev.note(a, t0.UnixNano())
	ev.note(b, t0.Add(time.Minute).UnixNano()) // b is now the fresh copy
	for _, r := range []route{a, b} {
		if !ev.has(r, t0.Add(2*time.Minute).UnixNano()) {
			t.Errorf("%v: no evidence after a note", r)
		}
	}
	if ev.has(route{"PATCH", "/v1/charges"}, t0.UnixNano()) {
		t.Error("evidence for a route never noted")
	}
	// Noting a fresh route again changes nothing; past half its life it is
	// renewed, in the map and in the fresh copy.
	ev.note(b, t0.Add(2*time.Minute).UnixNano())
	if exp := ev.fresh.Load().exp; exp != t0.Add(time.Minute+dedupeEvidenceTTL).UnixNano() {
		t.Errorf("fresh expiry moved on a fresh note: %v", time.Unix(0, exp))
	}
	renew := t0.Add(time.Minute + dedupeEvidenceTTL/2 + time.Second)
	ev.note(b, renew.UnixNano())
	if f := ev.fresh.Load(); f.r != b || f.exp != renew.Add(dedupeEvidenceTTL).UnixNano() || ev.routes[b] != f.exp {
		t.Errorf("renewal: fresh %+v, map %v", f, ev.routes[b])
	}
	// Expired: neither copy answers.
	if ev.has(a, t0.Add(dedupeEvidenceTTL+time.Second).UnixNano()) {
		t.Error("a: evidence past its expiry")
	}
	if ev.has(b, renew.Add(dedupeEvidenceTTL+time.Second).UnixNano()) {
		t.Error("b: evidence past its expiry")
	}
}

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
		v, _ := tr.hosts.m.Load("api.test")
		if !v.(*hostState).evidence.has(routeOf(req), time.Now().UnixNano()) {
			t.Fatal("evidence not noted now")
		}
	})
}
