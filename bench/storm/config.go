package storm

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Config describes a storm benchmark: the load, the server, the scenarios
// and the strategies. DefaultConfig returns the values the command starts
// from (it adds an overload scenario and runs fewer strategies); the zero
// Config is not valid.
//
// Every strategy of a scenario gets a fresh server and exactly the same load:
// the same arrival times, assigned to the same clients, derived from Seed.
type Config struct {
	// Clients is the number of independent clients. Each has its own
	// *http.Client and so its own retry state (budget, breaker), as separate
	// processes would; they share one connection pool per strategy.
	Clients int
	// Rate is the number of operations each client starts per second, at a
	// steady pace (open loop: an operation starts on time whether or not the
	// client's earlier ones have finished).
	Rate float64
	// Duration is how long operations are started in the outage scenario.
	Duration time.Duration
	// OutageStart and OutageEnd delimit the outage of the outage scenario,
	// counted from the start of the load: every request in the window is
	// answered 503 at once.
	OutageStart, OutageEnd time.Duration
	// OutageP is the background failure rate of the outage scenario.
	OutageP float64
	// SteadyDuration is how long operations are started in each steady
	// scenario (no outage, failure rate p).
	SteadyDuration time.Duration
	// Ps are the failure rates of the steady scenarios, each in [0, 1]; none
	// skips them.
	Ps []float64
	// NoOutage skips the outage scenario.
	NoOutage bool
	// Lost is the probability that the server commits a request's effect and
	// then drops the connection without answering (a lost response), on top
	// of p (it is lowered to 1-p when p+Lost > 1). It is what makes retries
	// without a key create duplicates.
	Lost float64
	// OpTimeout bounds each operation, all attempts and waits included (the
	// caller's context deadline).
	OpTimeout time.Duration
	// Capacity is the server's capacity model.
	Capacity Capacity
	// Strategies names the strategies to run, in order (see Strategies).
	Strategies []string
	// Own are strategies of the user's own (see ReadPolicies), found by
	// name in Strategies before the built-in ones.
	Own []Strategy
	// Seed seeds the arrival schedule and the server's random draws.
	Seed uint64
	// Sequential runs the strategies of a scenario one after the other
	// instead of side by side. It only matters on real sockets; virtual runs
	// are always sequential.
	Sequential bool
	// Virtual runs against the fake server's in-process transport in
	// simulated time (testing/synctest) instead of loopback sockets; see
	// RunVirtual.
	Virtual bool
	// Bin is the width of the time bins of the load and goodput series.
	Bin time.Duration
	// Fates is how the server draws each request's failure: FatesOperation
	// (a hash of the operation and its attempt number, so that every
	// strategy's k-th attempt of an operation meets the same fate) or
	// FatesStream (one random stream in arrival order).
	Fates string
	// Scales lists the scales to run each scenario at: ScalePerClient (each
	// client its own *http.Client, so its own retry state) and ScaleShared
	// (one *http.Client for all clients: one process, one Transport). Both
	// get exactly the same arrivals.
	Scales []string
	// Ops, if positive, sets the number of operations of each steady and
	// overload scenario (their length follows from the offered rate); 0
	// uses SteadyDuration.
	Ops int
	// Overload lists the offered loads of the overload scenarios, as
	// multiples of the server's capacity (Capacity.PerSecond); none skips
	// them. The load is raised by adding clients of Rate operations per
	// second each.
	Overload []float64
	// ShedCost is the work of shedding a request, as a share of a served
	// request's (see fakeserver.Capacity.ShedCost).
	ShedCost float64
	// ShedRetryAfter is the Retry-After of the server's 503 when it sheds a
	// request (0: none).
	ShedRetryAfter time.Duration
	// OutageRetryAfter is the Retry-After of the server's 503 during the
	// outage (0: none).
	OutageRetryAfter time.Duration
	// FailRetryAfter is the Retry-After of the 503 a steady scenario's
	// failures carry (0: none). With p = 1/3 the steady scenario is a gray
	// backend: one of three behind a per-request balancer always answers
	// 503 with Retry-After.
	FailRetryAfter time.Duration
	// MaxConns bounds the connections each strategy's clients open to the
	// server on real sockets (http.Transport.MaxConnsPerHost of the
	// strategy's base transport); 0 derives it from the file-descriptor
	// limit and the number of strategies run side by side.
	MaxConns int
	// MaxDisturbed is the share of a run's operations that may start late
	// (see LateThreshold) before the run is reported invalid.
	MaxDisturbed float64
	// Pushback mounts the pushback middleware (package pushback, its
	// defaults) in front of every strategy's server, not only
	// resilient-pushback's.
	Pushback bool
	// Progress, if not nil, receives a progress bar while the benchmark
	// runs (the command passes os.Stderr).
	Progress io.Writer
	// NoTail skips the tail scenario (ScenarioTail), which the command runs
	// after the others; Tail configures it (Ops, Seed, Scales, OpTimeout
	// and Virtual apply to it too).
	NoTail bool
	Tail   TailConfig
}

// Capacity is the server's capacity: MaxConcurrent requests in service at
// once, each holding its slot for ServiceTime; a request that finds them all
// busy waits in a queue of at most Queue requests for at most QueueTimeout,
// and is shed with 503 beyond. The server so serves at most
// MaxConcurrent/ServiceTime requests per second, failed ones included
// (outage answers excepted: they cost nothing).
type Capacity struct {
	MaxConcurrent int
	ServiceTime   time.Duration
	Queue         int
	QueueTimeout  time.Duration
}

// PerSecond returns the most requests per second the capacity serves.
func (c Capacity) PerSecond() float64 {
	if c.ServiceTime <= 0 {
		return math.Inf(1)
	}
	return float64(c.MaxConcurrent) / c.ServiceTime.Seconds()
}

// DefaultConfig returns the storm's base configuration: 25 clients × 10
// operations/s (250 operations/s) against a server that serves 400
// requests/s; a 12 s outage scenario with a 3 s outage from
// 3 s and a 1 % background failure rate; steady scenarios of 3 s at p = 0,
// 0.1, 0.3, 0.5 and 1; every strategy; 0.2 % lost responses; operations
// bounded by 3 s. (The command adds an overload scenario at twice the
// server's capacity and runs CommandStrategies.)
func DefaultConfig() Config {
	return Config{
		Clients:        25,
		Rate:           10,
		Duration:       12 * time.Second,
		OutageStart:    3 * time.Second,
		OutageEnd:      6 * time.Second,
		OutageP:        0.01,
		SteadyDuration: 3 * time.Second,
		Ps:             []float64{0, 0.1, 0.3, 0.5, 1},
		Lost:           0.002,
		OpTimeout:      3 * time.Second,
		Capacity: Capacity{
			MaxConcurrent: 8,
			ServiceTime:   20 * time.Millisecond,
			Queue:         64,
			QueueTimeout:  100 * time.Millisecond,
		},
		Strategies:     StrategyNames(),
		Seed:           1,
		Bin:            100 * time.Millisecond,
		Fates:          FatesOperation,
		Scales:         []string{ScalePerClient},
		ShedCost:       0.1,
		ShedRetryAfter: time.Second,
		MaxDisturbed:   0.01,
		Tail:           DefaultTailConfig(),
	}
}

// SweepPs returns the failure rates of a sweep: 0, 0.1, …, 1.
func SweepPs() []float64 {
	ps := make([]float64, 11)
	for i := range ps {
		ps[i] = float64(i) / 10
	}
	return ps
}

// SweepOverload returns the overload factors of a sweep: 1.25 and 2 times
// the server's capacity.
func SweepOverload() []float64 { return []float64{1.25, 2} }

// GrayPs are the failure rates of the gray scenarios (-gray): one bad
// backend of 10, or of 3.
func GrayPs() []float64 { return []float64{0.1, 0.333} }

// Fates, as in Config.Fates.
const (
	FatesOperation = "operation"
	FatesStream    = "stream"
)

// Scales, as in Config.Scales and Result.Scale.
const (
	ScalePerClient = "per-client"
	ScaleShared    = "shared"
)

// maxOps bounds the operations of one run, so that a mistyped flag cannot
// start an unbounded load.
const maxOps = 10_000_000

// Validate reports the first problem of c, or nil.
func (c Config) Validate() error {
	if len(c.Strategies) == 0 {
		return errors.New("storm: no strategy")
	}
	for _, name := range c.Strategies {
		if _, ok := c.lookup(name); !ok {
			return fmt.Errorf("storm: unknown strategy %q (known: %v)", name, StrategyNames())
		}
	}
	return c.validateLoad()
}

// validateLoad is Validate without the strategies.
func (c Config) validateLoad() error {
	switch {
	case c.Clients < 1:
		return errors.New("storm: clients must be at least 1")
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return errors.New("storm: rate must be a positive number of operations per second per client")
	case c.OpTimeout <= 0:
		return errors.New("storm: op timeout must be positive")
	case c.Bin <= 0:
		return errors.New("storm: bin must be positive")
	case c.Lost < 0 || c.Lost > 1:
		return errors.New("storm: lost must be in [0, 1]")
	case c.Capacity.MaxConcurrent < 0 || c.Capacity.Queue < 0 || c.Capacity.ServiceTime < 0 || c.Capacity.QueueTimeout < 0:
		return errors.New("storm: capacity values must not be negative")
	case c.NoOutage && len(c.Ps) == 0 && len(c.Overload) == 0 && c.NoTail:
		return errors.New("storm: no scenario (no outage, no p, no overload)")
	case c.Fates != FatesOperation && c.Fates != FatesStream:
		return fmt.Errorf("storm: fates %q: want %q or %q", c.Fates, FatesOperation, FatesStream)
	case len(c.Scales) == 0:
		return errors.New("storm: no scale")
	case c.Ops < 0 || c.MaxConns < 0:
		return errors.New("storm: ops and max conns must not be negative")
	case !(c.ShedCost >= 0 && c.ShedCost <= 1):
		return errors.New("storm: shed cost must be in [0, 1]")
	case c.ShedRetryAfter < 0 || c.OutageRetryAfter < 0 || c.FailRetryAfter < 0:
		return errors.New("storm: Retry-After values must not be negative")
	case !(c.MaxDisturbed >= 0 && c.MaxDisturbed <= 1):
		return errors.New("storm: max disturbed must be in [0, 1]")
	}
	for _, s := range c.Scales {
		if s != ScalePerClient && s != ScaleShared {
			return fmt.Errorf("storm: scale %q: want %q or %q", s, ScalePerClient, ScaleShared)
		}
	}
	for _, f := range c.Overload {
		if !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("storm: overload factor %v must be positive", f)
		}
		if c.Capacity.MaxConcurrent == 0 || c.Capacity.ServiceTime == 0 {
			return errors.New("storm: an overload scenario needs a capacity (-capacity and -service-time)")
		}
	}
	if !c.NoOutage {
		switch {
		case c.Duration <= 0:
			return errors.New("storm: duration must be positive")
		case c.OutageStart < 0 || c.OutageEnd <= c.OutageStart || c.OutageEnd > c.Duration:
			return fmt.Errorf("storm: outage %v–%v must be a non-empty window within the duration %v", c.OutageStart, c.OutageEnd, c.Duration)
		case c.OutageP < 0 || c.OutageP > 1:
			return errors.New("storm: outage p must be in [0, 1]")
		}
	}
	if (len(c.Ps) > 0 || len(c.Overload) > 0) && c.SteadyDuration <= 0 && c.Ops == 0 {
		return errors.New("storm: steady duration must be positive")
	}
	for _, p := range c.Ps {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("storm: p %v is not in [0, 1]", p)
		}
	}
	for _, sc := range c.scenarios() {
		if n := float64(sc.clients) * c.Rate * sc.duration.Seconds(); n > maxOps {
			return fmt.Errorf("storm: %.0f operations in %s is over the limit of %d", n, sc, maxOps)
		}
		if sc.duration <= 0 {
			return fmt.Errorf("storm: %s has no load", sc)
		}
	}
	return nil
}

// scenario is one server behaviour under one load: the outage scenario, a
// steady scenario at failure rate p, or an overload scenario.
type scenario struct {
	name     string  // ScenarioOutage, ScenarioSteady or ScenarioOverload
	p        float64 // independent failure rate
	factor   float64 // overload: offered load ÷ the server's capacity
	clients  int     // how many clients of Config.Rate operations per second
	duration time.Duration
	outage   bool // the window [outageStart, outageEnd) fails everything
}

// String describes sc, as in "outage p=0.01" or "overload 2×".
func (sc scenario) String() string {
	if sc.name == ScenarioOverload {
		return sc.name + " " + strconv.FormatFloat(sc.factor, 'g', -1, 64) + "×"
	}
	return sc.name + " p=" + strconv.FormatFloat(sc.p, 'g', -1, 64)
}

// scenarios lists the scenarios c asks for: the outage one, the steady ones,
// then the overload ones.
func (c Config) scenarios() []scenario {
	var out []scenario
	if !c.NoOutage {
		out = append(out, scenario{name: ScenarioOutage, p: c.OutageP, clients: c.Clients, duration: c.Duration, outage: true})
	}
	for _, p := range c.Ps {
		out = append(out, scenario{name: ScenarioSteady, p: p, clients: c.Clients, duration: c.pointDuration(c.Clients)})
	}
	for _, f := range c.Overload {
		clients := max(1, int(math.Ceil(f*c.Capacity.PerSecond()/c.Rate)))
		out = append(out, scenario{name: ScenarioOverload, factor: f, clients: clients, duration: c.pointDuration(clients)})
	}
	return out
}

// pointDuration is how long the load of a steady or overload scenario with
// clients clients lasts: long enough for c.Ops operations, or
// SteadyDuration.
func (c Config) pointDuration(clients int) time.Duration {
	if c.Ops > 0 {
		// Each client starts one operation per period from a phase within
		// the first period: m periods give each exactly m.
		m := math.Ceil(float64(c.Ops) / float64(clients))
		return time.Duration(m / c.Rate * float64(time.Second))
	}
	return c.SteadyDuration
}

// Scenario names, as in Result.Scenario.
const (
	ScenarioOutage   = "outage"
	ScenarioSteady   = "steady"
	ScenarioOverload = "overload"
	// ScenarioTarget is a -target's own behaviour under a steady load, for
	// a server without the fakeserver's admin API (no fault injected).
	ScenarioTarget = "target"
)
