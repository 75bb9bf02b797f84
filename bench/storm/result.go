package storm

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
)

// Result is what one strategy did in one scenario at one scale.
type Result struct {
	// Strategy is the strategy's name (see Strategies).
	Strategy string `json:"strategy"`
	// Scenario is "outage", "steady" or "overload".
	Scenario string `json:"scenario"`
	// Scale is "per-client" (a Transport per client) or "shared" (one
	// Transport for all clients).
	Scale string `json:"scale"`
	// P is the scenario's independent failure rate.
	P float64 `json:"p"`
	// Factor is, in an overload scenario, the offered load ÷ the server's
	// capacity; 0 otherwise.
	Factor float64 `json:"factor,omitempty"`
	// Keyed reports whether the strategy sends an idempotency key.
	Keyed bool `json:"keyed"`
	// Ops is the number of logical operations of the load.
	Ops int `json:"ops"`
	// DurationS is how long operations were started, in seconds.
	DurationS float64 `json:"duration_s"`
	// ServerRequests is the number of requests the server saw (every
	// attempt, and any re-send net/http made on its own).
	ServerRequests int64 `json:"server_requests"`
	// Unsent is the number of operations of which no attempt reached the
	// server (refused locally, or the harness could not send them).
	Unsent int `json:"unsent"`
	// Amplification is ServerRequests ÷ Ops.
	Amplification float64 `json:"amplification"`
	// WarmLoad is, in steady and overload scenarios, the server requests per
	// operation once warmed up: requests that arrived from the end of the
	// first quarter of the load (at most 10 s) to its end, ÷ operations
	// started in that time. State that starts full (token buckets) has
	// shown its steady behaviour by then.
	WarmLoad *float64 `json:"load_warm"`
	// OutageLoad is, in the outage scenario, the server requests per
	// operation during the outage window: requests that arrived in it ÷
	// operations started in it.
	OutageLoad *float64 `json:"load_outage"`
	// SuccessRate is the fraction of operations that got a 201.
	SuccessRate float64 `json:"success_rate"`
	// GoodputPerS is the number of operations that succeeded per second,
	// counted when they completed, over the measured window: from the end
	// of the warm-up (steady and overload: the first quarter of the load, at
	// most 10 s; outage: none) to the end of the load. Successes that
	// complete after the load ended (a backlog drained by retries) do not
	// count, so that no strategy gets credit for work done after the
	// offered load stopped.
	GoodputPerS float64 `json:"goodput_per_s"`
	// VsNone is SuccessRate minus that of the strategy "none" in the same
	// scenario at the same scale, in percentage points; null without
	// "none", or when either run is invalid.
	VsNone *float64 `json:"vs_none"`
	// Harm is the number of operations that "none" completed and this
	// strategy failed, in the same scenario at the same scale (same
	// operations, same arrivals; with FatesOperation, the same fate for
	// each attempt); null as VsNone.
	Harm *int `json:"harm"`
	// Harmful flags a strategy that does harm here, with one meaning per
	// scenario and never on a strategy that succeeded more than none (at
	// the 0.1 % printed): VsNone below -0.5 points; in an overload
	// scenario, where which requests the server sheds depends on timing
	// and Harm counts swaps as well as losses, GoodputPerS below 99.5 % of
	// none's (and below it at 1/s). Harm is for information.
	Harmful bool `json:"harmful"`
	// NoneGoodputPerS is the GoodputPerS of "none" in the same scenario at
	// the same scale (0 without it).
	NoneGoodputPerS float64 `json:"none_goodput_per_s"`
	// Work is the server's work in units of one served request: every
	// request admitted to a capacity slot counts 1, every request shed,
	// or refused by the pushback middleware, counts the shed cost (every
	// request counts 1 without a capacity model).
	Work float64 `json:"work"`
	// WastedWork is the part of Work that did not end in a successful
	// operation: Work minus one unit per operation that succeeded.
	WastedWork float64 `json:"wasted_work"`
	// Statuses counts the operations by the status of their final answer
	// ("error": none came).
	Statuses map[string]int `json:"statuses,omitempty"`
	// Duplicates is the number of effects beyond the first per operation,
	// from the server's ledger.
	Duplicates int `json:"duplicates"`
	// NoLedger reports a server that cannot tell its effects (a -target
	// without the fakeserver's admin API): Duplicates is 0 because it was
	// not counted, and Harm and VsNone are null, since runs against a
	// real server one after the other do not meet the same fates.
	NoLedger bool `json:"no_ledger,omitempty"`
	// P50Ms and P99Ms are percentiles of the operations' latency in
	// milliseconds: the time until the caller got its final answer, success
	// or failure, retries and waits included.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// RecoveryS is the time from the end of the outage until goodput is
	// back to 95 % of its level before the outage and stays there for a
	// second; 0 if it was back at once; -1 if it did not recover before the
	// load ended; null for a scenario without an outage. Goodput here is
	// the operations that succeed, counted at the time they started: it is
	// back when the operations callers start now succeed again, not when
	// retries of older ones complete.
	RecoveryS *float64 `json:"recovery_s"`
	// LastRetryAfterS is the Retry-After, in seconds, of the last response
	// the server sent during the outage window (-1: that response had
	// none); null for a scenario without an outage.
	LastRetryAfterS *float64 `json:"last_retry_after_s"`
	// RecoveredInTime reports whether RecoveryS is at most
	// max(0.5 s, LastRetryAfterS); null for a scenario without an outage.
	RecoveredInTime *bool `json:"recovered_in_time"`
	// Shed is the number of requests the server shed for lack of capacity.
	Shed int64 `json:"shed"`
	// Admitted is the number of requests that got a capacity slot at the
	// server (0 without a capacity model).
	Admitted int64 `json:"admitted"`
	// MaxLagMs is how late, at worst, the load generator started an
	// operation.
	MaxLagMs float64 `json:"max_lag_ms"`
	// LateOps is the number of operations the load generator started more
	// than LateThreshold late, or never started: the machine could not keep
	// up with the schedule.
	LateOps int `json:"late_ops"`
	// AcceptErrors is the number of accept errors of the socket server (too
	// many open files…): connections the clients could not open.
	AcceptErrors int64 `json:"accept_errors"`
	// Overran reports that the run did not finish within its bound and was
	// stopped.
	Overran bool `json:"overran"`
	// Disturbed reports that the harness, not the strategy, shaped part of
	// the run: LateOps, AcceptErrors or Overran.
	Disturbed bool `json:"disturbed"`
	// Invalid reports a run disturbed beyond the threshold: more than
	// Config.MaxDisturbed of its operations late, any accept error, or an
	// overrun. Its numbers are not to be read; tables print "invalid".
	Invalid bool `json:"invalid"`

	// BinS is the width of the bins of Load, Goodput and LateBins, in
	// seconds.
	BinS float64 `json:"bin_s"`
	// Load counts the requests the server saw per bin from the start of the
	// load.
	Load []int `json:"load,omitempty"`
	// Goodput counts the operations that succeeded per bin, by the time
	// they started.
	Goodput []int `json:"goodput,omitempty"`
	// LateBins counts the operations started late per bin (the disturbed
	// intervals of the plots).
	LateBins []int `json:"late,omitempty"`

	ok []bool // by operation: got a 201
}

// opResult is what the harness records per operation.
type opResult struct {
	ok      bool
	start   time.Duration // since the start of the load
	latency time.Duration
	status  int // of the final answer; 0: none (an error)
}

// Harm thresholds: a strategy does harm when its success is more than
// harmPoints below none's, or, in an overload scenario, its goodput during
// the load more than harmShare below none's (see harmful).
const (
	harmPoints = 0.5
	harmShare  = 0.005
)

// summarize fills in r's derived figures from the operations and the
// server's counters.
func (r *Result) summarize(rp runParams, ops []opResult, st fakeserver.Stats, pr *probe) {
	cfg := rp.cfg
	succeeded := 0
	r.Statuses = map[string]int{}
	for i, o := range ops {
		r.Statuses[statusName(o.status)]++
		r.ok[i] = o.ok
		if o.ok {
			succeeded++
		}
	}
	if r.Ops > 0 {
		r.Amplification = float64(r.ServerRequests) / float64(r.Ops)
		r.SuccessRate = float64(succeeded) / float64(r.Ops)
	}
	warm := time.Duration(0)
	if !rp.sc.outage {
		warm = min(10*time.Second, rp.sc.duration/4)
	}
	if window := rp.sc.duration - warm; window > 0 {
		done := 0
		for _, o := range ops {
			if end := o.start + o.latency; o.ok && end >= warm && end < rp.sc.duration {
				done++
			}
		}
		r.GoodputPerS = float64(done) / window.Seconds()
	}
	r.P50Ms, r.P99Ms = latencyPercentiles(ops)
	r.Admitted = st.Admitted
	if cfg.Capacity.MaxConcurrent > 0 {
		// A pushback answer costs what a shed does: an answer, no work.
		r.Work = float64(st.Admitted) + cfg.ShedCost*float64(st.CapacityRejections+st.PushbackRefused)
	} else {
		r.Work = float64(st.Requests)
	}
	r.WastedWork = max(0, r.Work-float64(succeeded))

	if rp.sc.outage {
		rec := recovery(r.Goodput, cfg.Bin, cfg.OutageStart, cfg.OutageEnd, rp.sc.duration)
		r.RecoveryS = &rec
		pr.mu.Lock()
		ra := pr.lastRA
		pr.mu.Unlock()
		r.LastRetryAfterS = &ra
		in := rec >= 0 && rec <= max(0.5, ra)
		r.RecoveredInTime = &in
		l := windowLoad(r.Load, cfg.Bin, rp.arrivals, cfg.OutageStart, cfg.OutageEnd)
		r.OutageLoad = &l
	} else {
		l := windowLoad(r.Load, cfg.Bin, rp.arrivals, warm, rp.sc.duration)
		r.WarmLoad = &l
	}

	r.Disturbed = r.LateOps > 0 || r.AcceptErrors > 0 || r.Overran
	r.Invalid = r.AcceptErrors > 0 || r.Overran ||
		(r.Ops > 0 && float64(r.LateOps) > cfg.MaxDisturbed*float64(r.Ops))
}

// statusName names an answer's status in Result.Statuses.
func statusName(status int) string {
	if status == 0 {
		return "error"
	}
	return strconv.Itoa(status)
}

// windowLoad returns the requests that arrived in [from, to) ÷ the
// operations started in it, from the per-bin load (rounded to whole bins).
func windowLoad(load []int, bin time.Duration, arrivals []arrival, from, to time.Duration) float64 {
	first, last := int(from/bin), int(to/bin)
	reqs := 0
	for i := first; i < last && i < len(load); i++ {
		reqs += load[i]
	}
	lo, hi := time.Duration(first)*bin, time.Duration(last)*bin
	n := 0
	for _, a := range arrivals {
		if a.at >= lo && a.at < hi {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(reqs) / float64(n)
}

// Compare fills in, for every result, the comparison with the strategy
// "none" in the same scenario at the same scale: VsNone, Harm, Harmful and
// NoneGoodputPerS. It returns results.
func Compare(results []Result) []Result {
	type key struct {
		scale, scenario string
		p, factor       float64
	}
	none := map[key]*Result{}
	for i := range results {
		r := &results[i]
		if r.Strategy == "none" {
			none[key{r.Scale, r.Scenario, r.P, r.Factor}] = r
		}
	}
	for i := range results {
		r := &results[i]
		n := none[key{r.Scale, r.Scenario, r.P, r.Factor}]
		if n == nil {
			continue
		}
		r.NoneGoodputPerS = n.GoodputPerS
		if r.Invalid || n.Invalid || r.NoLedger || len(r.ok) != len(n.ok) {
			continue
		}
		vs := 100 * (r.SuccessRate - n.SuccessRate)
		harm := 0
		for j := range r.ok {
			if n.ok[j] && !r.ok[j] {
				harm++
			}
		}
		r.VsNone, r.Harm = &vs, &harm
		r.Harmful = harmful(*r, *n)
	}
	return results
}

// harmful is the one meaning of harm in r's scenario, against none's
// result n, at the precision the tables print; never on a strategy that
// succeeded more than none. In an overload scenario, where which requests
// the server sheds moves with every extra request, it is goodput during
// the load below none's by more than harmShare (and by 1/s as printed);
// elsewhere, success below none's by more than harmPoints. The count of
// operations none completed and r failed (Harm) is for information.
func harmful(r, n Result) bool {
	succ := func(x Result) float64 { return printed(100*x.SuccessRate, 1) }
	if succ(r) > succ(n) {
		return false
	}
	if r.Scenario == ScenarioOverload {
		return r.GoodputPerS < (1-harmShare)*n.GoodputPerS && printed(r.GoodputPerS, 0) < printed(n.GoodputPerS, 0)
	}
	return 100*(r.SuccessRate-n.SuccessRate) < -harmPoints && succ(r) < succ(n)
}

// printed returns v as the tables print it with prec decimals, parsed
// back: comparisons made at the precision a reader sees.
func printed(v float64, prec int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', prec, 64), 64)
	return f
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
	recoveryLevel  = 0.95
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
