package storm

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
)

func TestScheduleIsTheSameLoadForEveryStrategy(t *testing.T) {
	a := schedule(7, 3, 2*time.Second, 42)
	b := schedule(7, 3, 2*time.Second, 42)
	if !slices.Equal(a, b) {
		t.Fatal("same arguments, different schedules")
	}
	if len(a) != 7*3*2 {
		t.Errorf("%d arrivals, want 42", len(a))
	}
	per := map[int]int{}
	for i, x := range a {
		per[x.client]++
		if i > 0 && x.at < a[i-1].at {
			t.Fatal("not sorted by time")
		}
		if x.at < 0 || x.at >= 2*time.Second {
			t.Errorf("arrival at %v outside the load", x.at)
		}
	}
	for c, n := range per {
		if n != 6 {
			t.Errorf("client %d starts %d operations, want 6", c, n)
		}
	}
	if c := schedule(7, 3, 2*time.Second, 43); slices.Equal(a, c) {
		t.Error("another seed gave the same schedule")
	}
}

func TestRecovery(t *testing.T) {
	const bin = 100 * time.Millisecond
	// 10 per bin, an outage from 1 s to 2 s, goodput back at 2.5 s.
	good := make([]int, 50)
	for i := range good {
		if i < 10 || i >= 25 {
			good[i] = 10
		}
	}
	if got := recovery(good, bin, time.Second, 2*time.Second, 5*time.Second); got < 0.45 || got > 0.55 {
		t.Errorf("recovery %.2f s, want 0.5", got)
	}
	// Never back before the load ends.
	for i := 20; i < 50; i++ {
		good[i] = 0
	}
	if got := recovery(good, bin, time.Second, 2*time.Second, 5*time.Second); got != -1 {
		t.Errorf("recovery %.2f s, want -1", got)
	}
	// Retries that carried operations through the outage: back at once.
	for i := range good {
		good[i] = 10
	}
	if got := recovery(good, bin, time.Second, 2*time.Second, 5*time.Second); got != 0 {
		t.Errorf("recovery %.2f s, want 0", got)
	}
}

func TestDuplicatesCountsEffectsPerOperation(t *testing.T) {
	entry := func(op string) fakeserver.Entry {
		return fakeserver.Entry{Object: []byte(`{"op":` + op + `,"id":"ch_1"}`)}
	}
	ledger := []fakeserver.Entry{entry("1"), entry("2"), entry("1"), entry("1"), entry("3")}
	if got := duplicates(ledger); got != 2 {
		t.Errorf("duplicates %d, want 2", got)
	}
}

func TestLatencyPercentiles(t *testing.T) {
	var ops []opResult
	for i := 1; i <= 100; i++ {
		ops = append(ops, opResult{latency: time.Duration(i) * time.Millisecond})
	}
	if p50, p99 := latencyPercentiles(ops); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %v p99 %v, want 50 and 99", p50, p99)
	}
}

// TestNaiveRetriesKeepTheCallersKey guards the fairness of the comparison:
// the naive loop sends the caller's key and body on every attempt.
func TestNaiveRetriesKeepTheCallersKey(t *testing.T) {
	var (
		mu     sync.Mutex
		keys   []string
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: &naiveTransport{base: tr, attempts: 3, delay: time.Millisecond}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{"op":1}`))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != http.StatusServiceUnavailable || len(keys) != 3 {
		t.Fatalf("status %d after %d attempts, want the last 503 after 3", resp.StatusCode, len(keys))
	}
	for i := range keys {
		if keys[i] != "k1" || bodies[i] != `{"op":1}` {
			t.Errorf("attempt %d: key %q body %q", i, keys[i], bodies[i])
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*Config){
		"no clients":        func(c *Config) { c.Clients = 0 },
		"outage past end":   func(c *Config) { c.OutageEnd = c.Duration + time.Second },
		"p above 1":         func(c *Config) { c.Ps = []float64{1.5} },
		"unknown strategy":  func(c *Config) { c.Strategies = []string{"magic"} },
		"unbounded load":    func(c *Config) { c.Clients, c.Rate = 1e6, 1e3 },
		"no scenario":       func(c *Config) { c.NoOutage, c.Ps, c.NoTail = true, nil, true },
		"non-positive rate": func(c *Config) { c.Rate = 0 },
		"unknown fates":     func(c *Config) { c.Fates = "dice" },
		"unknown scale":     func(c *Config) { c.Scales = []string{"galactic"} },
		"shed cost above 1": func(c *Config) { c.ShedCost = 2 },
		"overload, no cap":  func(c *Config) { c.Overload, c.Capacity = []float64{2}, Capacity{} },
		"negative factor":   func(c *Config) { c.Overload = []float64{-1} },
	}
	for name, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestFlags(t *testing.T) {
	c, o := DefaultConfig(), Output{Format: "markdown"}
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	RegisterFlags(fs, &c, &o)
	err := fs.Parse([]string{"-clients", "9", "-outage", "1s-2s", "-p", "0.2, 0.4", "-strategies", "none,resilient",
		"-format", "json", "-out", "d", "-reproduce", "brooker2015"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Clients != 9 || c.OutageStart != time.Second || c.OutageEnd != 2*time.Second ||
		!slices.Equal(c.Ps, []float64{0.2, 0.4}) || !slices.Equal(c.Strategies, []string{"none", "resilient"}) ||
		o.Format != "json" || o.Dir != "d" || !slices.Equal(o.Reproduce, []string{FigureBrooker2015}) {
		t.Errorf("parsed %+v %+v", c, o)
	}
	c2 := DefaultConfig()
	fs = flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	RegisterFlags(fs, &c2, &o)
	if fs.Parse([]string{"-p", ""}) != nil || len(c2.Ps) != 0 {
		t.Errorf(`-p "" should clear the steady scenarios: %v`, c2.Ps)
	}
	if fs.Parse([]string{"-reproduce", "nope"}) == nil {
		t.Error("unknown figure accepted")
	}

	c3 := DefaultConfig()
	fs = flag.NewFlagSet("storm", flag.ContinueOnError)
	RegisterFlags(fs, &c3, &o)
	if err := fs.Parse([]string{"-sweep", "-scales", "both", "-ops", "20000", "-shed-cost", "0.2", "-fates", "stream"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c3.Ps, SweepPs()) || !slices.Equal(c3.Overload, []float64{1.25, 2}) ||
		!slices.Equal(c3.Scales, []string{ScalePerClient, ScaleShared}) || c3.Ops != 20000 || c3.ShedCost != 0.2 || c3.Fates != FatesStream {
		t.Errorf("sweep flags parsed as %+v", c3)
	}
	if err := c3.Validate(); err != nil {
		t.Errorf("the sweep configuration: %v", err)
	}
}
