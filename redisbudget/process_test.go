package redisbudget_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/internal/redistest"
	"github.com/resilienthttp/resilient/redisbudget"
)

// The tests with several OS processes re-execute the test binary with
// childEnv set to a childConfig in JSON (see TestMain). Their scale is set by
// the environment:
//
//	REDISBUDGET_PROCESSES  processes (default 4; the target is 16)
//	REDISBUDGET_SECONDS    seconds of load (default 4; 10 for the target)
//
// e.g. REDISBUDGET_PROCESSES=16 REDISBUDGET_SECONDS=10 go test -run TestProcesses -v
const childEnv = "REDISBUDGET_CHILD"

// childRate is each process's rate of operations per second.
const childRate = 200

// childConfig is what a child process runs.
type childConfig struct {
	Addr       string
	Name       string
	Ops        int           // operations, at childRate per second
	Steady     int           // round trips are counted from this operation on
	Skew       time.Duration // added to the times passed to the budget
	CtxTimeout bool          // the client's ContextTimeoutEnabled
	// CallTimeout is the Fleet's Config.CallTimeout: the default (50 ms)
	// in the tests of faults, 2 s in the others, whose subject is the rule
	// and which a loaded machine must not send into fallback.
	CallTimeout time.Duration
}

// childResult is what a child reports.
type childResult struct {
	Firsts, Retries   int64 // during the operations
	DrainRetries      int64 // after them, until told to stop
	SteadyFirsts      int64
	SteadyRoundTrips  int64
	MaxCallNs         int64   // the longest DepositAt + WithdrawAt of one operation
	OpEnds            []int64 // Unix ns at which each operation returned
	Stats             redisbudget.Stats
	Fallback, Resumed int
}

// childFleetConfig is the rule and flush settings of the children: the
// defaults but for a window longer than the run (so the whole run is one
// window and the rule is Ratio × first attempts + 60).
func childFleetConfig(callTimeout time.Duration, onChange func(string, redisbudget.State, redisbudget.State, error)) redisbudget.Config {
	cfg := longWindow
	cfg.CallTimeout, cfg.OnStateChange = callTimeout, onChange
	return cfg
}

// child runs in a child process: it waits for "go" on stdin, runs its
// operations (a first attempt and up to three retries each) at childRate
// per second, prints "done", keeps asking for retries until stdin says
// "stop", closes its Fleet and prints its result.
func child() int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	rt := &roundTrips{}
	c := goredis.NewClient(&goredis.Options{Addr: cfg.Addr, ContextTimeoutEnabled: cfg.CtxTimeout, ReadTimeout: time.Second})
	defer c.Close()
	c.AddHook(rt)
	var res childResult
	var fallback, resumed atomic.Int64
	f := redisbudget.New(c, childFleetConfig(cfg.CallTimeout, func(_ string, _, to redisbudget.State, _ error) {
		if to == redisbudget.StateLocal {
			fallback.Add(1)
		} else {
			resumed.Add(1)
		}
	}))
	b := f.For(cfg.Name)
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	if !in.Scan() || in.Text() != "go" {
		return 2
	}
	stop := make(chan struct{})
	go func() {
		for in.Scan() {
			if in.Text() == "stop" {
				break
			}
		}
		close(stop)
	}()
	tick := time.NewTicker(time.Second / childRate)
	var trips0 int64
	for i := range cfg.Ops {
		<-tick.C
		if i == cfg.Steady {
			trips0 = rt.n.Load()
		}
		t0 := time.Now()
		now := t0.Add(cfg.Skew)
		b.DepositAt(now)
		res.Firsts++
		for range 3 {
			if !b.WithdrawAt(now) {
				break
			}
			res.Retries++
		}
		end := time.Now()
		res.MaxCallNs = max(res.MaxCallNs, int64(end.Sub(t0)))
		res.OpEnds = append(res.OpEnds, end.UnixNano())
		if i >= cfg.Steady {
			res.SteadyFirsts++
		}
	}
	res.SteadyRoundTrips = rt.n.Load() - trips0
	tick.Stop()
	fmt.Println("done")
	// Keep asking until told to stop, then until two flushes in a row
	// grant nothing: what is left of the lease is used.
	drain := time.NewTicker(time.Millisecond)
	stopping, flushes := false, int64(0)
	for {
		if !stopping {
			select {
			case <-stop:
				stopping, flushes = true, f.Stats().Flushes
			default:
			}
		}
		<-drain.C
		if b.WithdrawAt(time.Now().Add(cfg.Skew)) {
			res.DrainRetries++
			flushes = f.Stats().Flushes
		} else if stopping && f.Stats().Flushes >= flushes+2 {
			break
		}
	}
	drain.Stop()
	_ = f.Close()
	res.Stats = f.Stats()
	res.Fallback, res.Resumed = int(fallback.Load()), int(resumed.Load())
	out, _ := json.Marshal(res)
	fmt.Println("result " + string(out))
	return 0
}

// envInt returns the integer in environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// procs is the children of one test.
type procs struct {
	t    *testing.T
	cmds []*exec.Cmd
	in   []io.WriteCloser
	out  []*bufio.Scanner
}

// startChildren starts n children with the configurations cfg(i) and waits
// until each is ready.
func startChildren(t *testing.T, n int, cfg func(i int) childConfig) *procs {
	exe, err := os.Executable()
	require.NoError(t, err)
	p := &procs{t: t}
	for i := range n {
		js, err := json.Marshal(cfg(i))
		require.NoError(t, err)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(js))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		p.cmds, p.in, p.out = append(p.cmds, cmd), append(p.in, in), append(p.out, sc)
	}
	p.expect("ready")
	return p
}

// expect reads the next line of every child and fails unless it is want.
func (p *procs) expect(want string) {
	p.t.Helper()
	for i, sc := range p.out {
		require.True(p.t, sc.Scan(), "child %d ended before %q", i, want)
		require.Equal(p.t, want, sc.Text(), "child %d", i)
	}
}

// send writes line to every child.
func (p *procs) send(line string) {
	for _, in := range p.in {
		_, err := io.WriteString(in, line+"\n")
		require.NoError(p.t, err)
	}
}

// results tells the children to stop and returns their results.
func (p *procs) results() []childResult {
	p.t.Helper()
	p.send("stop")
	out := make([]childResult, len(p.out))
	for i, sc := range p.out {
		require.True(p.t, sc.Scan(), "child %d: no result", i)
		line, ok := strings.CutPrefix(sc.Text(), "result ")
		require.True(p.t, ok, "child %d: %q", i, sc.Text())
		require.NoError(p.t, json.Unmarshal([]byte(line), &out[i]))
		require.NoError(p.t, p.cmds[i].Wait())
	}
	return out
}

// processScale returns the number of processes and operations per process
// of the tests with several processes.
func processScale(t *testing.T) (n, ops int) {
	return envInt(t, "REDISBUDGET_PROCESSES", 4), envInt(t, "REDISBUDGET_SECONDS", 4) * childRate
}

// Several OS processes at 200 operations per second each, each operation
// wanting three retries, their clocks hours apart, share one window: their
// retries together are what the rule allows, within 5 % and never more, the
// window counts exactly the retries they sent, and each makes at most one
// round trip per 100 first attempts at steady state.
func TestProcesses(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	n, ops := processScale(t)
	name := newName()
	p := startChildren(t, n, func(i int) childConfig {
		return childConfig{Addr: srv.Addr, Name: name, Ops: ops, Steady: childRate, CtxTimeout: true,
			Skew: time.Duration(i%3-1) * 2 * time.Hour, CallTimeout: 2 * time.Second}
	})
	p.send("go")
	p.expect("done")
	total := int64(n * ops)
	want := bound(longWindow, total)
	var d, r int64
	eventuallyf(t, 60*time.Second, func() string {
		return fmt.Sprintf("the window's permits used (first attempts %d of %d, retries %d of %d)", d, total, r, want)
	}, func() bool {
		d, r = windowCounts(t, c, name)
		return d == total && r >= want
	})
	res := p.results()
	var retries, firsts, steadyFirsts, steadyTrips int64
	for i, r := range res {
		retries += r.Retries + r.DrainRetries
		firsts += r.Firsts
		steadyFirsts += r.SteadyFirsts
		steadyTrips += r.SteadyRoundTrips
		per100 := 100 * float64(r.SteadyRoundTrips) / float64(r.SteadyFirsts)
		assert.LessOrEqual(t, per100, 1.0, "child %d: round trips per 100 first attempts", i)
		assert.Zero(t, r.Stats.FlushErrors, "child %d", i)
	}
	d, r = windowCounts(t, c, name)
	t.Logf("%d processes × %d ops at %d/s: %d first attempts, %d retries (%d during the load), rule %d (%.2f %%); "+
		"%.3f round trips per 100 first attempts at steady state",
		n, ops, childRate, firsts, retries, retries-sumDrain(res), want, 100*float64(retries)/float64(want),
		100*float64(steadyTrips)/float64(steadyFirsts))
	assert.Equal(t, total, firsts)
	assert.Equal(t, total, d)
	assert.Equal(t, retries, r, "the window counts exactly the retries sent")
	assert.LessOrEqual(t, retries, want)
	assert.GreaterOrEqual(t, float64(retries), 0.95*float64(want))
}

func sumDrain(res []childResult) int64 {
	var n int64
	for _, r := range res {
		n += r.DrainRetries
	}
	return n
}

// faultRun runs children with a fault of Redis in the middle of their load:
// fault is called a third of the way through and returns when it is over,
// and the operations each child completed meanwhile are counted.
func faultRun(t *testing.T, srv *redistest.Server, ctxTimeout bool, fault func()) []childResult {
	n, ops := processScale(t)
	name := newName()
	p := startChildren(t, n, func(i int) childConfig {
		return childConfig{Addr: srv.Addr, Name: name, Ops: ops + childRate, Steady: childRate, CtxTimeout: ctxTimeout}
	})
	p.send("go")
	time.Sleep(time.Duration(ops/3) * time.Second / childRate)
	from := time.Now().UnixNano()
	fault()
	to := time.Now().UnixNano()
	p.expect("done")
	res := p.results()
	var retries, firsts, shared, local, localBound int64
	for i, r := range res {
		retries += r.Retries + r.DrainRetries
		firsts += r.Firsts
		shared += r.Stats.LeaseHits
		local += r.Stats.LocalAllowed
		localBound += bound(longWindow, r.Firsts)
		// In fallback a process's retries are its local budget's.
		assert.LessOrEqual(t, r.Stats.LocalAllowed, bound(longWindow, r.Firsts), "child %d", i)
		assert.Equal(t, r.Retries+r.DrainRetries, r.Stats.LeaseHits+r.Stats.LocalAllowed, "child %d", i)
	}
	t.Logf("%d processes: %d retries of %d first attempts: %d from the shared window (its rule allows %d; "+
		"a restarted server's window allows its floor again) and %d from the local budgets in fallback (their bound %d)",
		n, retries, firsts, shared, bound(longWindow, firsts), local, localBound)
	floor := int64(longWindow.MinPerSecond * longWindow.Window.Seconds())
	assert.LessOrEqual(t, shared, bound(longWindow, firsts)+floor)
	for i, r := range res {
		during := 0
		for _, e := range r.OpEnds {
			if e >= from && e <= to {
				during++
			}
		}
		t.Logf("child %d: %d operations completed during the fault (%.1f s), longest budget calls of an operation %v; "+
			"%d retries of %d first attempts; fallbacks %d, resumed %d; %+v",
			i, during, float64(to-from)/1e9, time.Duration(r.MaxCallNs), r.Retries+r.DrainRetries, r.Firsts,
			r.Fallback, r.Resumed, r.Stats)
		assert.Positive(t, during, "child %d: operations go on while Redis cannot answer", i)
		assert.GreaterOrEqual(t, r.Fallback, 1, "child %d: fallback reported", i)
		assert.GreaterOrEqual(t, r.Resumed, 1, "child %d: resumed", i)
		assert.Equal(t, int64(len(r.OpEnds)), r.Firsts)
	}
	return res
}

// Redis frozen (SIGSTOP) for 1.5 s in the middle of the load of several
// processes whose go-redis clients do not honour context deadlines: every
// process goes on completing operations, falls back, says so, and resumes.
func TestProcessesRedisFrozen(t *testing.T) {
	srv := startServer(t)
	faultRun(t, srv, false, func() {
		srv.Freeze(t)
		time.Sleep(1500 * time.Millisecond)
		srv.Thaw()
	})
}

// Redis killed (SIGKILL) in the middle of the load of several processes, and
// restarted empty on the same port 1 s later: every process goes on,
// falls back, says so, and shares the new server's window.
func TestProcessesRedisKilled(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	faultRun(t, srv, true, func() {
		srv.Stop()
		time.Sleep(time.Second)
		srv.Restart(t)
	})
	keys, err := c.Keys(t.Context(), redisbudget.DefaultPrefix+"*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "the restarted server holds the window")
}
