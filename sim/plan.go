package sim

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"time"
)

// Plan is one schedule: the client's configuration, the operations and
// every fault, all drawn from Seed by NewPlan. It is plain data (JSON), so
// that the shrinker can remove faults from it and a replay can run a shrunk
// plan that no seed gives.
type Plan struct {
	Seed uint64 `json:"seed"`

	// The server.
	IgnoreKeys  bool          `json:"ignore_keys,omitempty"` // a server that ignores Idempotency-Key
	Stripe      bool          `json:"stripe,omitempty"`      // fakeserver.ModeStripe, else ModeIETF
	ServerTTL   time.Duration `json:"server_ttl"`            // how long the server keeps a key
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`

	// The client.
	MaxAttempts    int           `json:"max_attempts"`
	BackoffBase    time.Duration `json:"backoff_base"`
	BackoffMax     time.Duration `json:"backoff_max"`
	AttemptTimeout time.Duration `json:"attempt_timeout,omitempty"`
	RetryAfterMax  time.Duration `json:"retry_after_max,omitempty"`
	KeyRetention   time.Duration `json:"key_retention"`
	Declared       bool          `json:"declared,omitempty"` // WithDedupingServer("sim")
	NoTokens       bool          `json:"no_tokens,omitempty"`
	// Hedge, if positive, hedges the requests that may be hedged (the
	// GET operations) after that delay (WithHedging), with up to Hedges
	// copies.
	Hedge  time.Duration `json:"hedge,omitempty"`
	Hedges int           `json:"hedges,omitempty"`

	// The Store: "" (none), "memory" or "bolt".
	Store       string       `json:"store,omitempty"`
	StoreFaults []StoreFault `json:"store_faults,omitempty"`

	// The network: the dials refused, and the dials whose connection
	// fails a write (numbered from 1 in dial order).
	DialRefused []int     `json:"dial_refused,omitempty"`
	WriteFaults []WireCut `json:"write_faults,omitempty"`

	Ops []Op `json:"ops"`

	// Crash, if set, ends the client process at an event; Resume runs a
	// new process that resumes the Store's pending operations.
	Crash  *Crash `json:"crash,omitempty"`
	Resume bool   `json:"resume,omitempty"`
	// ResumeAfter is the virtual time between the end of the first
	// process and the resumer.
	ResumeAfter time.Duration `json:"resume_after,omitempty"`
}

// Keying says where an operation's key comes from.
type Keying string

const (
	KeyMinted   Keying = "minted"   // the Transport mints one per call
	KeyExplicit Keying = "explicit" // ContextWithKey, the same for every caller
	KeyNamed    Keying = "named"    // ContextWithOperation with a Store
)

// Op is one logical operation: a POST to its own collection, /v1/NAME
// (through a redirect /r/NAME when Redirect is set), made by Callers
// concurrent callers; or, when Method is GET, a read of an object of the
// collection that does not exist (no effect; it may be hedged).
type Op struct {
	Name     string        `json:"name"`
	Method   string        `json:"method,omitempty"` // "" (POST) or GET
	Keying   Keying        `json:"keying"`
	Callers  int           `json:"callers"`
	Start    time.Duration `json:"start,omitempty"`
	Deadline time.Duration `json:"deadline,omitempty"`  // 0: none (then AttemptTimeout > 0)
	CancelAt time.Duration `json:"cancel_at,omitempty"` // the caller cancels; 0: never
	Redirect int           `json:"redirect,omitempty"`  // 307 or 308: the first hop redirects
	// Faults are the server's answers to the op's requests, in the order
	// they arrive (the k-th request gets Faults[k]; past the end, none).
	Faults []Fault `json:"faults,omitempty"`
}

// FaultKind names a server-side fault.
type FaultKind string

// The server-side faults. Those of the fakeserver act after the key is
// claimed (before or after the effect); Drop acts before the fakeserver sees
// the request.
const (
	FaultNone      FaultKind = ""
	FaultStatus    FaultKind = "status"    // Status, with RetryAfter if set, before the effect
	FaultReset     FaultKind = "reset"     // connection reset before the effect
	FaultLost      FaultKind = "lost"      // the effect is committed, the answer lost
	FaultHang      FaultKind = "hang"      // held until the client gives up
	FaultLatency   FaultKind = "latency"   // Delay before the request is handled
	FaultTruncated FaultKind = "truncated" // half the answer's body, then closed
	FaultSlowBody  FaultKind = "slowbody"  // the body over Delay
	FaultDrop      FaultKind = "drop"      // the connection is closed before the server handles it
)

// Fault is one server-side answer.
type Fault struct {
	Kind       FaultKind     `json:"kind,omitempty"`
	Status     int           `json:"status,omitempty"`
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	Delay      time.Duration `json:"delay,omitempty"`
}

// WireCut makes the Dial-th connection fail its writes after After bytes:
// the request is lost on its way (in part or whole).
type WireCut struct {
	Dial  int `json:"dial"`
	After int `json:"after"`
}

// StoreFault makes the N-th call (from 1) of Method ("claim" or "finish")
// on the operation Op fail (Freeze 0) or take Freeze, ignoring its context.
type StoreFault struct {
	Op     string        `json:"op"`
	Method string        `json:"method"`
	N      int           `json:"n"`
	Freeze time.Duration `json:"freeze,omitempty"`
}

// Crash ends the first process at its Event-th event (a base round trip or
// a Store call, counted from 1), before the event happens or just after.
type Crash struct {
	Event int  `json:"event"`
	After bool `json:"after,omitempty"`
}

// JSON returns p as one line of JSON.
func (p *Plan) JSON() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // cannot happen: a Plan is plain data
	}
	return string(b)
}

// ParsePlan reads a plan written by Plan.JSON.
func ParsePlan(s string) (*Plan, error) {
	p := new(Plan)
	if err := json.Unmarshal([]byte(s), p); err != nil {
		return nil, err
	}
	return p, nil
}

// NewPlan draws the schedule of seed. The same seed gives the same plan.
func NewPlan(seed uint64) *Plan {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &Plan{Seed: seed}
	chance := func(num, den int) bool { return r.IntN(den) < num }
	pick := func(ds ...time.Duration) time.Duration { return ds[r.IntN(len(ds))] }

	p.IgnoreKeys = chance(1, 5)
	p.Stripe = chance(1, 3)
	p.MaxAttempts = 1 + r.IntN(6)
	p.BackoffBase = pick(0, time.Millisecond, 10*time.Millisecond, 100*time.Millisecond)
	p.BackoffMax = p.BackoffBase * time.Duration(1+r.IntN(20))
	if chance(1, 3) {
		p.AttemptTimeout = pick(5*time.Millisecond, 50*time.Millisecond, 500*time.Millisecond, 2*time.Second)
	}
	if chance(1, 3) {
		p.RetryAfterMax = pick(time.Nanosecond, 500*time.Millisecond, 3*time.Second)
	}
	// Longer than any one call lasts: within a call the Transport does not
	// check a key's age (see known_test.go); across a crash or a resume it
	// does (ResumeAfter below may pass it).
	p.KeyRetention = pick(time.Minute, time.Hour)
	// The server keeps keys at least as long as the client assumes: with
	// a shorter server TTL no client can avoid a second effect.
	p.ServerTTL = p.KeyRetention * time.Duration(1+r.IntN(3))
	p.IdleTimeout = pick(0, 0, time.Millisecond, 20*time.Millisecond, 300*time.Millisecond)
	p.Declared = !p.IgnoreKeys && chance(1, 4)
	p.NoTokens = chance(1, 4)
	if chance(1, 4) {
		p.Hedge = pick(time.Millisecond, 20*time.Millisecond, 300*time.Millisecond)
		p.Hedges = 1 + r.IntN(2)
	}
	if !p.IgnoreKeys && chance(1, 2) {
		p.Store = "memory"
		if chance(1, 24) {
			p.Store = "bolt"
		}
	}
	for d := 1; d <= 6; d++ {
		switch {
		case chance(1, 12):
			p.DialRefused = append(p.DialRefused, d)
		case chance(1, 12):
			// Up to about three requests: a cut may fall in a request
			// sent on a reused connection.
			p.WriteFaults = append(p.WriteFaults, WireCut{Dial: d, After: r.IntN(700)})
		}
	}

	nops := 1 + r.IntN(3)
	for i := range nops {
		op := Op{Name: "op" + string(rune('a'+i)), Callers: 1, Keying: KeyMinted}
		switch {
		case chance(1, 6):
			op.Method = http.MethodGet // unkeyed: hedged when Hedge is set
		case p.Store != "" && chance(2, 3):
			op.Keying = KeyNamed
		case !p.IgnoreKeys && chance(1, 3):
			op.Keying = KeyExplicit
		}
		if op.Keying != KeyMinted && chance(1, 3) {
			op.Callers = 2 + r.IntN(2)
		}
		op.Start = time.Duration(r.IntN(5)) * 10 * time.Millisecond
		op.Deadline = pick(0, 20*time.Millisecond, 200*time.Millisecond, time.Second, 5*time.Second, 30*time.Second)
		if op.Deadline == 0 && p.AttemptTimeout == 0 {
			p.AttemptTimeout = 2 * time.Second // every call must end
		}
		if chance(1, 8) {
			op.CancelAt = time.Duration(1+r.IntN(1000)) * time.Millisecond
		}
		if chance(1, 6) {
			op.Redirect = 307 + r.IntN(2)
		}
		nf := r.IntN(6)
		for range nf {
			op.Faults = append(op.Faults, drawFault(r, op.Deadline, p.AttemptTimeout))
		}
		p.Ops = append(p.Ops, op)
	}
	if p.Store != "" {
		for _, op := range p.Ops {
			if op.Keying == KeyNamed && chance(1, 8) {
				f := StoreFault{Op: op.Name, Method: pickString(r, "claim", "finish"), N: 1 + r.IntN(2)}
				if chance(1, 2) {
					// Shorter than the key retention: a longer freeze makes the
					// Transport send a key past it (see known_test.go).
					f.Freeze = pick(10*time.Millisecond, time.Second, 20*time.Second)
				}
				p.StoreFaults = append(p.StoreFaults, f)
			}
		}
		if chance(1, 3) {
			p.Crash = &Crash{Event: 1 + r.IntN(12), After: chance(1, 2)}
		}
		p.Resume = p.Crash != nil || chance(1, 2)
		p.ResumeAfter = pick(0, time.Second, 2*time.Minute, 3*time.Hour)
	}
	return p
}

func pickString(r *rand.Rand, ss ...string) string { return ss[r.IntN(len(ss))] }

// drawFault draws one server-side answer; its delays cluster around the
// call's deadline and the attempt timeout.
func drawFault(r *rand.Rand, deadline, attemptTimeout time.Duration) Fault {
	near := func() time.Duration {
		base := deadline
		if attemptTimeout > 0 && (base == 0 || r.IntN(2) == 0) {
			base = attemptTimeout
		}
		if base == 0 {
			base = time.Second
		}
		f := []float64{0.1, 0.5, 0.99, 1, 1.01, 2}[r.IntN(6)]
		return time.Duration(float64(base) * f)
	}
	switch r.IntN(12) {
	case 0, 1:
		return Fault{Kind: FaultStatus, Status: 503, RetryAfter: time.Duration(r.IntN(3)) * time.Second}
	case 2:
		return Fault{Kind: FaultStatus, Status: 429, RetryAfter: time.Duration(r.IntN(3)) * time.Second}
	case 3:
		return Fault{Kind: FaultStatus, Status: []int{500, 502, 504}[r.IntN(3)]}
	case 4:
		return Fault{Kind: FaultReset}
	case 5, 6:
		return Fault{Kind: FaultLost}
	case 7:
		return Fault{Kind: FaultHang}
	case 8:
		return Fault{Kind: FaultLatency, Delay: near()}
	case 9:
		return Fault{Kind: FaultTruncated}
	case 10:
		return Fault{Kind: FaultSlowBody, Delay: near()}
	}
	return Fault{Kind: FaultDrop}
}
