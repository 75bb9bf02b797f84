package redis_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	crashAddrEnv = "RESILIENT_REDIS_CRASH_ADDR"
	crashURLEnv  = "RESILIENT_REDIS_CRASH_URL"
)

// crashChild is the client process of TestCrashResumeWithRedis: it issues a
// refund as the operation "refund:ch_123" with its key in Redis and prints
// the key and the answer.
func crashChild() int {
	c := goredis.NewClient(&goredis.Options{Addr: os.Getenv(crashAddrEnv)})
	defer c.Close()
	client := resilient.NewClient(resilient.WithStore(redis.New(c, redis.WithPrefix("crash:"))),
		resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, 50*time.Millisecond)))
	rep := new(resilient.Report)
	ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), "refund:ch_123"), rep)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv(crashURLEnv)+"/v1/refunds",
		strings.NewReader(`{"charge":"ch_123","amount":1000}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	resp.Body.Close()
	fmt.Println("done", rep.Key, resp.StatusCode, resp.Header.Get("Idempotency-Status"))
	return 0
}

// TestCrashResumeWithRedis kills a client with SIGKILL after the server
// committed its refund (the response was lost and the retry hangs); a second
// process sharing the Redis store resumes with the same key and gets the
// stored answer: exactly one effect.
func TestCrashResumeWithRedis(t *testing.T) {
	rs := startServer(t)
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/refunds",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}, {Kind: fakeserver.FaultHang}},
	}))
	defer srv.Close()
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashAddrEnv+"="+rs.Addr, crashURLEnv+"="+srv.URL)
		return cmd
	}

	first := child()
	require.NoError(t, first.Start())
	deadline := time.Now().Add(20 * time.Second)
	for srv.Stats().Requests < 2 { // the lost response, then the hanging retry
		if time.Now().After(deadline) {
			first.Process.Kill()
			first.Wait()
			t.Fatal("the first client never retried")
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, first.Process.Kill())
	first.Wait()
	ledger := srv.Ledger()
	require.Len(t, ledger, 1, "the refund was committed before the crash")

	out, err := child().Output()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, fmt.Sprintf("done %s 201 replayed", ledger[0].Key), strings.TrimSpace(string(out)))
	assert.Equal(t, 1, srv.TotalEffects())
	assert.Zero(t, srv.Stats().DuplicateEffects)
}
