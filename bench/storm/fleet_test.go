package storm

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/redisbudget"
)

// In virtual time, resilient-fleet holds the whole fleet to one budget: at
// p = 1 the server sees at most 20 % more than the first attempts, plus the
// fleet's floor of 10 retries per second — not a floor per client, as
// resilient-budget's per-client budgets allow — and it does no harm.
func TestFleetVirtual(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ps, cfg.NoOutage = []float64{0.1, 1}, true
	cfg.Strategies = []string{"none", "resilient-budget", "resilient-fleet"}
	res := RunVirtual(t, cfg)
	checkInvariants(t, cfg, res)
	r := find(res, ScenarioSteady, 1, "resilient-fleet")
	require.NotNil(t, r)
	floor := 10 * cfg.SteadyDuration.Seconds() / float64(r.Ops)
	t.Logf("p=1: resilient-fleet amplification %.3f (rule ≤ %.3f), resilient-budget %.3f",
		r.Amplification, 1.2+floor, find(res, ScenarioSteady, 1, "resilient-budget").Amplification)
	assert.LessOrEqual(t, r.Amplification, 1.2+floor+0.01, describe(*r))
	for _, r := range res {
		if r.Strategy == "resilient-fleet" {
			assert.False(t, r.Harmful, describe(r))
		}
	}
}

// On loopback sockets, the same strategy with its windows in a real
// redis-server: every client a process of the fleet, each with its own
// Fleet on one go-redis client.
func TestFleetRedisSockets(t *testing.T) {
	addr := startRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var mu sync.Mutex
	var fleets []*redisbudget.Fleet
	st := FleetRedisStrategy("resilient-fleet-redis", func() *redisbudget.Fleet {
		f := redisbudget.New(c, redisbudget.Config{})
		mu.Lock()
		fleets = append(fleets, f)
		mu.Unlock()
		return f
	})
	none, _ := lookupStrategy("none")
	cfg := tinyConfig()
	cfg.Strategies = []string{none.Name, st.Name}
	plan := newPlan(cfg, []Strategy{none, st})
	plan.maxConns = connLimit(cfg.MaxConns, 1)
	var res []Result
	for _, g := range plan.groups() {
		for _, s := range plan.strategies {
			res = append(res, runOne(context.Background(), plan.run(g, s, nil)))
		}
	}
	res = Compare(res)
	checkInvariants(t, cfg, res)
	var trips, flushes, errs, firsts, hits int64
	for _, f := range fleets {
		s := f.Stats()
		trips, flushes, errs, firsts, hits = trips+s.RoundTrips, flushes+s.Flushes, errs+s.FlushErrors,
			firsts+s.FirstAttempts, hits+s.LeaseHits
	}
	t.Logf("%d Fleets: %d round trips, %d flushes (%d failed), %d first attempts, %d retries from leases",
		len(fleets), trips, flushes, errs, firsts, hits)
	assert.Positive(t, flushes, "the windows are in Redis")
	keys, err := c.Keys(context.Background(), redisbudget.DefaultPrefix+"*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys)
	for _, r := range res {
		t.Logf("%s: amplification %.2f, success %.1f %%", describe(r), r.Amplification, 100*r.SuccessRate)
	}
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, and stops it when t ends. A missing redis-server fails the
// test: scripts/test installs it.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH (%v): scripts/test installs it (Debian package redis-server)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("redis-server on %s did not answer: %w", addr, err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
