package redis_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency/internal/v1fixture"
	"github.com/resilienthttp/resilient/idempotency/redis"
)

// TestV1Records: records written by scope and fingerprint version 1
// (e10c1d1), loaded with their expiry moved an hour ahead, are honoured by
// the current middleware and Inbox.
func TestV1Records(t *testing.T) {
	raw, err := os.ReadFile("../internal/v1fixture/redis.json")
	require.NoError(t, err)
	var dump struct {
		Records map[string]map[string]string
		Index   map[string]float64
	}
	require.NoError(t, json.Unmarshal(raw, &dump))
	require.Len(t, dump.Records, 4)
	_, c := startRedis(t)
	ctx := context.Background()
	prefix := newPrefix()
	exp := time.Now().Add(time.Hour)
	for member, fields := range dump.Records {
		require.Equal(t, "d", fields["st"])
		fields["exp"] = strconv.FormatInt(exp.UnixMicro(), 10)
		require.NoError(t, c.HSet(ctx, prefix+member, fields).Err())
		require.NoError(t, c.PExpireAt(ctx, prefix+member, exp.Add(time.Hour)).Err())
		require.NoError(t, c.ZAdd(ctx, prefix+"idx", goredisZ(exp, member)).Err())
	}
	store, err := redis.New(ctx, c, redis.WithPrefix(prefix))
	require.NoError(t, err)
	v1fixture.Check(t, store)
}

func goredisZ(exp time.Time, member string) goredis.Z {
	return goredis.Z{Score: float64(exp.UnixMicro()), Member: member}
}
