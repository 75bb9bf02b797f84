package redisbudget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/redisbudget"
)

// names numbers the budget names of this test binary, so tests sharing a
// server do not share windows.
var names atomic.Int64

func newName() string { return fmt.Sprintf("host%d.example:%d", names.Add(1), rand.IntN(1000)) }

// windowCounts reads the first attempts and retries (granted, less given
// back) of budget name's window in Redis, all buckets summed: the tests that
// call it use a window longer than they run.
func windowCounts(t testing.TB, c goredis.UniversalClient, name string) (deposits, retries int64) {
	t.Helper()
	h, err := c.HGetAll(context.Background(), redisbudget.DefaultPrefix+"{"+name+"}:w").Result()
	require.NoError(t, err)
	for k, v := range h {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		switch k[0] {
		case 'd':
			deposits += n
		case 'r':
			retries += n
		}
	}
	return deposits, retries
}

// bound is the rule's bound on the retries of a window with the given first
// attempts, as a Budget rounds it.
func bound(cfg redisbudget.Config, deposits int64) int64 {
	return int64(math.Ceil(cfg.Ratio*float64(deposits) + cfg.MinPerSecond*cfg.Window.Seconds()))
}

// eventually polls cond every 5 ms until it holds, or fails t after d (a
// bound for a loaded machine, not a measure).
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	eventuallyf(t, d, func() string { return what }, cond)
}

// eventuallyf is eventually with a description computed when it fails.
func eventuallyf(t testing.TB, d time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what(), d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// longWindow is a rule whose window outlasts any test, so that the whole run
// is one window: Ratio 0.2, 1/s × 60 s = 60 retries of floor.
var longWindow = redisbudget.Config{Ratio: 0.2, MinPerSecond: 1, Window: time.Minute}

// The Lua script and the Go window (Memory) grant the same leases for the
// same requests, within one bucket.
func TestScriptMatchesMemory(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	rule := redisbudget.Rule{Ratio: 0.3, Reserve: 7, Bucket: time.Hour, ProcessTTL: time.Hour}
	mem, rdb := redisbudget.NewMemory(), redisbudget.NewRedis(c, "")
	name := newName()
	rng := rand.New(rand.NewPCG(1, 2))
	epochs := map[string][2]int64{} // process → {redis epoch, memory epoch}
	grants := map[string]int64{}
	for i := range 300 {
		p := "p" + strconv.Itoa(rng.IntN(4))
		r := redisbudget.Request{Name: name, Process: p, Deposits: int64(rng.IntN(30)),
			Demand: int64(rng.IntN(3)), Want: rng.IntN(5) > 0}
		if g := grants[p]; g > 0 {
			r.Unused = int64(rng.IntN(int(g)+2)) - 1 // -1 … g
		}
		rr, mr := r, r
		rr.UnusedEpoch, mr.UnusedEpoch = epochs[p][0], epochs[p][1]
		rep, err := rdb.Flush(context.Background(), rule, []redisbudget.Request{rr})
		require.NoError(t, err)
		mrep, err := mem.Flush(context.Background(), rule, []redisbudget.Request{mr})
		require.NoError(t, err)
		require.NoError(t, rep[0].Err)
		require.Equal(t, mrep[0].Grant, rep[0].Grant, "request %d: %+v", i, r)
		require.Equal(t, mrep[0].Processes, rep[0].Processes, "request %d", i)
		epochs[p] = [2]int64{rep[0].Epoch, mrep[0].Epoch}
		grants[p] = rep[0].Grant
	}
}

// Goroutines of one process that want three retries per operation get
// what the rule allows, within 5 %, and never more; the window's count of
// retries is exactly what they used once the Fleet is closed.
func TestFleetRuleGoroutines(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	cfg := longWindow
	cfg.FlushEvery, cfg.FlushInterval, cfg.CallTimeout = 50, 10*time.Millisecond, 2*time.Second
	f := redisbudget.New(c, cfg)
	name := newName()
	b := f.For(name)
	var retries atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				b.DepositAt(time.Now())
				for range 3 {
					if !b.WithdrawAt(time.Now()) {
						break
					}
					retries.Add(1)
				}
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	// The permits of the last first attempts come with the next flushes.
	want := bound(cfg, 8*500)
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if b.WithdrawAt(time.Now()) {
					retries.Add(1)
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	eventually(t, 20*time.Second, "the window's permits used", func() bool {
		d, r := windowCounts(t, c, name)
		return d == 8*500 && r >= want
	})
	close(stop)
	wg.Wait()
	require.NoError(t, f.Close())
	d, r := windowCounts(t, c, name)
	assert.Equal(t, int64(8*500), d)
	assert.Equal(t, retries.Load(), r, "the window counts exactly the retries used")
	assert.LessOrEqual(t, retries.Load(), want)
	assert.GreaterOrEqual(t, float64(retries.Load()), 0.95*float64(want))
	st := f.Stats()
	t.Logf("retries %d, rule %d; %+v", retries.Load(), want, st)
	assert.Zero(t, st.FlushErrors)
	assert.Equal(t, retries.Load(), st.LeaseHits)
}

// At a steady 200 first attempts per second, with the defaults, a process
// makes at most one round trip per 100 first attempts (counted by a go-redis
// hook), its retries included.
func TestFleetRoundTrips(t *testing.T) {
	srv := startServer(t)
	rt := &roundTrips{}
	c := newClient(t, srv.Addr, rt, true)
	f := redisbudget.New(c, redisbudget.Config{CallTimeout: 2 * time.Second})
	defer f.Close()
	b := f.For(newName())
	tick := time.NewTicker(5 * time.Millisecond) // 200/s
	defer tick.Stop()
	var firsts, base int64
	for i := range 800 {
		<-tick.C
		if i == 100 { // steady state from here
			base, firsts = rt.n.Load(), 0
		}
		b.DepositAt(time.Now())
		firsts++
		if i%3 == 0 { // a third of the operations want a retry
			b.WithdrawAt(time.Now())
		}
	}
	trips := rt.n.Load() - base
	per100 := float64(trips) / float64(firsts) * 100
	t.Logf("%d round trips for %d first attempts: %.2f per 100; %+v", trips, firsts, per100, f.Stats())
	assert.LessOrEqual(t, per100, 1.0)
	assert.Positive(t, trips)
}

// stateLog records OnStateChange calls.
type stateLog struct {
	mu     sync.Mutex
	events []string
	errs   []error // of the switches to StateLocal
}

func (l *stateLog) record(name string, from, to redisbudget.State, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, to.String())
	if to == redisbudget.StateLocal {
		l.errs = append(l.errs, err)
	}
}

func (l *stateLog) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs[0]
}

func (l *stateLog) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs[len(l.errs)-1]
}

func (l *stateLog) count(to string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e == to {
			n++
		}
	}
	return n
}

// load runs operations on b until stop is closed: a first attempt and up to
// three retries each, as fast as the scheduler lets it, counting them.
type load struct {
	ops, retries atomic.Int64
	stop         chan struct{}
	wg           sync.WaitGroup
}

func startLoad(b resilient.Budget, goroutines int) *load {
	l := &load{stop: make(chan struct{})}
	for range goroutines {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				now := time.Now()
				b.DepositAt(now)
				for range 3 {
					if !b.WithdrawAt(now) {
						break
					}
					l.retries.Add(1)
				}
				l.ops.Add(1)
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	return l
}

func (l *load) halt() { close(l.stop); l.wg.Wait() }

// progresses reports whether the load completes more operations (while Redis
// cannot answer: the budget never waits for it).
func (l *load) progresses(t *testing.T) {
	t.Helper()
	n := l.ops.Load()
	eventually(t, 10*time.Second, "operations complete", func() bool { return l.ops.Load() >= n+100 })
}

// startFaultLoad starts a Fleet on c that flushes every 20 ms and records
// its state changes, and a load of 4 goroutines on one of its budgets; it
// returns once a flush has succeeded. Both stop when the test ends.
func startFaultLoad(t *testing.T, c goredis.UniversalClient) (*redisbudget.Fleet, string, *stateLog, *load) {
	t.Helper()
	log := new(stateLog)
	cfg := longWindow
	cfg.FlushInterval, cfg.OnStateChange = 20*time.Millisecond, log.record
	f := redisbudget.New(c, cfg)
	t.Cleanup(func() { f.Close() })
	name := newName()
	l := startLoad(f.For(name), 4)
	t.Cleanup(l.halt)
	eventually(t, 10*time.Second, "a flush", func() bool { return f.Stats().Flushes > 0 })
	return f, name, log, l
}

// Redis frozen (SIGSTOP) mid-run: operations keep completing, the budget
// falls back to its local budget and says so, and resumes sharing when Redis
// is thawed. The client does not honour context deadlines (go-redis's
// default): the Fleet's own bound applies.
func TestFleetRedisFrozen(t *testing.T) {
	srv := startServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { c.Close() })
	f, name, log, l := startFaultLoad(t, c)

	// A loaded machine may time out a call before the freeze too: count
	// from here.
	fellBack, resumed := log.count("local"), log.count("shared")
	srv.Freeze(t)
	eventually(t, 10*time.Second, "fallback reported", func() bool { return log.count("local") > fellBack })
	assert.ErrorIs(t, log.firstErr(), redisbudget.ErrTimeout)
	st, _ := f.State(name)
	assert.Equal(t, redisbudget.StateLocal, st, "no flush succeeds while Redis is frozen")
	l.progresses(t) // still frozen
	local := f.Stats().LocalAllowed + f.Stats().LocalRefused
	eventually(t, 10*time.Second, "retries decided locally", func() bool {
		s := f.Stats()
		return s.LocalAllowed+s.LocalRefused > local
	})

	srv.Thaw()
	eventually(t, 10*time.Second, "resumed", func() bool { return log.count("shared") > resumed })
	l.progresses(t)
	s := f.Stats()
	t.Logf("%+v", s)
	assert.GreaterOrEqual(t, s.Fallbacks, int64(1))
	assert.GreaterOrEqual(t, s.Recoveries, int64(1))
	assert.Positive(t, s.FlushErrors)
}

// slowScript keeps Redis busy for ARGV[1] ms (a script blocks the server).
var slowScript = goredis.NewScript(`
local t = redis.call('TIME')
local stop = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 + tonumber(ARGV[1])
repeat
  t = redis.call('TIME')
until tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 >= stop
return 1
`)

// Redis slow (busy 150 ms at a time, with short gaps, longer than the call
// timeout): operations keep completing, the budget falls back and says so,
// and shares again when Redis is quick again.
func TestFleetRedisSlow(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	slow := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ReadTimeout: 5 * time.Second})
	defer slow.Close()
	f, _, log, l := startFaultLoad(t, c)

	fellBack, resumed := log.count("local"), log.count("shared")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = slowScript.Run(context.Background(), slow, nil, 150).Err()
			time.Sleep(2 * time.Millisecond)
		}
	})
	eventually(t, 10*time.Second, "fallback reported", func() bool { return log.count("local") > fellBack })
	l.progresses(t) // still slow
	close(stop)
	wg.Wait()
	eventually(t, 10*time.Second, "resumed", func() bool { return log.count("shared") > resumed })
	s := f.Stats()
	t.Logf("%+v", s)
	assert.Positive(t, s.FlushErrors)
}

// Redis killed (SIGKILL) and restarted empty on the same port mid-run: the
// budget falls back, then shares again (the script is loaded again).
func TestFleetRedisKilled(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	f, name, log, l := startFaultLoad(t, c)

	fellBack, resumed := log.count("local"), log.count("shared")
	srv.Stop()
	eventually(t, 10*time.Second, "fallback reported", func() bool { return log.count("local") > fellBack })
	l.progresses(t)
	srv.Restart(t)
	eventually(t, 10*time.Second, "resumed", func() bool { return log.count("shared") > resumed })
	l.progresses(t)
	d, _ := windowCounts(t, c, name)
	assert.Positive(t, d, "the new server's window counts first attempts")
	t.Logf("%+v", f.Stats())
}

// Processes whose clocks disagree by hours share one window: the window runs
// on Redis's clock, and the times passed in only matter to the local
// budgets.
func TestFleetClockSkew(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	cfg := longWindow
	cfg.FlushEvery, cfg.FlushInterval, cfg.CallTimeout = 20, 10*time.Millisecond, 2*time.Second
	name := newName()
	skews := []time.Duration{-3 * time.Hour, 0, 90 * time.Minute}
	var retries atomic.Int64
	var wg sync.WaitGroup
	fleets := make([]*redisbudget.Fleet, len(skews))
	for i, skew := range skews {
		fleets[i] = redisbudget.New(c, cfg)
		b := fleets[i].For(name)
		wg.Go(func() {
			for range 400 {
				now := time.Now().Add(skew)
				b.DepositAt(now)
				for range 3 {
					if !b.WithdrawAt(now) {
						break
					}
					retries.Add(1)
				}
				time.Sleep(500 * time.Microsecond)
			}
			// Use what is left of the window.
			for range 2000 {
				if b.WithdrawAt(time.Now().Add(skew)) {
					retries.Add(1)
				}
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	for _, f := range fleets {
		require.NoError(t, f.Close())
	}
	want := bound(cfg, int64(400*len(skews)))
	d, r := windowCounts(t, c, name)
	t.Logf("retries %d, rule %d", retries.Load(), want)
	assert.Equal(t, int64(400*len(skews)), d)
	assert.Equal(t, retries.Load(), r)
	assert.LessOrEqual(t, retries.Load(), want)
	assert.GreaterOrEqual(t, float64(retries.Load()), 0.95*float64(want))
}

// A rule without limit shares nothing and allows every retry.
func TestFleetUnlimited(t *testing.T) {
	rt := &roundTrips{}
	srv := startServer(t)
	c := newClient(t, srv.Addr, rt, true)
	f := redisbudget.New(c, redisbudget.Config{Ratio: math.Inf(1)})
	b := f.For("h")
	for range 1000 {
		require.True(t, b.WithdrawAt(time.Now()))
	}
	require.NoError(t, f.Close())
	assert.Zero(t, rt.n.Load())
}

// After Close, budgets are local: their local budget decides.
func TestFleetClosed(t *testing.T) {
	f := redisbudget.NewWithBackend(redisbudget.NewMemory(), redisbudget.Config{MinPerSecond: 1, Ratio: -1, Window: 10 * time.Second})
	require.NoError(t, f.Close())
	require.NoError(t, f.Close())
	b := f.For("h")
	n := 0
	for range 100 {
		if b.WithdrawAt(time.Now()) {
			n++
		}
	}
	assert.Equal(t, 10, n, "the local budget's floor")
	st, ok := f.State("h")
	assert.True(t, ok)
	assert.Equal(t, redisbudget.StateLocal, st)
}

// In simulated time (the storm's mode), four processes sharing a Memory
// backend at 200 operations per second each, every operation wanting three
// retries, send what the rule allows over 30 s of rolling windows, within
// 5 %, with one round trip per 100 first attempts.
func TestFleetVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := redisbudget.NewMemory()
		cfg := redisbudget.Config{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second}
		const procs, rate, seconds = 4, 200, 30
		var retries, firsts atomic.Int64
		var wg sync.WaitGroup
		fleets := make([]*redisbudget.Fleet, procs)
		for i := range procs {
			fleets[i] = redisbudget.NewWithBackend(mem, cfg)
			b := fleets[i].For("api")
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				tick := time.NewTicker(time.Second / rate)
				defer tick.Stop()
				for range rate * seconds {
					<-tick.C
					b.DepositAt(time.Now())
					firsts.Add(1)
					for range 3 {
						if !b.WithdrawAt(time.Now()) {
							break
						}
						retries.Add(1)
					}
				}
			})
		}
		wg.Wait()
		var trips int64
		for _, f := range fleets {
			require.NoError(t, f.Close())
			trips += f.Stats().RoundTrips
		}
		// Three windows: the floor three times, and the ratio of every first
		// attempt.
		want := cfg.Ratio*float64(firsts.Load()) + 3*cfg.MinPerSecond*cfg.Window.Seconds()
		t.Logf("virtual: %d first attempts, %d retries, rule %.0f (%.1f %%), %.2f round trips per 100",
			firsts.Load(), retries.Load(), want, 100*float64(retries.Load())/want, 100*float64(trips)/float64(firsts.Load()))
		assert.InEpsilon(t, want, float64(retries.Load()), 0.05)
		assert.LessOrEqual(t, float64(retries.Load()), want+1)
		assert.LessOrEqual(t, float64(trips), float64(firsts.Load())/100+procs*2)
	})
}

// On Redis's clock, a bucket leaves the window a Window after it was
// written: its first attempts and its retries go together, and the floor is
// whole again.
func TestRedisWindowRolls(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.Addr, nil, true)
	rdb := redisbudget.NewRedis(c, "")
	rule := redisbudget.Rule{Ratio: 1, Reserve: 5, Bucket: 30 * time.Millisecond, ProcessTTL: time.Minute}
	name := newName()
	flush := func(r redisbudget.Request) redisbudget.Reply {
		r.Name, r.Process, r.Demand, r.Want = name, "p", 1, true
		reps, err := rdb.Flush(context.Background(), rule, []redisbudget.Request{r})
		require.NoError(t, err)
		require.NoError(t, reps[0].Err)
		return reps[0]
	}
	require.Equal(t, int64(15), flush(redisbudget.Request{Deposits: 10}).Grant)
	eventually(t, 10*time.Second, "the window rolls", func() bool {
		g := flush(redisbudget.Request{}).Grant
		require.Contains(t, []int64{0, 5}, g, "nothing in between: the bucket leaves whole")
		return g == 5
	})
}

// flakyBackend fails while fail is set, else forwards to a Memory backend.
type flakyBackend struct {
	fail atomic.Bool
	mem  redisbudget.Backend
}

func (fb *flakyBackend) Flush(ctx context.Context, rule redisbudget.Rule, reqs []redisbudget.Request) ([]redisbudget.Reply, error) {
	if fb.fail.Load() {
		return nil, errors.New("backend down")
	}
	return fb.mem.Flush(ctx, rule, reqs)
}

// Close leaves every budget local and says so, even when its last flush
// succeeds after a fallback: OnStateChange's last word is the state.
func TestFleetCloseReportsLocal(t *testing.T) {
	fb := &flakyBackend{mem: redisbudget.NewMemory()}
	var log stateLog
	f := redisbudget.NewWithBackend(fb, redisbudget.Config{FlushInterval: 10 * time.Millisecond, OnStateChange: log.record})
	b := f.For("h")
	b.DepositAt(time.Now())
	eventually(t, 10*time.Second, "a flush", func() bool { return f.Stats().Flushes > 0 })
	fb.fail.Store(true)
	b.DepositAt(time.Now())
	eventually(t, 10*time.Second, "fallback", func() bool { return log.count("local") >= 1 })
	fb.fail.Store(false)
	b.DepositAt(time.Now())
	eventually(t, 10*time.Second, "resumed", func() bool { return log.count("shared") >= 1 })
	shared := log.count("shared")
	b.DepositAt(time.Now())
	require.NoError(t, f.Close())
	assert.Equal(t, shared, log.count("shared"), "the last flush does not resume anything")
	assert.Equal(t, 2, log.count("local"), "the fallback, then Close")
	assert.ErrorIs(t, log.lastErr(), redisbudget.ErrClosed)
	st, _ := f.State("h")
	assert.Equal(t, redisbudget.StateLocal, st)
}
