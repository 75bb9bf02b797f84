package redis_test

import (
	"strconv"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/redis"
)

// TestClaimBatchesManyCallers: 64 goroutines claim 50 operations each, every
// operation twice under different keys; both claims of an operation get one
// key, and each operation is claimed once.
func TestClaimBatchesManyCallers(t *testing.T) {
	srv := startServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 8})
	defer c.Close()
	s := redis.New(c, redis.WithPrefix(newPrefix()))
	const goroutines, perG = 64, 50
	var mu sync.Mutex
	keys := map[string]string{}
	created := map[string]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				op := "op" + strconv.Itoa((g/2)*perG+i) // goroutines 2n and 2n+1 share operations
				rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: op, Key: op + "/" + strconv.Itoa(g)})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				if k, ok := keys[op]; ok {
					assert.Equal(t, k, rec.Key, op)
				}
				keys[op] = rec.Key
				if claimed {
					created[op]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, keys, goroutines/2*perG)
	for op, n := range created {
		assert.Equal(t, 1, n, op)
	}
	assert.Len(t, created, goroutines/2*perG)
}
