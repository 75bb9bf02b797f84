package fakeserver

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of the server's oracles since it started or was last
// Reset. Admin requests (/_fake/...) are not counted.
type Stats struct {
	// Started is when counting began: RequestsPerSecond[0] is the second after it.
	Started time.Time `json:"started"`
	// Requests counts API requests as they arrive, before anything can fail.
	Requests int64 `json:"requests"`
	// FirstAttempts counts requests with Retry-Attempt: 0.
	FirstAttempts int64 `json:"first_attempts"`
	// Retries counts requests with Retry-Attempt: N, N > 0.
	Retries int64 `json:"retries"`
	// UnlabeledAttempts counts requests without a valid Retry-Attempt
	// header: a bare client's, and resilient's first attempts (no header
	// means a first attempt).
	UnlabeledAttempts int64 `json:"unlabeled_attempts"`
	// Effects is the number of objects created (the ledger's length).
	Effects int `json:"effects"`
	// DuplicateEffects counts effects beyond the first under one
	// (principal, route, Idempotency-Key): 0 unless a record expired or was
	// evicted while its client was still retrying.
	DuplicateEffects int `json:"duplicate_effects"`
	// Replays counts stored responses replayed.
	Replays int64 `json:"replays"`
	// InProgressConflicts counts 409s answered because the key was in progress.
	InProgressConflicts int64 `json:"in_progress_conflicts"`
	// Mismatches counts keys reused with a different payload.
	Mismatches int64 `json:"mismatches"`
	// MissingKeys counts 400s for a missing, required Idempotency-Key.
	MissingKeys int64 `json:"missing_keys"`
	// BadRequests counts other requests refused by the API: an invalid key or
	// JSON body, a body too large, an unknown route or method.
	BadRequests int64 `json:"bad_requests"`
	// CapacityRejections counts requests shed with 503 by the capacity model.
	CapacityRejections int64 `json:"capacity_rejections"`
	// Admitted counts the API requests that reached the API: every one
	// that was not shed by the capacity model (with one, those that got a
	// slot). With CapacityRejections and Capacity.ShedCost, the work the
	// server did. Requests answered by the pushback middleware or an
	// admin endpoint are not counted.
	Admitted int64 `json:"admitted"`
	// PushbackRefused counts requests the pushback middleware answered in
	// place of the API (WithPushback): retries over the budget, and
	// requests shed for its MaxInFlight. They are counted in Requests, and
	// in nothing below the middleware (Admitted, CapacityRejections,
	// Faults).
	PushbackRefused int64 `json:"pushback_refused"`
	// PushbackHinted counts failure answers of the API to which the
	// middleware added pushback headers because the budget was exhausted.
	PushbackHinted int64 `json:"pushback_hinted"`
	// Faults counts injected faults by FaultKind, and outage answers under
	// "outage". Kinds never injected are absent.
	Faults map[string]int64 `json:"faults"`
	// InFlight is the number of API requests in the server now, queued for
	// capacity or in service.
	InFlight int64 `json:"in_flight"`
	// MaxInFlight is the largest InFlight seen.
	MaxInFlight int64 `json:"max_in_flight"`
	// Records is the number of idempotency records held.
	Records int `json:"records"`
	// RequestsPerSecond[i] counts the requests that arrived in second i after
	// Started (by the server's clock); it covers at most maxSeries seconds.
	RequestsPerSecond []int `json:"requests_per_second"`
}

// faultOutage is the Stats.Faults name of outage answers.
const faultOutage = "outage"

// numFaults is the number of names faultNames returns.
const numFaults = 9

// faultNames lists the kinds counted in Stats.Faults, by counter index.
func faultNames() [numFaults]string {
	return [numFaults]string{
		string(FaultStatus), string(FaultLatency), string(FaultHang), string(FaultReset),
		string(FaultLostResponse), string(FaultSlowBody), string(FaultTruncatedBody),
		string(FaultMalformedBody), faultOutage,
	}
}

// maxSeries bounds RequestsPerSecond (about 12 days).
const maxSeries = 1 << 20

// stats holds the counters. Counters are atomics; the time series has its own
// mutex.
type stats struct {
	requests, first, retries, unlabeled         atomic.Int64
	replays, conflicts, mismatches, missingKeys atomic.Int64
	badRequests, shed, inFlight, maxInFlight    atomic.Int64
	admitted                                    atomic.Int64
	faults                                      [numFaults]atomic.Int64

	mu      sync.Mutex
	started time.Time // guarded by mu
	series  []int     // guarded by mu
}

// arrive counts a request arriving at now, labelled by its Retry-Attempt.
func (st *stats) arrive(now time.Time, retryAttempt string) {
	st.requests.Add(1)
	switch n, err := strconv.Atoi(retryAttempt); {
	case retryAttempt == "" || err != nil || n < 0:
		st.unlabeled.Add(1)
	case n == 0:
		st.first.Add(1)
	default:
		st.retries.Add(1)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	i := int(now.Sub(st.started) / time.Second)
	if i < 0 || i >= maxSeries {
		return
	}
	if i >= len(st.series) {
		st.series = append(st.series, make([]int, i+1-len(st.series))...)
	}
	st.series[i]++
}

// enter counts a request in service; call leave when it is done.
func (st *stats) enter() {
	n := st.inFlight.Add(1)
	for {
		m := st.maxInFlight.Load()
		if n <= m || st.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (st *stats) leave() { st.inFlight.Add(-1) }

// fault counts one injected fault of the named kind.
func (st *stats) fault(name string) {
	for i, n := range faultNames() {
		if n == name {
			st.faults[i].Add(1)
			return
		}
	}
}

// reset zeroes the counters (except InFlight) and restarts the series at now.
func (st *stats) reset(now time.Time) {
	for _, c := range []*atomic.Int64{
		&st.requests, &st.first, &st.retries, &st.unlabeled, &st.replays, &st.conflicts,
		&st.mismatches, &st.missingKeys, &st.badRequests, &st.shed, &st.admitted,
	} {
		c.Store(0)
	}
	st.maxInFlight.Store(st.inFlight.Load())
	for i := range st.faults {
		st.faults[i].Store(0)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.started, st.series = now, nil
}

// snapshot reads the counters; the caller fills in the ledger and records fields.
func (st *stats) snapshot() Stats {
	s := Stats{
		Requests:            st.requests.Load(),
		FirstAttempts:       st.first.Load(),
		Retries:             st.retries.Load(),
		UnlabeledAttempts:   st.unlabeled.Load(),
		Replays:             st.replays.Load(),
		InProgressConflicts: st.conflicts.Load(),
		Mismatches:          st.mismatches.Load(),
		MissingKeys:         st.missingKeys.Load(),
		BadRequests:         st.badRequests.Load(),
		CapacityRejections:  st.shed.Load(),
		Admitted:            st.admitted.Load(),
		InFlight:            st.inFlight.Load(),
		MaxInFlight:         st.maxInFlight.Load(),
		Faults:              make(map[string]int64),
	}
	for i, n := range faultNames() {
		if v := st.faults[i].Load(); v > 0 {
			s.Faults[n] = v
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s.Started = st.started
	s.RequestsPerSecond = append([]int{}, st.series...)
	return s
}
