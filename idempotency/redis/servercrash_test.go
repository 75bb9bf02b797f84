package redis_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/internal/servercrash"
	"github.com/resilienthttp/resilient/idempotency/redis"
)

// openCrashServer opens a matrix server's Store from "ADDR PREFIX EFFECTS":
// the Redis Store, and effects appended to a file (elsewhere than Redis).
func openCrashServer(arg string) (idempotency.Store, servercrash.Effect, func(), error) {
	f := strings.Fields(arg)
	if len(f) != 3 {
		return nil, nil, nil, fmt.Errorf("store %q: want ADDR PREFIX EFFECTS", arg)
	}
	c := goredis.NewClient(&goredis.Options{Addr: f[0]})
	s, err := redis.New(context.Background(), c, redis.WithPrefix(f[1]))
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	effect, closeFile, err := servercrash.FileEffect(f[2])
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	return s, effect, func() { closeFile(); _ = c.Close() }, nil
}

// TestServerCrashMatrix is the server crash matrix (internal/servercrash)
// on the Redis Store (a redis-server with appendfsync always, which the
// matrix does not kill) with the effect elsewhere: the server is killed
// before the handler, in it, after its effect, after the stored answer, and
// at random, and restarted on the same Redis. Its promise: nothing lost,
// and a duplicate only for an operation killed between its effect and its
// stored answer (its claim ends at its lease, the retry runs again).
// IDEMPOTENCY_CRASH_KILLS sets the number of kills (default 10).
func TestServerCrashMatrix(t *testing.T) {
	srv, _ := startRedis(t)
	effects := filepath.Join(t.TempDir(), "effects")
	servercrash.Run(t, servercrash.Config{
		Name: "redis", Arg: srv.Addr + " " + newPrefix() + " " + effects, Promise: servercrash.Durable,
		Kills:   servercrash.Kills(t, 10),
		Effects: func(t *testing.T) map[string][]string { return servercrash.FileEffects(t, effects) },
	})
}
