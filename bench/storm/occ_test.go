package storm

import "testing"

// TestOCCShape checks the ordering the 2015 post reports: jitter saves work,
// and exponential backoff without jitter is by far the slowest.
func TestOCCShape(t *testing.T) {
	c := DefaultOCCConfig()
	c.Clients, c.Runs = []int{50}, 20
	by := map[string]OCCResult{}
	for _, r := range SimulateOCC(c) {
		by[r.Backoff] = r
	}
	if len(by) != 5 {
		t.Fatalf("results: %v", by)
	}
	for _, jit := range []string{"FullJitter", "EqualJitter", "DecorrelatedJitter"} {
		if by[jit].Calls >= by["Exponential"].Calls {
			t.Errorf("%s: %.0f calls, not fewer than Exponential's %.0f", jit, by[jit].Calls, by["Exponential"].Calls)
		}
		if by[jit].TimeMs*3 >= by["Exponential"].TimeMs {
			t.Errorf("%s: %.0f ms, Exponential %.0f ms: want it at least 3 times faster", jit, by[jit].TimeMs, by["Exponential"].TimeMs)
		}
	}
	if by["FullJitter"].Calls >= by["DecorrelatedJitter"].Calls {
		t.Errorf("FullJitter %.0f calls, DecorrelatedJitter %.0f: the post has FullJitter doing the least work",
			by["FullJitter"].Calls, by["DecorrelatedJitter"].Calls)
	}
	// Deterministic: the same seed gives the same numbers.
	again := SimulateOCC(c)
	for _, r := range again {
		if r != by[r.Backoff] {
			t.Errorf("not deterministic: %+v then %+v", by[r.Backoff], r)
		}
	}
}
