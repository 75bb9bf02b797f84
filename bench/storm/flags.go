package storm

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Output says what the command prints and writes.
type Output struct {
	// Format is "headline" (the first screen, WriteHeadline; the
	// command's default), "markdown" (every table) or "json".
	Format string
	// Dir, if not empty, receives the plots (PNG and SVG) and the results
	// (storm.md and storm.json, with the series).
	Dir string
	// Series includes the per-bin load and goodput series in the JSON.
	Series bool
	// Reproduce lists published figures to reproduce instead of the storm:
	// "brooker2015", "brooker2022" (see Reproduce).
	Reproduce []string
}

// RegisterFlags defines on fs a flag for each field of c and o that a user
// sets, with c's and o's values as defaults. Call it before fs.Parse; the
// parsed values land in c and o.
func RegisterFlags(fs *flag.FlagSet, c *Config, o *Output) {
	fs.IntVar(&c.Clients, "clients", c.Clients, "number of independent clients (each with its own retry state)")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "operations per second started by each client")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "length of the load in the outage scenario")
	fs.Func("outage", fmt.Sprintf("outage window START-END within the load (default %v-%v)", c.OutageStart, c.OutageEnd), func(s string) error {
		a, b, ok := strings.Cut(s, "-")
		if !ok {
			return errors.New("want START-END, e.g. 3s-6s")
		}
		start, err := time.ParseDuration(strings.TrimSpace(a))
		if err != nil {
			return err
		}
		end, err := time.ParseDuration(strings.TrimSpace(b))
		if err != nil {
			return err
		}
		c.OutageStart, c.OutageEnd = start, end
		return nil
	})
	fs.Float64Var(&c.OutageP, "outage-p", c.OutageP, "background failure rate of the outage scenario")
	fs.BoolVar(&c.NoOutage, "no-outage", c.NoOutage, "skip the outage scenario")
	fs.DurationVar(&c.SteadyDuration, "steady", c.SteadyDuration, "length of the load in each steady scenario")
	fs.Func("p", fmt.Sprintf("comma-separated failure rates of the steady scenarios, \"\" for none (default %s)", joinFloats(c.Ps)), func(s string) error {
		ps, err := parseFloats(s)
		c.Ps = ps
		return err
	})
	fs.Float64Var(&c.Lost, "lost", c.Lost, "probability of a lost response (effect committed, no answer)")
	fs.DurationVar(&c.OpTimeout, "op-timeout", c.OpTimeout, "deadline of each operation, retries included")
	fs.IntVar(&c.Capacity.MaxConcurrent, "capacity", c.Capacity.MaxConcurrent, "requests the server serves at once (0: unlimited)")
	fs.DurationVar(&c.Capacity.ServiceTime, "service-time", c.Capacity.ServiceTime, "time each request holds a server slot")
	fs.IntVar(&c.Capacity.Queue, "queue", c.Capacity.Queue, "requests that may wait for a slot")
	fs.DurationVar(&c.Capacity.QueueTimeout, "queue-timeout", c.Capacity.QueueTimeout, "longest wait for a slot before a 503")
	fs.Func("strategies", fmt.Sprintf("comma-separated strategies, or all (%s); default %s",
		strings.Join(StrategyNames(), ","), strings.Join(c.Strategies, ",")), func(s string) error {
		c.Strategies = splitList(s)
		if len(c.Strategies) == 1 && c.Strategies[0] == "all" {
			c.Strategies = StrategyNames()
		}
		return nil
	})
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the arrival schedule and the server's draws")
	fs.BoolVar(&c.Sequential, "sequential", c.Sequential, "run the strategies of a scenario one after the other, not side by side")
	fs.BoolVar(&c.Virtual, "virtual", c.Virtual, "simulated time against the in-process server: -engine virtual")
	fs.Func("engine", "virtual (simulated time, one event at a time: a function of -seed; the default) or sockets (loopback, real time, statistical)", func(s string) error {
		switch s {
		case EngineVirtual:
			c.Virtual = true
		case EngineSockets:
			c.Virtual = false
		default:
			return fmt.Errorf("want %s or %s", EngineVirtual, EngineSockets)
		}
		return nil
	})
	fs.DurationVar(&c.Bin, "bin", c.Bin, "width of the time bins of the series")
	fs.StringVar(&c.Fates, "fates", c.Fates, "how the server draws failures: operation (hash of operation and attempt: the same fates for every strategy) or stream (one random stream)")
	fs.Func("scales", fmt.Sprintf("per-client (a Transport per client), shared (one Transport for all clients) or both (default %s)", strings.Join(c.Scales, ",")), func(s string) error {
		if s == "both" {
			c.Scales = []string{ScalePerClient, ScaleShared}
			return nil
		}
		c.Scales = splitList(s)
		return nil
	})
	fs.BoolFunc("shared", "one Transport shared by all clients: -scales shared", func(string) error {
		c.Scales = []string{ScaleShared}
		return nil
	})
	fs.IntVar(&c.Ops, "ops", c.Ops, "operations per steady and overload scenario (sets their length; 0: -steady)")
	fs.BoolFunc("sweep", "the sweep: -p 0,0.1,…,1 and -overload 1.25,2 (later flags override)", func(string) error {
		c.Ps, c.Overload = SweepPs(), SweepOverload()
		return nil
	})
	fs.BoolFunc("gray", "the paired Retry-After scenarios: a gray backend (steady -p 0.1,0.333 whose failures are 503 + Retry-After: 1s, one bad backend of 10 or of 3, per-request balancing) and uniform shedding (-overload 1.5: sheds a third with 503 + Retry-After: 1s), no outage, 3000 operations each, 10 s deadline (later flags override)", func(string) error {
		c.NoOutage, c.Ps, c.Overload, c.Ops = true, GrayPs(), []float64{1.5}, 3000
		c.FailRetryAfter, c.OpTimeout = time.Second, 10*time.Second
		return nil
	})
	fs.Func("overload", "comma-separated offered loads of the overload scenarios, as multiples of the server's capacity (default none)", func(s string) error {
		fs, err := parseFloats(s)
		c.Overload = fs
		return err
	})
	fs.Float64Var(&c.ShedCost, "shed-cost", c.ShedCost, "work of shedding a request, as a share of serving one")
	fs.DurationVar(&c.ShedRetryAfter, "shed-retry-after", c.ShedRetryAfter, "Retry-After of the server's 503 when it sheds (0: none)")
	fs.DurationVar(&c.FailRetryAfter, "fail-retry-after", c.FailRetryAfter, "Retry-After of the 503 of a steady scenario's failures (0: none); -p 0.333 -fail-retry-after 1s is a gray backend, one of three")
	fs.DurationVar(&c.OutageRetryAfter, "outage-retry-after", c.OutageRetryAfter, "Retry-After of the server's 503 during the outage (0: none)")
	fs.IntVar(&c.MaxConns, "max-conns", c.MaxConns, "connections per strategy on sockets (0: from the file-descriptor limit)")
	fs.Float64Var(&c.MaxDisturbed, "max-disturbed", c.MaxDisturbed, "share of a run's operations that may start late before the run is invalid")
	registerTailFlags(fs, c)
	fs.BoolVar(&c.Pushback, "pushback", c.Pushback, "every strategy's server mounts the pushback middleware (resilient-pushback's always does)")
	fs.StringVar(&o.Format, "format", o.Format, "stdout: headline (the first screen), markdown (every table) or json")
	fs.StringVar(&o.Dir, "out", o.Dir, "directory for index.html (the report), the plots (PNG and SVG) and the results (headline.txt, storm.md, storm.json, tail.md, tail.json); none if empty")
	fs.BoolVar(&o.Series, "series", o.Series, "include the per-bin series in the JSON")
	fs.Func("reproduce", "comma-separated published figures to reproduce in simulated time instead of the storm: brooker2015, brooker2022", func(s string) error {
		o.Reproduce = splitList(s)
		for _, f := range o.Reproduce {
			if f != FigureBrooker2015 && f != FigureBrooker2022 {
				return fmt.Errorf("unknown figure %q", f)
			}
		}
		return nil
	})
}

// Validate reports the first problem of o, or nil.
func (o Output) Validate() error {
	if o.Format != "headline" && o.Format != "markdown" && o.Format != "json" {
		return fmt.Errorf("storm: format %q: want headline, markdown or json", o.Format)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func joinFloats(fs []float64) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// RegisterTargetFlags defines on fs the flags of a -target run, with t's
// values as defaults.
func RegisterTargetFlags(fs *flag.FlagSet, t *TargetConfig) {
	fs.StringVar(&t.URL, "target", t.URL, "storm a server you run instead of the modelled one: the fakeserver binary's base URL, or the URL each operation calls")
	fs.StringVar(&t.Method, "target-method", t.Method, "method of each operation on a target without the fakeserver admin API: GET or POST")
	fs.StringVar(&t.Body, "target-body", t.Body, "JSON body of each POST on a target without the fakeserver admin API")
	fs.Float64Var(&t.Rate, "target-rate", t.Rate, "operations per second offered to the target")
	fs.DurationVar(&t.Duration, "target-duration", t.Duration, "length of each run's load against the target")
	fs.IntVar(&t.Concurrency, "target-concurrency", t.Concurrency, "most operations in flight (and connections) to the target")
	fs.DurationVar(&t.OpTimeout, "target-op-timeout", t.OpTimeout, "deadline of each operation against the target, retries included")
	fs.Float64Var(&t.Burst, "target-burst", t.Burst, "offered load of the burst scenario (target without admin API), as a multiple of -target-rate")
	fs.Float64Var(&t.MaxRate, "max-rate", t.MaxRate, "cap on the operations per second offered to the target")
	fs.IntVar(&t.MaxConcurrency, "max-concurrency", t.MaxConcurrency, "cap on -target-concurrency")
	fs.DurationVar(&t.MaxTime, "max-time", t.MaxTime, "cap on the longest a -target run may last")
	fs.BoolVar(&t.IOwnThisTarget, "i-own-this-target", t.IOwnThisTarget, "allow a -target that is not on a loopback address")
}
