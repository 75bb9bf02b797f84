package host

import (
	"maps"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEvidenceFreshRouteAgreesWithTheMap: the lock-free copy of the route
// noted last answers as the map would, for that route and for others, and
// its evidence expires with the map's.
func TestEvidenceFreshRouteAgreesWithTheMap(t *testing.T) {
	var ev Evidence
	t0 := time.Unix(1_700_000_000, 0)
	a, b := Route{method: "POST", prefix: "/v1/charges"}, Route{method: "POST", prefix: "/v1/refunds"}
	if ev.Has(a, t0.UnixNano()) {
		t.Fatal("evidence before any note")
	}
	ev.Note(a, t0.UnixNano())
	ev.Note(b, t0.Add(time.Minute).UnixNano()) // b is now the fresh copy
	for _, r := range []Route{a, b} {
		if !ev.Has(r, t0.Add(2*time.Minute).UnixNano()) {
			t.Errorf("%v: no evidence after a note", r)
		}
	}
	if ev.Has(Route{method: "PATCH", prefix: "/v1/charges"}, t0.UnixNano()) {
		t.Error("evidence for a route never noted")
	}
	// Noting a fresh route again changes nothing; past half its life it is
	// renewed, in the map and in the fresh copy.
	ev.Note(b, t0.Add(2*time.Minute).UnixNano())
	if exp := ev.fresh.Load().exp; exp != t0.Add(time.Minute+dedupeEvidenceTTL).UnixNano() {
		t.Errorf("fresh expiry moved on a fresh note: %v", time.Unix(0, exp))
	}
	renew := t0.Add(time.Minute + dedupeEvidenceTTL/2 + time.Second)
	ev.Note(b, renew.UnixNano())
	if f := ev.fresh.Load(); f.r != b || f.exp != renew.Add(dedupeEvidenceTTL).UnixNano() || ev.routes[b] != f.exp {
		t.Errorf("renewal: fresh %+v, map %v", f, ev.routes[b])
	}
	// Expired: neither copy answers.
	if ev.Has(a, t0.Add(dedupeEvidenceTTL+time.Second).UnixNano()) {
		t.Error("a: evidence past its expiry")
	}
	if ev.Has(b, renew.Add(dedupeEvidenceTTL+time.Second).UnixNano()) {
		t.Error("b: evidence past its expiry")
	}
}

// TestEvidenceRenewsOnlyWhenNoteWould: a plain success skips looking at its
// answer for evidence when renews is false. Then noting the route would
// have changed nothing: the same fresh copy, the same map. When nothing was
// noted, or the route noted last is another or half expired, renews is
// true and the answer is looked at.
func TestEvidenceRenewsOnlyWhenNoteWould(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	req := func(method, path string) *http.Request {
		return &http.Request{Method: method, URL: &url.URL{Path: path}}
	}
	charge := req("POST", "/v1/charges/ch_1/capture") // route POST /v1/charges
	for _, tc := range []struct {
		name   string
		noted  []*http.Request // noted at t0, in order
		at     time.Duration   // the answer's time after t0
		renews bool
	}{
		{"nothing noted", nil, 0, true},
		{"same route, fresh", []*http.Request{charge}, time.Minute, false},
		{"same route by another path", []*http.Request{req("POST", "/v1/charges")}, time.Minute, false},
		{"same route, half its life gone", []*http.Request{charge}, dedupeEvidenceTTL/2 + time.Second, true},
		{"another route noted last", []*http.Request{charge, req("POST", "/v1/refunds")}, time.Minute, true},
		{"another method", []*http.Request{req("PATCH", "/v1/charges")}, time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Evidence
			for _, r := range tc.noted {
				ev.Note(RouteOf(r), t0.UnixNano())
			}
			now := t0.Add(tc.at)
			require.Equal(t, tc.renews, ev.Renews(charge, now.UnixNano()))
			if !tc.renews {
				fresh, routes := ev.fresh.Load(), maps.Clone(ev.routes)
				ev.Note(RouteOf(charge), now.UnixNano())
				require.Same(t, fresh, ev.fresh.Load(), "a skipped note would have changed the fresh copy")
				require.Equal(t, routes, ev.routes, "a skipped note would have changed the map")
			}
		})
	}
}
