package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/internal/redistest"
)

// server is a redis-server for the Redis store's tests (internal/redistest).
type server struct{ *redistest.Server }

// startServer starts a redis-server on a free loopback port, in a temporary
// directory, without persistence, and stops it when t ends. A missing
// redis-server fails the test: scripts/test installs it.
func startServer(t testing.TB) *server {
	t.Helper()
	return &server{redistest.Start(t, redistest.Config{})}
}

// client returns a client of the server, closed when t ends.
func (s *server) client(t testing.TB) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestServerHelper(t *testing.T) {
	srv := startServer(t)
	require.NoError(t, srv.client(t).Ping(t.Context()).Err())
}
