package storm

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
)

// Result is what one strategy did in one scenario.
type Result struct {
	// Strategy is the strategy's name (see Strategies).
	Strategy string `json:"strategy"`
	// Scenario is "outage" or "steady".
	Scenario string `json:"scenario"`
	// P is the scenario's independent failure rate.
	P float64 `json:"p"`
	// Keyed reports whether the strategy sends an idempotency key.
	Keyed bool `json:"keyed"`
	// Ops is the number of logical operations started.
	Ops int `json:"ops"`
	// ServerRequests is the number of requests the server saw (every
	// attempt, and any re-send net/http made on its own).
	ServerRequests int64 `json:"server_requests"`
	// Amplification is ServerRequests ÷ Ops.
	Amplification float64 `json:"amplification"`
	// SuccessRate is the fraction of operations that got a 201.
	SuccessRate float64 `json:"success_rate"`
	// Duplicates is the number of effects beyond the first per operation,
	// from the server's ledger.
	Duplicates int `json:"duplicates"`
	// P50Ms and P99Ms are percentiles of the operations' latency in
	// milliseconds: the time until the caller got its final answer, success
	// or failure, retries and waits included.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// RecoveryS is the time from the end of the outage until goodput is
	// back to 90 % of its level before the outage and stays there for a
	// second; 0 if it was back at once; -1 if it did not recover before the
	// load ended; null for a scenario without an outage. Goodput here is
	// the operations that succeed, counted at the time they started: it is
	// back when the operations callers start now succeed again, not when
	// retries of older ones complete.
	RecoveryS *float64 `json:"recovery_s"`
	// Shed is the number of requests the server shed for lack of capacity.
	Shed int64 `json:"shed"`
	// MaxLagMs is how late, at worst, the load generator started an
	// operation: a large value means the machine could not keep up and the
	// run is not to be trusted.
	MaxLagMs float64 `json:"max_lag_ms"`

	// BinS is the width of the bins of Load and Goodput, in seconds.
	BinS float64 `json:"bin_s"`
	// Load counts the requests the server saw per bin from the start of the
	// load.
	Load []int `json:"load,omitempty"`
	// Goodput counts the operations that succeeded per bin, by the time
	// they started.
	Goodput []int `json:"goodput,omitempty"`
}

// opResult is what the harness records per operation.
type opResult struct {
	ok      bool
	start   time.Duration // since the start of the load
	latency time.Duration
}

// latencyPercentiles returns the 50th and 99th percentiles of the ops'
// latencies in milliseconds (nearest rank).
func latencyPercentiles(ops []opResult) (p50, p99 float64) {
	if len(ops) == 0 {
		return 0, 0
	}
	lat := make([]time.Duration, len(ops))
	for i, o := range ops {
		lat[i] = o.latency
	}
	slices.Sort(lat)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(lat)))) - 1
		return float64(lat[max(i, 0)]) / float64(time.Millisecond)
	}
	return rank(0.50), rank(0.99)
}

// goodput counts the successful operations per bin of width bin, by the time
// they started.
func goodput(ops []opResult, bin time.Duration) []int {
	var out []int
	for _, o := range ops {
		if !o.ok {
			continue
		}
		i := int(o.start / bin)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// Recovery parameters: goodput is recovered when its moving average over
// recoveryWindow is at least recoveryLevel of its mean before the outage, and
// stays so for recoveryHold.
const (
	recoveryLevel  = 0.9
	recoveryWindow = 500 * time.Millisecond
	recoveryHold   = time.Second
	// warmup is left out of the baseline: clients start at random phases.
	warmup = time.Second
)

// recovery returns the seconds from outageEnd until goodput (successes per
// bin) recovered, as documented on Result.RecoveryS; bins at or after
// loadEnd are not considered, since no operation starts then.
func recovery(good []int, bin, outageStart, outageEnd, loadEnd time.Duration) float64 {
	at := func(i int) float64 {
		if i < len(good) {
			return float64(good[i])
		}
		return 0
	}
	first, last := int(min(warmup, outageStart/2)/bin), int(outageStart/bin)
	if last <= first {
		return -1
	}
	var base float64
	for i := first; i < last; i++ {
		base += at(i)
	}
	base /= float64(last - first)
	w := max(int(recoveryWindow/bin), 1)
	avg := func(i int) float64 { // mean of the w bins ending at i
		var s float64
		for j := i - w + 1; j <= i; j++ {
			s += at(j)
		}
		return s / float64(w)
	}
	hold := max(int(recoveryHold/bin), 1)
	end := int(loadEnd / bin)
	for i := int(outageEnd / bin); i+hold <= end; i++ {
		ok := true
		for j := i; j < i+hold; j++ {
			if avg(j) < recoveryLevel*base {
				ok = false
				break
			}
		}
		if ok {
			// The window ending at i is good: recovered at its start.
			return max(0, float64(i-w+1)*bin.Seconds()-outageEnd.Seconds())
		}
	}
	return -1
}

// duplicates counts the effects beyond the first per operation in a
// ledger, identifying operations by the "op" field of the created objects.
func duplicates(ledger []fakeserver.Entry) int {
	seen := make(map[int64]int, len(ledger))
	dup := 0
	for _, e := range ledger {
		var obj struct {
			Op int64 `json:"op"`
		}
		if json.Unmarshal(e.Object, &obj) != nil {
			continue
		}
		seen[obj.Op]++
		if seen[obj.Op] > 1 {
			dup++
		}
	}
	return dup
}
