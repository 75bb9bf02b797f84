package redis_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/internal/crashmatrix"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/persisttest"
	"github.com/resilienthttp/resilient/persist/redis"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(helperAddrEnv) != "":
		// Re-executed by TestTwoProcessesClaimOneOperation.
		os.Exit(helperClaim())
	case os.Getenv(crashAddrEnv) != "":
		// Re-executed by TestCrashResumeWithRedis.
		os.Exit(crashChild())
	}
	// Re-executed by TestCrashMatrixWithRedis.
	crashmatrix.Main(openMatrixStore)
	// After dials fail (TestRedisDown), go-redis redials in a goroutine that
	// notices the client's Close only at its next one-second tick.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// prefixes numbers the prefixes of the Stores of one test binary.
var prefixes atomic.Int64

// newPrefix returns a prefix no other Store of this test binary uses.
func newPrefix() string {
	return fmt.Sprintf("test%d:", prefixes.Add(1))
}

func TestConformance(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	persisttest.Run(t, func(t *testing.T) persist.Store {
		return redis.New(c, redis.WithPrefix(newPrefix()))
	})
}

func TestConformanceWithoutTTL(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	persisttest.Run(t, func(t *testing.T) persist.Store {
		return redis.New(c, redis.WithPrefix(newPrefix()), redis.WithTTL(0))
	})
}

func TestConformanceDefaultPrefix(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	persisttest.Run(t, func(t *testing.T) persist.Store {
		require.NoError(t, c.FlushAll(t.Context()).Err())
		return redis.New(c)
	})
}

func TestKeyLayout(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	s := redis.New(c)
	ctx := t.Context()
	created := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	rec, claimed, err := s.Claim(ctx, persist.Record{Operation: "refund:ch_1", Key: "k1", Fingerprint: "fp", Created: created})
	require.NoError(t, err)
	require.True(t, claimed)
	assert.Equal(t, created.Truncate(time.Microsecond), rec.Created, "microsecond precision")

	fields, err := c.HGetAll(ctx, "resilient:op:rec:refund:ch_1").Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"key": "k1", "fp": "fp", "created": strconv.FormatInt(created.UnixMicro(), 10), "state": "1", "attempts": "0",
	}, fields)
	ttl, err := c.TTL(ctx, "resilient:op:rec:refund:ch_1").Result()
	require.NoError(t, err)
	assert.InDelta(t, redis.DefaultTTL.Seconds(), ttl.Seconds(), 60)
	for _, idx := range []string{"idx:pending", "idx:all", "idx:exp"} {
		n, err := c.ZCard(ctx, "resilient:op:"+idx).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, idx)
	}

	require.NoError(t, s.Finish(ctx, "refund:ch_1", persist.Done, 3))
	n, err := c.ZCard(ctx, "resilient:op:idx:pending").Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	ttl2, err := c.TTL(ctx, "resilient:op:rec:refund:ch_1").Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl2, ttl, "Finish keeps the TTL")

	require.NoError(t, s.Delete(ctx, "refund:ch_1"))
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

func TestPrefixesAreIndependent(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	ctx := t.Context()
	a, b := redis.New(c, redis.WithPrefix("a:")), redis.New(c, redis.WithPrefix("b:"))
	_, claimed, err := a.Claim(ctx, persist.Record{Operation: "op", Key: "ka"})
	require.NoError(t, err)
	require.True(t, claimed)
	rec, claimed, err := b.Claim(ctx, persist.Record{Operation: "op", Key: "kb"})
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, "kb", rec.Key)
	n, err := a.Expire(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	pending, err := b.Pending(ctx)
	require.NoError(t, err)
	assert.Len(t, pending, 1)
}

func TestTTLExpiresRecordsAndIndexEntries(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	ctx := t.Context()
	s := redis.New(c, redis.WithPrefix("p:"), redis.WithTTL(100*time.Millisecond))
	for _, op := range []string{"a", "b", "c"} {
		_, claimed, err := s.Claim(ctx, persist.Record{Operation: op, Key: "k"})
		require.NoError(t, err)
		require.True(t, claimed)
	}
	time.Sleep(300 * time.Millisecond)

	require.ErrorIs(t, s.Finish(ctx, "a", persist.Done, 1), persist.ErrNotFound)
	// A new claim drops the index entries of expired records.
	_, claimed, err := s.Claim(ctx, persist.Record{Operation: "d", Key: "k"})
	require.NoError(t, err)
	require.True(t, claimed)
	for _, idx := range []string{"p:idx:pending", "p:idx:all", "p:idx:exp"} {
		members, err := c.ZRange(ctx, idx, 0, -1).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{"d"}, members, idx)
	}
	// An expired operation is claimed afresh.
	rec, claimed, err := s.Claim(ctx, persist.Record{Operation: "a", Key: "new"})
	require.NoError(t, err)
	assert.True(t, claimed)
	assert.Equal(t, "new", rec.Key)
}

func TestPendingDropsExpiredEntries(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	ctx := t.Context()
	s := redis.New(c, redis.WithPrefix("p:"))
	for _, op := range []string{"a", "b"} {
		_, _, err := s.Claim(ctx, persist.Record{Operation: op, Key: "k"})
		require.NoError(t, err)
	}
	require.NoError(t, c.Del(ctx, "p:rec:a").Err()) // as if Redis had expired it
	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "b", pending[0].Operation)
	members, err := c.ZRange(ctx, "p:idx:all", 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, members)
}

func TestManyRecordsInPages(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	ctx := t.Context()
	s := redis.New(c, redis.WithPrefix("p:"))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// 1500 records share one creation time (more than a page of one score),
	// then 1000 have distinct times.
	const same, distinct = 1500, 1000
	var want []string
	pipe := c.Pipeline()
	for i := range same + distinct {
		op := fmt.Sprintf("op%05d", i)
		created := base
		if i >= same {
			created = base.Add(time.Duration(i) * time.Millisecond)
		}
		want = append(want, op)
		pipe.HSet(ctx, "p:rec:"+op, "key", "k"+op, "fp", "", "created", created.UnixMicro(), "state", 1, "attempts", 0)
		pipe.ZAdd(ctx, "p:idx:pending", goredis.Z{Score: float64(created.UnixMicro()), Member: op})
		pipe.ZAdd(ctx, "p:idx:all", goredis.Z{Score: float64(created.UnixMicro()), Member: op})
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)

	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	got := make([]string, len(pending))
	for i, r := range pending {
		got[i] = r.Operation
	}
	require.Equal(t, want, got)

	n, err := s.Expire(ctx, base.Add(same*time.Millisecond+500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, same+500, n)
	pending, err = s.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, distinct-500)
	assert.Equal(t, want[same+500], pending[0].Operation)
}

func TestCorruptRecord(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	ctx := t.Context()
	s := redis.New(c, redis.WithPrefix("p:"))
	tests := []struct {
		name   string
		fields []any
		want   string
	}{
		{"bad state", []any{"key", "k", "fp", "", "created", "1", "state", "9", "attempts", "0"}, "field state"},
		{"bad created", []any{"key", "k", "fp", "", "created", "x", "state", "1", "attempts", "0"}, "field created"},
		{"bad attempts", []any{"key", "k", "fp", "", "created", "1", "state", "1", "attempts", "-1"}, "field attempts"},
		{"missing key", []any{"fp", "", "created", "1", "state", "1", "attempts", "0"}, "field key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, c.HSet(ctx, "p:rec:op", tt.fields...).Err())
			require.NoError(t, c.ZAdd(ctx, "p:idx:pending", goredis.Z{Score: 1, Member: "op"}).Err())
			_, claimed, err := s.Claim(ctx, persist.Record{Operation: "op", Key: "k"})
			require.ErrorIs(t, err, redis.ErrCorrupt)
			assert.ErrorContains(t, err, tt.want)
			assert.ErrorContains(t, err, `persist/redis: claim "op": `)
			assert.False(t, claimed)
			_, err = s.Pending(ctx)
			require.ErrorIs(t, err, redis.ErrCorrupt)
			require.NoError(t, s.Delete(ctx, "op"))
		})
	}
}

func TestWrongKeyType(t *testing.T) {
	srv := startServer(t)
	c := srv.client(t)
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "p:rec:op", "not a hash", 0).Err())
	_, _, err := redis.New(c, redis.WithPrefix("p:")).Claim(ctx, persist.Record{Operation: "op", Key: "k"})
	require.ErrorContains(t, err, `persist/redis: claim "op": `)
	assert.ErrorContains(t, err, "WRONGTYPE")
}

func TestClaimCreatedOutOfRange(t *testing.T) {
	srv := startServer(t)
	s := redis.New(srv.client(t))
	_, _, err := s.Claim(t.Context(), persist.Record{Operation: "op", Key: "k", Created: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.ErrorContains(t, err, "out of range")
}

// storeCall is one call of every Store method, for the tests of a server
// that does not answer.
type storeCall struct {
	name string
	call func(ctx context.Context) error
}

// storeCalls are the calls of every method of s, on the operation "op" with
// key "k" (claimed before) and "op2" with key "k2" (not claimed).
func storeCalls(s *redis.Store) []storeCall {
	return []storeCall{
		{"Claim", func(ctx context.Context) error {
			_, _, err := s.Claim(ctx, persist.Record{Operation: "op2", Key: "k2"})
			return err
		}},
		{"Claim existing", func(ctx context.Context) error {
			_, _, err := s.Claim(ctx, persist.Record{Operation: "op", Key: "k"})
			return err
		}},
		{"Finish", func(ctx context.Context) error { return s.Finish(ctx, "op", persist.Done, 1) }},
		{"Pending", func(ctx context.Context) error { _, err := s.Pending(ctx); return err }},
		{"Delete", func(ctx context.Context) error { return s.Delete(ctx, "nothing") }},
		{"Expire", func(ctx context.Context) error { _, err := s.Expire(ctx, time.Unix(0, 0)); return err }},
	}
}

func TestRedisDown(t *testing.T) {
	srv := startServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	s := redis.New(c)
	_, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "op", Key: "k"})
	require.NoError(t, err)
	require.True(t, claimed)
	srv.Stop()

	for _, tt := range storeCalls(s) {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err := tt.call(ctx)
			elapsed := time.Since(start)
			require.Error(t, err)
			t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
			assert.True(t, strings.HasPrefix(err.Error(), "persist/redis: "), err.Error())
			assert.NotErrorIs(t, err, persist.ErrNotFound)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "fails on its own, before the deadline")
		})
	}
}

// Environment of the child process of TestTwoProcessesClaimOneOperation.
const (
	helperAddrEnv  = "PERSIST_REDIS_HELPER_ADDR"  // the server's address
	helperStartEnv = "PERSIST_REDIS_HELPER_START" // when to claim, Unix nanoseconds
	helperNameEnv  = "PERSIST_REDIS_HELPER_NAME"  // the process's name, part of its keys
)

// helperOps is how many operations both processes claim.
const helperOps = 200

// helperResult is what a child process saw for one operation.
type helperResult struct {
	Key     string `json:"key"`
	Claimed bool   `json:"claimed"`
}

// helperClaim is the child process of TestTwoProcessesClaimOneOperation: at
// the agreed time it claims helperOps operations, from 8 goroutines, each
// with a key of its own, and prints what it got as one JSON line.
func helperClaim() int {
	addr := os.Getenv(helperAddrEnv)
	startNanos, err := strconv.ParseInt(os.Getenv(helperStartEnv), 10, 64)
	if err != nil {
		fmt.Println("bad start time:", err)
		return 2
	}
	name := os.Getenv(helperNameEnv)
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 8, MinIdleConns: 8})
	defer c.Close()
	s := redis.New(c, redis.WithPrefix("race:"))
	if err := c.Ping(context.Background()).Err(); err != nil { // connect before the start time
		fmt.Println("ping:", err)
		return 2
	}

	results := make([]helperResult, helperOps)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	time.Sleep(time.Until(time.Unix(0, startNanos)))
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < helperOps; i = int(next.Add(1)) - 1 {
				rec, claimed, err := s.Claim(context.Background(), persist.Record{
					Operation: "op" + strconv.Itoa(i), Key: name + "-" + strconv.Itoa(i),
				})
				if err != nil {
					fmt.Println("claim:", err)
					failed.Store(true)
					return
				}
				results[i] = helperResult{rec.Key, claimed}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return 1
	}
	out, err := json.Marshal(results)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("RESULTS %s\n", out)
	return 0
}

func TestTwoProcessesClaimOneOperation(t *testing.T) {
	srv := startServer(t)
	start := time.Now().Add(2 * time.Second) // time for both children to start and connect
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	names := []string{"first", "second"}
	outputs := make([][]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			helperAddrEnv+"="+srv.Addr,
			helperStartEnv+"="+strconv.FormatInt(start.UnixNano(), 10),
			helperNameEnv+"="+name,
		)
		wg.Go(func() { outputs[i], errs[i] = cmd.CombinedOutput() })
	}
	wg.Wait()

	results := make([][]helperResult, len(names))
	for i := range names {
		require.NoError(t, errs[i], "%s", outputs[i])
		results[i] = parseHelperResults(t, outputs[i])
		require.Len(t, results[i], helperOps)
	}
	wins := map[string]int{}
	for op := range helperOps {
		a, b := results[0][op], results[1][op]
		assert.Equal(t, a.Key, b.Key, "op%d: both processes get one key", op)
		assert.NotEqual(t, a.Claimed, b.Claimed, "op%d: exactly one process claims it", op)
		if a.Claimed {
			wins["first"]++
		} else {
			wins["second"]++
		}
	}
	t.Logf("claims won: %v", wins)
}

// parseHelperResults finds the RESULTS line in a child's output.
func parseHelperResults(t *testing.T, out []byte) []helperResult {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if js, ok := strings.CutPrefix(sc.Text(), "RESULTS "); ok {
			var res []helperResult
			require.NoError(t, json.Unmarshal([]byte(js), &res))
			return res
		}
	}
	t.Fatalf("no RESULTS line in the child's output:\n%s", out)
	return nil
}

func BenchmarkClaim(b *testing.B) {
	srv := startServer(b)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 64})
	b.Cleanup(func() { _ = c.Close() })
	persisttest.Benchmark(b, func(b *testing.B) persist.Store {
		return redis.New(c, redis.WithPrefix(newPrefix()))
	})
}
