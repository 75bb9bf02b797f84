package fakeserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// Scenario describes how the server behaves: its idempotency policy, its faults
// and its capacity. The same struct is read from JSON (the -scenario file of
// cmd/fakeserver and PUT /_fake/scenario) and passed in Go with WithScenario, so
// a test in any language drives the server with one model. The zero Scenario is
// a healthy server with the defaults documented on each field.
type Scenario struct {
	// Seed seeds the random draws (failure rate and mix) of every route. Default 0.
	// The same seed and the same order of requests on a route give the same outcomes.
	Seed uint64 `json:"seed,omitempty"`
	// Mode is the storage policy for answers given after execution started.
	// Default ModeIETF.
	Mode Mode `json:"mode,omitempty"`
	// MismatchStatus answers a key reused with a different payload: 422 (default)
	// or 409.
	MismatchStatus int `json:"mismatch_status,omitempty"`
	// TTL is how long an idempotency record lives after its answer was
	// stored. Default 24h.
	TTL Duration `json:"ttl,omitempty"`
	// MaxRecords bounds the idempotency store; a new claim that finds it full
	// evicts the oldest completed records. It is read by New and Reset, not by
	// SetScenario. Default 1,000,000.
	MaxRecords int `json:"max_records,omitempty"`
	// RequireKey makes Idempotency-Key mandatory on every POST (400 without it).
	// Default false; Route.RequireKey sets it per route.
	RequireKey bool `json:"require_key,omitempty"`
	// InProgressRetryAfter is the Retry-After of a 409 answered while the key is
	// in progress, rounded up to whole seconds. Default 1s.
	InProgressRetryAfter Duration `json:"in_progress_retry_after,omitempty"`
	// Outages are windows, relative to the scenario's start, in which every API
	// request fails. Default none.
	Outages []Outage `json:"outages,omitempty"`
	// Capacity, when set, limits how many requests are in service at once.
	// Default nil: unlimited.
	Capacity *Capacity `json:"capacity,omitempty"`
	// Routes script faults per route. A request uses the first route whose Match
	// matches it; a request that matches none gets no fault. Default none.
	Routes []Route `json:"routes,omitempty"`
}

// Mode is the idempotency storage policy for answers given once execution of a
// request started (after its key was claimed).
type Mode string

const (
	// ModeIETF stores successes and final client errors; a transient failure
	// (5xx, 408, 409, 425, 429, a reset or a hang) releases the key, so a retry
	// executes again (what the IETF idempotency-key draft asks). It is the default.
	ModeIETF Mode = "ietf"
	// ModeStripe stores whatever was answered once execution started, 5xx
	// included (Stripe replays its 500s); only 429 and dropped connections are
	// not stored.
	ModeStripe Mode = "stripe"
)

// Route scripts the faults of the requests it matches.
//
// Each arriving request that passed admission (outages, capacity) takes one
// outcome: the next entry of Script while any remain, then one random draw:
// FailureRate first, then the Mix entries by Probability, else no fault.
type Route struct {
	// Match selects requests: "METHOD /path/pattern", "/path/pattern" (any
	// method) or "" or "*" (everything). A pattern segment "*" or "{name}"
	// matches any one segment, e.g. "POST /v1/charges", "GET /v1/{c}/{id}".
	Match string `json:"match,omitempty"`
	// RequireKey makes Idempotency-Key mandatory on POSTs of this route.
	RequireKey bool `json:"require_key,omitempty"`
	// Script is the queue of outcomes consumed, in order, by arriving requests.
	Script []Fault `json:"script,omitempty"`
	// FailureRate is the probability, in [0,1], that a request fails before the
	// effect with FailureStatus. Default 0.
	FailureRate float64 `json:"failure_rate,omitempty"`
	// FailureStatus is the status of FailureRate failures. Default 503.
	FailureStatus int `json:"failure_status,omitempty"`
	// Mix is the default mix after the script: each entry happens with its
	// Probability; the probabilities and FailureRate add up to at most 1.
	Mix []Fault `json:"mix,omitempty"`
	// Draw says how the random outcome (FailureRate, Mix) is drawn:
	// DrawStream (default), one random stream in arrival order, or
	// DrawOperation, a hash of the request's operation and attempt number.
	Draw Draw `json:"draw,omitempty"`
	// OperationHeader names the request header that identifies a request's
	// operation for DrawOperation. Default DefaultOperationHeader.
	OperationHeader string `json:"operation_header,omitempty"`
	// Latency, if set, delays every request of the route by a latency drawn
	// from it (see LatencyDist), like its fate.
	Latency *LatencyDist `json:"latency,omitempty"`
}

// FaultKind names what a fault does to a request.
type FaultKind string

// The fault kinds. Faults before the effect happen after the idempotency key was
// claimed (a replay or a conflict suffers them too); faults after the effect act
// on the transmission of whatever response the request got.
const (
	// FaultNone serves the request normally (after Latency, if set).
	FaultNone FaultKind = "none"
	// FaultStatus answers Status (default 503) with problem details, Retry-After
	// and Headers, before the effect.
	FaultStatus FaultKind = "status"
	// FaultLatency waits Latency, then serves the request normally.
	FaultLatency FaultKind = "latency"
	// FaultHang holds the request (and its key, in progress) until the client
	// gives up or the server closes, then drops the connection.
	FaultHang FaultKind = "hang"
	// FaultReset resets the connection before the effect.
	FaultReset FaultKind = "reset"
	// FaultLostResponse commits the effect and the idempotency record, then
	// closes the connection without a response.
	FaultLostResponse FaultKind = "lost_response"
	// FaultSlowBody sends the response body in ten chunks over BodyDuration.
	FaultSlowBody FaultKind = "slow_body"
	// FaultTruncatedBody sends the headers and half the body, then closes.
	FaultTruncatedBody FaultKind = "truncated_body"
	// FaultMalformedBody sends a complete response whose body is not valid JSON.
	FaultMalformedBody FaultKind = "malformed_body"
)

// Fault is one scripted or drawn outcome.
type Fault struct {
	// Kind is what happens. Default FaultNone.
	Kind FaultKind `json:"kind,omitempty"`
	// Status is the status of a FaultStatus. Default 503.
	Status int `json:"status,omitempty"`
	// RetryAfter, when positive, adds Retry-After to a FaultStatus answer, in
	// whole seconds rounded up (or as an HTTP date, see RetryAfterDate).
	RetryAfter Duration `json:"retry_after,omitempty"`
	// RetryAfterDate writes Retry-After as an HTTP date (now + RetryAfter).
	RetryAfterDate bool `json:"retry_after_date,omitempty"`
	// Headers are added to a FaultStatus answer, verbatim.
	Headers map[string]string `json:"headers,omitempty"`
	// Latency is waited before the request is handled, whatever the Kind.
	Latency Duration `json:"latency,omitempty"`
	// BodyDuration is the time a FaultSlowBody takes to send the body.
	// Default 1s.
	BodyDuration Duration `json:"body_duration,omitempty"`
	// Count repeats a Script entry this many times. Default 1.
	Count int `json:"count,omitempty"`
	// Probability is the chance of a Mix entry, in [0,1].
	Probability float64 `json:"probability,omitempty"`
}

// Outage is a window in which every API request fails before anything else
// happens (no key is claimed, no script entry is consumed).
type Outage struct {
	// Start is the beginning of the window, relative to the scenario's start.
	Start Duration `json:"start"`
	// End is the end of the window (exclusive); it must be after Start.
	End Duration `json:"end"`
	// Status is the answer during the window. Default 503.
	Status int `json:"status,omitempty"`
	// RetryAfter, when positive, adds Retry-After (whole seconds, rounded up).
	RetryAfter Duration `json:"retry_after,omitempty"`
}

// Capacity models a server that can serve MaxConcurrent requests at once, each
// holding its slot for at least ServiceTime. A request that finds every slot
// taken waits in a queue of at most Queue requests; beyond it, or after
// QueueTimeout, it is shed with 503.
type Capacity struct {
	// MaxConcurrent is the number of requests in service at once; it must be
	// positive.
	MaxConcurrent int `json:"max_concurrent"`
	// ServiceTime is added to every request while it holds a slot. Default 0.
	ServiceTime Duration `json:"service_time,omitempty"`
	// Queue is how many requests may wait for a slot. Default 0: shed at once.
	Queue int `json:"queue,omitempty"`
	// QueueTimeout sheds a request that waited this long. Default 0: wait until
	// the client gives up.
	QueueTimeout Duration `json:"queue_timeout,omitempty"`
	// RetryAfter, when positive, adds Retry-After to the 503 (whole seconds,
	// rounded up). Default 0: no header.
	RetryAfter Duration `json:"retry_after,omitempty"`
	// ShedCost is the work of shedding a request, as a share of ServiceTime
	// in [0, 1]: each shed request adds ShedCost × ServiceTime to a debt that
	// the next admitted requests pay by holding their slots that much longer
	// (at most 4 × ServiceTime more each), as when refusing requests takes
	// the CPU that serving them needs. Default 0: shedding is free.
	ShedCost float64 `json:"shed_cost,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("250ms", "1.5s", "24h"); it also reads a JSON number as seconds.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '"' {
		var secs float64
		if err := json.Unmarshal(b, &secs); err != nil {
			return fmt.Errorf("fakeserver: duration %s: want a string like \"1.5s\" or a number of seconds", b)
		}
		if math.IsNaN(secs) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("fakeserver: duration %s out of range", b)
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("fakeserver: duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("fakeserver: duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// ParseScenario reads a Scenario from JSON. Unknown fields are an error, so a
// misspelt field does not pass silently. The result is validated.
func ParseScenario(data []byte) (Scenario, error) {
	return ReadScenario(bytes.NewReader(data))
}

// ReadScenario reads a Scenario from JSON in r, like ParseScenario.
func ReadScenario(r io.Reader) (Scenario, error) {
	var sc Scenario
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return Scenario{}, fmt.Errorf("fakeserver: scenario: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Scenario{}, errors.New("fakeserver: scenario: trailing data after the JSON object")
	}
	if err := sc.Validate(); err != nil {
		return Scenario{}, err
	}
	return sc, nil
}

// Validate reports the first problem of sc, as an error prefixed with
// "fakeserver: scenario: " and the path of the field, or nil.
func (sc Scenario) Validate() error {
	bad := func(path, format string, args ...any) error {
		return fmt.Errorf("fakeserver: scenario: %s: %s", path, fmt.Sprintf(format, args...))
	}
	switch sc.Mode {
	case "", ModeIETF, ModeStripe:
	default:
		return bad("mode", "unknown mode %q (want %q or %q)", sc.Mode, ModeIETF, ModeStripe)
	}
	switch sc.MismatchStatus {
	case 0, http.StatusConflict, http.StatusUnprocessableEntity:
	default:
		return bad("mismatch_status", "%d (want 409 or 422)", sc.MismatchStatus)
	}
	if sc.TTL < 0 || sc.MaxRecords < 0 || sc.InProgressRetryAfter < 0 {
		return bad("ttl/max_records/in_progress_retry_after", "must not be negative")
	}
	for i, o := range sc.Outages {
		p := fmt.Sprintf("outages[%d]", i)
		if o.Start < 0 || o.End <= o.Start {
			return bad(p, "want 0 <= start < end, got %v..%v", time.Duration(o.Start), time.Duration(o.End))
		}
		if err := checkStatus(o.Status); err != nil {
			return bad(p+".status", "%v", err)
		}
	}
	if c := sc.Capacity; c != nil {
		if c.MaxConcurrent <= 0 {
			return bad("capacity.max_concurrent", "must be positive, got %d", c.MaxConcurrent)
		}
		if c.Queue < 0 || c.ServiceTime < 0 || c.QueueTimeout < 0 || c.RetryAfter < 0 {
			return bad("capacity", "queue and durations must not be negative")
		}
		if !(c.ShedCost >= 0 && c.ShedCost <= 1) {
			return bad("capacity.shed_cost", "%v not in [0,1]", c.ShedCost)
		}
	}
	for i, r := range sc.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		if _, err := parseMatch(r.Match); err != nil {
			return bad(p+".match", "%v", err)
		}
		if r.FailureRate < 0 || r.FailureRate > 1 {
			return bad(p+".failure_rate", "%v not in [0,1]", r.FailureRate)
		}
		if err := checkStatus(r.FailureStatus); err != nil {
			return bad(p+".failure_status", "%v", err)
		}
		switch r.Draw {
		case "", DrawStream, DrawOperation:
		default:
			return bad(p+".draw", "unknown draw %q (want %q or %q)", r.Draw, DrawStream, DrawOperation)
		}
		if h := r.OperationHeader; h != "" && strings.ContainsAny(h, " :\r\n") {
			return bad(p+".operation_header", "invalid header name %q", h)
		}
		if r.Latency != nil {
			if err := r.Latency.validate(); err != nil {
				return bad(p+".latency", "%v", err)
			}
		}
		for j, f := range r.Script {
			if err := f.validate(); err != nil {
				return bad(fmt.Sprintf("%s.script[%d]", p, j), "%v", err)
			}
		}
		total := r.FailureRate
		for j, f := range r.Mix {
			if err := f.validate(); err != nil {
				return bad(fmt.Sprintf("%s.mix[%d]", p, j), "%v", err)
			}
			if f.Probability < 0 || f.Probability > 1 {
				return bad(fmt.Sprintf("%s.mix[%d].probability", p, j), "%v not in [0,1]", f.Probability)
			}
			total += f.Probability
		}
		if total > 1+1e-9 {
			return bad(p, "failure_rate and mix probabilities add up to %v > 1", total)
		}
	}
	return nil
}

func (f Fault) validate() error {
	switch f.Kind {
	case "", FaultNone, FaultStatus, FaultLatency, FaultHang, FaultReset,
		FaultLostResponse, FaultSlowBody, FaultTruncatedBody, FaultMalformedBody:
	default:
		return fmt.Errorf("unknown kind %q", f.Kind)
	}
	if err := checkStatus(f.Status); err != nil {
		return err
	}
	if f.RetryAfter < 0 || f.Latency < 0 || f.BodyDuration < 0 || f.Count < 0 {
		return errors.New("durations and count must not be negative")
	}
	for k := range f.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return fmt.Errorf("invalid header name %q", k)
		}
	}
	return nil
}

func checkStatus(code int) error {
	if code != 0 && (code < 100 || code > 599) {
		return fmt.Errorf("status %d not in 100..599", code)
	}
	return nil
}

// clone returns a deep copy of sc, so that later changes to the caller's slices
// and maps do not reach the server.
func (sc Scenario) clone() Scenario {
	out := sc
	out.Outages = append([]Outage(nil), sc.Outages...)
	if sc.Capacity != nil {
		c := *sc.Capacity
		out.Capacity = &c
	}
	out.Routes = make([]Route, len(sc.Routes))
	for i, r := range sc.Routes {
		out.Routes[i] = r.clone()
	}
	if len(sc.Routes) == 0 {
		out.Routes = nil
	}
	return out
}

func (r Route) clone() Route {
	out := r
	out.Script = cloneFaults(r.Script)
	out.Mix = cloneFaults(r.Mix)
	if r.Latency != nil {
		l := *r.Latency
		out.Latency = &l
	}
	return out
}

func cloneFaults(fs []Fault) []Fault {
	if fs == nil {
		return nil
	}
	out := make([]Fault, len(fs))
	for i, f := range fs {
		out[i] = f
		if f.Headers != nil {
			out[i].Headers = make(map[string]string, len(f.Headers))
			for k, v := range f.Headers {
				out[i].Headers[k] = v
			}
		}
	}
	return out
}
