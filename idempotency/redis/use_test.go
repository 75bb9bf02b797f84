package redis_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/redis"
)

// TestReadmeUse is the README's snippet for the Redis store, run: two
// instances of a service share one Redis; a retry that reaches the other
// instance gets the replay.
func TestReadmeUse(t *testing.T) {
	srv, _ := startRedis(t)
	ctx := t.Context()
	var runs atomic.Int64
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_%d"}`, runs.Add(1))
	})
	var instances []*httptest.Server
	for range 2 {
		// README: begin
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		store, err := redis.New(ctx, client) // fails if Redis has no append-only file
		if err != nil {
			log.Fatal(err)
		}
		mw, err := idempotency.New(store, idempotency.Config{})
		if err != nil {
			log.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /payments", mw.Handler(pay)) // after authentication
		// README: end
		t.Cleanup(func() { _ = client.Close() })
		instances = append(instances, httptest.NewServer(mux))
		t.Cleanup(instances[len(instances)-1].Close)
	}
	var bodies []string
	for i, want := range []string{idempotency.StatusStored, idempotency.StatusReplayed} {
		req, err := http.NewRequest(http.MethodPost, instances[i].URL+"/payments", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := instances[i].Client().Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		bodies = append(bodies, string(body))
		assert.Equal(t, want, resp.Header.Get("Idempotency-Status"), "instance %d", i)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	assert.Equal(t, bodies[0], bodies[1])
	assert.Equal(t, int64(1), runs.Load(), "one run across both instances")
}
