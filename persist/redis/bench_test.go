package redis_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/internal/redistest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/redis"
)

// BenchmarkClaimVsSet compares, against one redis-server with appendonly
// yes and appendfsync always in a temporary directory, Store.Claim from 64
// goroutines with redis-benchmark -c 64 -t set (20,000 SETs) run just
// before and just after, in each run: it reports claims/s, the SET rate (the
// mean of the two, as the disk's fsync rate drifts), claims per SET and the
// CPU time redis-server spent per claim. Needs
// redis-benchmark (Debian's redis-tools, with redis-server).
func BenchmarkClaimVsSet(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	sets := redisBenchmarkSet(b, srv.Addr)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 64})
	defer c.Close()
	s := redis.New(c, redis.WithPrefix(newPrefix()))
	const conc = 64
	created := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	cpu0 := redisCPU(b, c)
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				op := "op" + strconv.FormatInt(i, 10)
				if _, _, err := s.Claim(context.Background(), persist.Record{Operation: op, Key: "k" + op, Created: created}); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := redisCPU(b, c) - cpu0
	sets = (sets + redisBenchmarkSet(b, srv.Addr)) / 2
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	claims := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(claims, "claims/s")
	b.ReportMetric(sets, "set/s")
	b.ReportMetric(claims/sets, "claims/set")
	b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "redis-cpu-µs/claim")
}

// redisCPU returns the CPU time (user and system) redis-server has used, from
// INFO cpu: less swayed by the machine's other load than a rate.
func redisCPU(b *testing.B, c *goredis.Client) time.Duration {
	b.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q: %v", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// redisBenchmarkSet runs redis-benchmark -c 64 -t set -n 20000 against
// addr and returns its requests per second.
func redisBenchmarkSet(b *testing.B, addr string) float64 {
	b.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", "64", "-t", "set", "-n", "20000", "--csv").Output()
	if err != nil {
		b.Fatalf("redis-benchmark: %v", err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) > 1 && f[0] == `"SET"` {
			rps, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
			if err != nil {
				b.Fatalf("redis-benchmark: %q: %v", line, err)
			}
			return rps
		}
	}
	b.Fatalf("redis-benchmark printed no SET line: %s", out)
	return 0
}
