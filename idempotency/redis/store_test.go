package redis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/redis"
	"github.com/resilienthttp/resilient/internal/redistest"
)

func TestPersistenceCheck(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		opts     []redis.Option
		wantErr  error
		wantWarn string
	}{
		{"aof always", durable, nil, nil, ""},
		{"aof everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, nil, nil, "appendfsync is not always"},
		{"aof fsync no", []string{"--appendonly", "yes", "--appendfsync", "no"}, nil, nil, "appendfsync is not always"},
		{"no aof", nil, nil, redis.ErrNotDurable, ""},
		{"no aof, volatile allowed", nil, []redis.Option{redis.AllowVolatile()}, nil, "without the append-only file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t, redistest.Config{Args: tt.args})
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
			t.Cleanup(func() { _ = c.Close() })
			var logs bytes.Buffer
			opts := append([]redis.Option{redis.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, tt.opts...)
			s, err := redis.New(t.Context(), c, opts...)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, s)
				return
			}
			require.NoError(t, err)
			if tt.wantWarn == "" {
				assert.Empty(t, logs.String())
			} else {
				assert.Contains(t, logs.String(), tt.wantWarn)
				assert.Contains(t, logs.String(), "level=WARN")
			}
		})
	}
}

func TestConfigUnreadable(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Args: append(append([]string(nil), durable...), "--rename-command", "CONFIG", "")})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	_, err := redis.New(t.Context(), c)
	require.Error(t, err, "CONFIG disabled: New cannot check persistence and says so")
	assert.Contains(t, err.Error(), "AllowVolatile")
	var logs bytes.Buffer
	_, err = redis.New(t.Context(), c, redis.AllowVolatile(), redis.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "cannot read Redis's persistence settings")
}

var (
	scope = idempotency.Scope{Route: "POST /v1/payments", Key: "k"}
	fp    = idempotency.Fingerprint(sha256.Sum256([]byte("payload")))
)

// A claim whose lease ran out is taken over, never run twice at once; the
// old claim can no longer store or release.
func TestLeaseTakeover(t *testing.T) {
	_, c := startRedis(t)
	s := newStore(t, c)
	ctx := context.Background()
	now := time.Now()
	first, err := s.Begin(ctx, scope, fp, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, first.State)
	busy, err := s.Begin(ctx, scope, fp, now.Add(59*time.Second), now.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, busy.State, "within the lease")
	taken, err := s.Begin(ctx, scope, fp, now.Add(time.Minute), now.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, taken.State, "at the lease's end the claim is taken over")
	resp := &idempotency.Response{Status: 201, Header: http.Header{"Location": {"/x"}}, Body: []byte("late")}
	assert.ErrorIs(t, first.Claim.Complete(ctx, resp, now.Add(time.Hour)), idempotency.ErrClaimEnded)
	assert.ErrorIs(t, first.Claim.Release(ctx), idempotency.ErrClaimEnded)
	resp.Body = []byte("second")
	require.NoError(t, taken.Claim.Complete(ctx, resp, now.Add(time.Hour)))
	assert.ErrorIs(t, taken.Claim.Release(ctx), idempotency.ErrClaimEnded, "a claim ends once")
	again, err := s.Begin(ctx, scope, fp, now.Add(time.Minute), now.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Replay, again.State)
	assert.Equal(t, resp, again.Response)
}

// Redis deletes a record itself after its lease or expiry plus a margin,
// whether or not Sweep runs.
func TestRedisTTL(t *testing.T) {
	_, c := startRedis(t)
	s := newStore(t, c, redis.WithPrefix("ttl:"))
	ctx := context.Background()
	now := time.Now()
	b, err := s.Begin(ctx, scope, fp, now, now.Add(time.Minute))
	require.NoError(t, err)
	keys, err := c.Keys(ctx, "ttl:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	ttl := c.PTTL(ctx, keys[0]).Val()
	assert.InDelta(t, (time.Hour + time.Minute).Seconds(), ttl.Seconds(), 30, "lease + 1 h")
	require.NoError(t, b.Claim.Complete(ctx, &idempotency.Response{Status: 200}, now.Add(24*time.Hour)))
	ttl = c.PTTL(ctx, keys[0]).Val()
	assert.InDelta(t, (25 * time.Hour).Seconds(), ttl.Seconds(), 30, "expiry + 1 h")
}

// With appendfsync always, a stored answer survives a SIGKILL of Redis: the
// restarted server replays it.
func TestSurvivesRedisCrash(t *testing.T) {
	dir := t.TempDir()
	srv := redistest.Start(t, redistest.Config{Dir: dir, Args: durable})
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c)
	ctx := context.Background()
	now := time.Now()
	b, err := s.Begin(ctx, scope, fp, now, now.Add(time.Minute))
	require.NoError(t, err)
	want := &idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
	require.NoError(t, b.Claim.Complete(ctx, want, now.Add(time.Hour)))
	srv.Stop() // SIGKILL
	srv.Restart(t)
	var got idempotency.Begun
	require.Eventually(t, func() bool { // the client redials
		got, err = s.Begin(ctx, scope, fp, now, now.Add(time.Minute))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, idempotency.Replay, got.State, "the stored answer survived the crash")
	assert.Equal(t, want, got.Response)
}

func TestCorruptRecord(t *testing.T) {
	_, c := startRedis(t)
	s := newStore(t, c, redis.WithPrefix("bad:"))
	ctx := context.Background()
	h := scope.Hash()
	key := "bad:" + hex.EncodeToString(h[:])
	require.NoError(t, c.HSet(ctx, key, "st", "d", "fp", hex.EncodeToString(fp[:]), "exp", time.Now().Add(time.Hour).UnixMicro(),
		"status", "20x", "hdr", "{}", "body", "").Err())
	_, err := s.Begin(ctx, scope, fp, time.Now(), time.Now().Add(time.Minute))
	assert.ErrorIs(t, err, redis.ErrCorrupt)
}

// A Redis that stops answering: with ContextTimeoutEnabled (the package
// documentation asks for it), Begin returns at the request's deadline, and
// the middleware answers 503 having run nothing.
func TestFrozenRedisEndsAtDeadline(t *testing.T) {
	srv, _ := startRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c)
	srv.Freeze(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := s.Begin(ctx, scope, fp, time.Now(), time.Now().Add(time.Minute))
	require.ErrorIs(t, err, context.DeadlineExceeded, "the request's deadline, not the client's read timeout of a minute")
	srv.Thaw()
}

// The bound of the Redis store: a renewed claim is held; one whose owner
// stopped renewing passes on a lease after its last renewal, and the old
// owner can neither renew nor store.
func TestLeaseRenewBound(t *testing.T) {
	_, c := startRedis(t)
	s := newStore(t, c)
	ctx := context.Background()
	now := time.Now()
	first, err := s.Begin(ctx, scope, fp, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, first.State)
	last := now
	for i := 1; i <= 5; i++ { // renewed every 40 s: held for 200 s
		last = now.Add(time.Duration(i) * 40 * time.Second)
		require.NoError(t, first.Claim.(idempotency.Renewer).Renew(ctx, last.Add(time.Minute)))
		b, err := s.Begin(ctx, scope, fp, last.Add(time.Second), last.Add(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, idempotency.Busy, b.State, "renewed at %v", last.Sub(now))
	}
	busy, err := s.Begin(ctx, scope, fp, last.Add(time.Minute-time.Microsecond), last.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, busy.State, "within a lease of the last renewal")
	taken, err := s.Begin(ctx, scope, fp, last.Add(time.Minute), last.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, taken.State, "a lease after the last renewal")
	assert.ErrorIs(t, first.Claim.(idempotency.Renewer).Renew(ctx, last.Add(3*time.Minute)), idempotency.ErrClaimEnded)
	assert.ErrorIs(t, first.Claim.Complete(ctx, &idempotency.Response{Status: 201}, now.Add(time.Hour)), idempotency.ErrClaimEnded)
	require.NoError(t, taken.Claim.Release(ctx))
	assert.ErrorIs(t, taken.Claim.(idempotency.Renewer).Renew(ctx, last.Add(3*time.Minute)), idempotency.ErrClaimEnded)
}

// Lookup reads a record's state without claiming it.
func TestLookup(t *testing.T) {
	_, c := startRedis(t)
	s := newStore(t, c)
	ctx := context.Background()
	t0 := time.UnixMicro(time.Now().UnixMicro())
	none, err := s.Lookup(ctx, scope, t0)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Record{}, none)
	b, err := s.Begin(ctx, scope, fp, t0, t0.Add(time.Minute))
	require.NoError(t, err)
	busy, err := s.Lookup(ctx, scope, t0)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Record{State: idempotency.Busy, Fingerprint: fp, Lease: t0.Add(time.Minute)}, busy)
	require.NoError(t, b.Claim.(idempotency.Renewer).Renew(ctx, t0.Add(2*time.Minute)))
	busy, err = s.Lookup(ctx, scope, t0.Add(90*time.Second))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, busy.State, "renewed")
	again, err := s.Begin(ctx, scope, fp, t0.Add(90*time.Second), t0.Add(3*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, idempotency.Busy, again.State, "Lookup claimed nothing")
	resp := &idempotency.Response{Status: 201, Header: http.Header{"Location": {"/x"}}, Body: []byte("ok")}
	require.NoError(t, b.Claim.Complete(ctx, resp, t0.Add(time.Hour)))
	done, err := s.Lookup(ctx, scope, t0)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Record{State: idempotency.Replay, Fingerprint: fp, Response: resp, Expires: t0.Add(time.Hour)}, done)
	old, err := s.Lookup(ctx, scope, t0.Add(time.Hour))
	require.NoError(t, err)
	assert.True(t, old.Expired)
	assert.Equal(t, idempotency.State(0), old.State)
}
