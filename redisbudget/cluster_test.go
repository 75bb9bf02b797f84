package redisbudget_test

import (
	"context"
	"fmt"
	"os/exec"
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

// startCluster starts a Redis Cluster of three masters on loopback
// (redis-server --cluster-enabled yes, joined by redis-cli --cluster create)
// and returns the addresses of its nodes. It stops them when t ends.
func startCluster(t *testing.T) []string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found on PATH (%v): it comes with Debian's redis-server package (redis-tools)", err)
	}
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.Start(t, redistest.Config{Cluster: true}).Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		eventually(t, 20*time.Second, "cluster_state:ok on "+a, func() bool {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		_ = c.Close()
	}
	return addrs
}

// On a real three-node Redis Cluster, through go-redis's ClusterClient: the
// two keys of each budget hash to one slot, the script runs, budgets on
// different nodes are flushed in one call, and two Fleets share a window
// exactly as on a single server.
func TestCluster(t *testing.T) {
	addrs := startCluster(t)
	rt := &roundTrips{}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	defer c.Close()
	c.AddHook(rt)
	ctx := context.Background()
	require.NoError(t, c.Ping(ctx).Err())

	cfg := longWindow
	cfg.FlushEvery, cfg.FlushInterval, cfg.CallTimeout = 20, 10*time.Millisecond, time.Second
	a, b := redisbudget.New(c, cfg), redisbudget.New(c, cfg)
	hosts := make([]string, 12)
	slots := map[int64]bool{}
	for i := range hosts {
		hosts[i] = fmt.Sprintf("api%d.example.com", i)
		w, err := c.ClusterKeySlot(ctx, redisbudget.DefaultPrefix+"{"+hosts[i]+"}:w").Result()
		require.NoError(t, err)
		p, err := c.ClusterKeySlot(ctx, redisbudget.DefaultPrefix+"{"+hosts[i]+"}:p").Result()
		require.NoError(t, err)
		require.Equal(t, w, p, "one slot per budget")
		slots[w/5462] = true // the node of the slot, roughly
	}
	assert.Greater(t, len(slots), 1, "budgets on several nodes")

	var retries atomic.Int64
	for _, h := range hosts {
		ba, bb := a.For(h), b.For(h)
		for range 100 {
			ba.DepositAt(time.Now())
			bb.DepositAt(time.Now())
		}
	}
	for range 400 {
		for _, h := range hosts {
			if a.For(h).WithdrawAt(time.Now()) {
				retries.Add(1)
			}
			if b.For(h).WithdrawAt(time.Now()) {
				retries.Add(1)
			}
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	var d, r int64
	for _, h := range hosts {
		dh, rh := windowCounts(t, c, h)
		d, r = d+dh, r+rh
	}
	want := int64(len(hosts)) * bound(cfg, 200)
	st := a.Stats()
	t.Logf("cluster: %d retries for %d first attempts over %d budgets, rule %d; %d round trips (go-redis hook) for %d calls; %+v",
		retries.Load(), d, len(hosts), want, rt.n.Load(), st.RoundTrips+b.Stats().RoundTrips, st)
	assert.Equal(t, int64(200*len(hosts)), d)
	assert.Equal(t, retries.Load(), r, "the windows count exactly the retries sent")
	assert.LessOrEqual(t, retries.Load(), want)
	assert.GreaterOrEqual(t, float64(retries.Load()), 0.95*float64(want))
	assert.Zero(t, st.FlushErrors)
}
