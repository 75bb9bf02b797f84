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
// from; the zero Config is not valid.
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
	// Progress, if not nil, receives a progress bar while the benchmark
	// runs (the command passes os.Stderr).
	Progress io.Writer
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

// DefaultConfig returns the configuration of `go run ./cmd/storm` with no
// flags: 25 clients × 10 operations/s (250 operations/s) against a server
// that serves 400 requests/s; a 12 s outage scenario with a 3 s outage from
// 3 s and a 1 % background failure rate; steady scenarios of 3 s at p = 0,
// 0.1, 0.3, 0.5 and 1; every strategy; 0.2 % lost responses; operations
// bounded by 3 s.
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
		Strategies: StrategyNames(),
		Seed:       1,
		Bin:        100 * time.Millisecond,
	}
}

// maxOps bounds the operations of one run, so that a mistyped flag cannot
// start an unbounded load.
const maxOps = 10_000_000

// Validate reports the first problem of c, or nil.
func (c Config) Validate() error {
	if len(c.Strategies) == 0 {
		return errors.New("storm: no strategy")
	}
	for _, name := range c.Strategies {
		if _, ok := lookupStrategy(name); !ok {
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
	case c.NoOutage && len(c.Ps) == 0:
		return errors.New("storm: no scenario (no outage and no p)")
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
	if len(c.Ps) > 0 && c.SteadyDuration <= 0 {
		return errors.New("storm: steady duration must be positive")
	}
	for _, p := range c.Ps {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("storm: p %v is not in [0, 1]", p)
		}
	}
	longest := max(c.Duration, c.SteadyDuration)
	if n := float64(c.Clients) * c.Rate * longest.Seconds(); n > maxOps {
		return fmt.Errorf("storm: %.0f operations per run is over the limit of %d", n, maxOps)
	}
	return nil
}

// scenario is one server behaviour under one load: the outage scenario, or a
// steady scenario at failure rate p.
type scenario struct {
	name     string // "outage" or "steady"
	p        float64
	duration time.Duration
	outage   bool // the window [outageStart, outageEnd) fails everything
}

// String describes sc, as in "outage p=0.01".
func (sc scenario) String() string {
	return sc.name + " p=" + strconv.FormatFloat(sc.p, 'g', -1, 64)
}

// scenarios lists the scenarios c asks for, the outage one first.
func (c Config) scenarios() []scenario {
	var out []scenario
	if !c.NoOutage {
		out = append(out, scenario{name: ScenarioOutage, p: c.OutageP, duration: c.Duration, outage: true})
	}
	for _, p := range c.Ps {
		out = append(out, scenario{name: ScenarioSteady, p: p, duration: c.SteadyDuration})
	}
	return out
}

// Scenario names, as in Result.Scenario.
const (
	ScenarioOutage = "outage"
	ScenarioSteady = "steady"
)
