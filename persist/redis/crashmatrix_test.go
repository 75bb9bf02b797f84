package redis_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The environment of a child of TestCrashMatrixWithRedis.
const (
	matrixAddrEnv   = "RESILIENT_REDIS_MATRIX_ADDR"   // set: this process is a matrix child; Redis's address
	matrixPrefixEnv = "RESILIENT_REDIS_MATRIX_PREFIX" // the Store's key prefix
	matrixURLEnv    = "RESILIENT_REDIS_MATRIX_URL"    // the API's base URL
	matrixOpsEnv    = "RESILIENT_REDIS_MATRIX_OPS"    // operations 0..N-1 exist
	matrixSkipEnv   = "RESILIENT_REDIS_MATRIX_SKIP"   // operations already completed, comma-separated
	matrixKillEnv   = "RESILIENT_REDIS_MATRIX_KILL"   // "phase:op": where the parent will kill it
)

// The kill points of the bolt crash matrix (e2e/crash_test.go), which this
// test mirrors with the Redis Store. The child stops at the deterministic
// ones itself (it prints "at PHASE OP" and sleeps until the parent's
// SIGKILL); random is a SIGKILL at a random time.
const (
	// claimed: the operation's key is durable in the Store, nothing is sent.
	killClaimed = "claimed"
	// sent: the server has committed the effect and answered; the answer has
	// not reached the Transport.
	killSent = "sent"
	// backoff-after-effect: attempt 0 reached the server, committed, and its
	// connection was reset; the Transport sleeps before the retry.
	killBackoffAfterEffect = "backoff-after-effect"
	// backoff-before-effect: attempt 0 was answered 503 by a gateway that
	// never reached the server; the Transport sleeps before the retry.
	killBackoffBeforeEffect = "backoff-before-effect"
	killRandom              = "random"
	// The same four in the second hop of an operation that goes through a
	// 307 or 308 redirect, after the client follows it.
	killHopClaimed             = "hop-claimed"
	killHopSent                = "hop-sent"
	killHopBackoffAfterEffect  = "hop-backoff-after-effect"
	killHopBackoffBeforeEffect = "hop-backoff-before-effect"
)

// hopPhase reports whether a kill point is in the second hop of a redirect.
func hopPhase(phase string) bool { return strings.HasPrefix(phase, "hop-") }

// matrixOps is the number of operations of each row: 0 and 2 go to POST
// /v1/charges directly, 1 through a 307 and 3 through a 308.
const matrixOps = 4

// redirectCode is the status of the redirect operation n goes through, 0
// for none.
func redirectCode(n int) int {
	switch n {
	case 1:
		return http.StatusTemporaryRedirect
	case 3:
		return http.StatusPermanentRedirect
	}
	return 0
}

// redirectPath redirects to /v1/charges with the status in its code parameter.
const redirectPath = "/v1/redirect/charges"

// redirecting answers POST redirectPath with its redirect to /v1/charges,
// as a gateway that moved a route would; nothing is created.
func redirecting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != redirectPath {
			next.ServeHTTP(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil || (code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect) {
			http.Error(w, "bad code", http.StatusBadRequest)
			return
		}
		w.Header().Set("Location", "/v1/charges")
		w.WriteHeader(code)
	})
}

// opName is the Store's name of operation n.
func opName(n int) string { return "charge:" + strconv.Itoa(n) }

// matrixChild is the client process of TestCrashMatrixWithRedis: it opens
// the Redis Store, resumes every pending operation (Store.Pending), then
// issues the others one by one, and prints "ready", "resume OP KEY STATUS",
// "done OP KEY STATUS", "at PHASE OP" (then waits to be killed) and
// "pending N" at the end.
func matrixChild() int {
	fail := func(format string, args ...any) int {
		fmt.Printf("error "+format+"\n", args...)
		return 1
	}
	n, err := strconv.Atoi(os.Getenv(matrixOpsEnv))
	if err != nil {
		return fail("%v", err)
	}
	skip := map[int]bool{}
	for _, f := range strings.FieldsFunc(os.Getenv(matrixSkipEnv), func(r rune) bool { return r == ',' }) {
		k, err := strconv.Atoi(f)
		if err != nil {
			return fail("%s: %v", matrixSkipEnv, err)
		}
		skip[k] = true
	}
	phase, killOp := "", -1
	if k := os.Getenv(matrixKillEnv); k != "" {
		p, o, _ := strings.Cut(k, ":")
		phase = p
		killOp, _ = strconv.Atoi(o)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: os.Getenv(matrixAddrEnv)})
	defer rc.Close()
	store := redis.New(rc, redis.WithPrefix(os.Getenv(matrixPrefixEnv)))

	backoff := resilient.Exponential(5*time.Millisecond, 20*time.Millisecond)
	if strings.Contains(phase, "backoff") {
		backoff = resilient.Exponential(5*time.Second, 5*time.Second) // the parent kills it meanwhile
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	base := &matrixBase{next: tr, phase: phase, op: killOp}
	client := &http.Client{Transport: resilient.NewTransport(base,
		resilient.WithStore(store), resilient.WithBackoff(backoff),
		resilient.WithObserver(func(ctx context.Context, e resilient.Event) {
			if e.Kind == resilient.EventRetry && e.Operation == opName(killOp) && strings.Contains(phase, "backoff") {
				fmt.Printf("at %s %d\n", phase, killOp) // the backoff sleep follows
			}
		}))}
	issue := func(n int) (string, int, error) {
		var rep resilient.Report
		ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), opName(n)), &rep)
		url := os.Getenv(matrixURLEnv) + "/v1/charges"
		if c := redirectCode(n); c != 0 {
			url = os.Getenv(matrixURLEnv) + redirectPath + "?code=" + strconv.Itoa(c)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"amount":%d,"op":%d}`, 100+n, n)))
		if err != nil {
			return "", 0, err
		}
		req.Header.Set("X-Test-Op", strconv.Itoa(n))
		resp, err := client.Do(req)
		if err != nil {
			return rep.Key, 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return rep.Key, resp.StatusCode, nil
	}

	fmt.Println("ready")
	pending, err := store.Pending(context.Background())
	if err != nil {
		return fail("pending: %v", err)
	}
	resumed := map[int]bool{}
	for _, rec := range pending {
		k, err := strconv.Atoi(strings.TrimPrefix(rec.Operation, "charge:"))
		if err != nil {
			return fail("pending operation %q", rec.Operation)
		}
		key, status, err := issue(k)
		if err != nil {
			return fail("resume %d: %v", k, err)
		}
		if key != rec.Key {
			return fail("resume %d: sent key %s, the Store holds %s", k, key, rec.Key)
		}
		fmt.Printf("resume %d %s %d\n", k, key, status)
		resumed[k] = true
	}
	for k := range n {
		if resumed[k] || skip[k] {
			continue
		}
		key, status, err := issue(k)
		if err != nil {
			return fail("op %d: %v", k, err)
		}
		fmt.Printf("done %d %s %d\n", k, key, status)
	}
	pending, err = store.Pending(context.Background())
	if err != nil {
		return fail("pending: %v", err)
	}
	fmt.Printf("pending %d\n", len(pending))
	return 0
}

// matrixBase is the child's base transport: it stops at the kill point of
// its phase for operation op (the X-Test-Op header): at its attempt 0, or
// for a hop phase at the first request of its second hop.
type matrixBase struct {
	next  http.RoundTripper
	phase string
	op    int
	hop   atomic.Bool // the second hop's first request was seen
}

func (b *matrixBase) RoundTrip(req *http.Request) (*http.Response, error) {
	mine := req.Header.Get("X-Test-Op") == strconv.Itoa(b.op)
	if hopPhase(b.phase) {
		mine = mine && req.URL.Path == "/v1/charges" && b.hop.CompareAndSwap(false, true)
	} else {
		mine = mine && req.Header.Get("Retry-Attempt") == "" // a first attempt
	}
	if !mine {
		return b.next.RoundTrip(req)
	}
	phase := strings.TrimPrefix(b.phase, "hop-")
	switch phase {
	case killClaimed:
		fmt.Printf("at %s %d\n", b.phase, b.op)
		waitForKill()
	case killBackoffBeforeEffect:
		if req.Body != nil {
			req.Body.Close()
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch phase {
	case killSent:
		fmt.Printf("at %s %d\n", b.phase, b.op)
		waitForKill()
	case killBackoffAfterEffect:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	return resp, nil
}

// waitForKill sleeps until the parent's SIGKILL arrives; a parent that never
// sends it gets a child that exits with status 3.
func waitForKill() {
	time.Sleep(time.Minute)
	os.Exit(3)
}

// runMatrixChild runs one child and kills it at kill ("phase:op",
// "random:DELAY_MS" or "" for none). It returns the lines the child printed
// and whether SIGKILL ended it.
func runMatrixChild(t *testing.T, env []string, skip []string, kill string) (lines []string, killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), matrixSkipEnv+"="+strings.Join(skip, ","))
	phase, arg, _ := strings.Cut(kill, ":")
	if phase != killRandom && kill != "" {
		cmd.Env = append(cmd.Env, matrixKillEnv+"="+kill)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var timer *time.Timer
	if phase == killRandom {
		ms, _ := strconv.Atoi(arg)
		timer = time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { _ = cmd.Process.Kill() })
	}
	watchdog := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if strings.HasPrefix(line, "at ") {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
		}
	}
	watchdog.Stop()
	err = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return lines, true
		}
	}
	require.NoError(t, err, "child: %v", lines)
	return lines, false
}

// TestCrashMatrixWithRedis is the bolt crash matrix of e2e/crash_test.go
// with the Redis Store, at every kill point it uses: after the claim and
// before sending, after the server committed, during the backoff before a
// retry (with and without an effect), each also in the second hop of an
// operation that goes through a 307 and one that goes through a 308
// redirect, and at a random time. For each, a client process is killed
// with SIGKILL there, then a second process sharing the Redis Store resumes
// the pending operations (Store.Pending, ContextWithOperation) and issues
// the rest. The operation killed at a kill point is resumed (it was
// pending: not lost, not marked done by a redirect hop), every operation
// has exactly one effect under the key it was sent with, and nothing is
// left pending.
func TestCrashMatrixWithRedis(t *testing.T) {
	rs := startServer(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random kill delays drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	tests := []struct {
		phase string
		op    int // -1 for a random kill
	}{
		{killClaimed, 2},
		{killSent, 2},
		{killBackoffAfterEffect, 2},
		{killBackoffBeforeEffect, 2},
		{killHopClaimed, 1},
		{killHopClaimed, 3},
		{killHopSent, 1},
		{killHopSent, 3},
		{killHopBackoffAfterEffect, 1},
		{killHopBackoffAfterEffect, 3},
		{killHopBackoffBeforeEffect, 1},
		{killHopBackoffBeforeEffect, 3},
		{killRandom, -1},
	}
	for _, tt := range tests {
		name := tt.phase
		if tt.op >= 0 {
			name = fmt.Sprintf("%s op %d (redirect %d)", tt.phase, tt.op, redirectCode(tt.op))
		}
		t.Run(name, func(t *testing.T) {
			fs := fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges",
				Mix: []fakeserver.Fault{{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(10 * time.Millisecond), Probability: 1}}}))
			srv := httptest.NewUnstartedServer(redirecting(fs.Handler()))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.Start()
			defer func() {
				srv.Close()
				fs.Close()
			}()
			env := []string{matrixAddrEnv + "=" + rs.addr, matrixPrefixEnv + "=" + newPrefix(), matrixURLEnv + "=" + srv.URL,
				matrixOpsEnv + "=" + strconv.Itoa(matrixOps)}
			kill := fmt.Sprintf("%s:%d", tt.phase, tt.op)
			if tt.phase == killRandom {
				kill = fmt.Sprintf("%s:%d", killRandom, 15+rng.IntN(50))
			}

			keys := map[int]string{}
			completed := map[int]bool{}
			record := func(lines []string) (resumed []int) {
				for _, line := range lines {
					f := strings.Fields(line)
					switch f[0] {
					case "done", "resume":
						require.Len(t, f, 4, line)
						k, _ := strconv.Atoi(f[1])
						require.Equal(t, "201", f[3], line)
						if prev, ok := keys[k]; ok {
							require.Equal(t, prev, f[2], "op %d was sent under two keys", k)
						}
						keys[k], completed[k] = f[2], true
						if f[0] == "resume" {
							resumed = append(resumed, k)
						}
					case "error":
						t.Fatalf("child: %s", line)
					}
				}
				return resumed
			}

			lines, killed := runMatrixChild(t, env, nil, kill)
			record(lines)
			if tt.op >= 0 {
				require.True(t, killed, "the child reached its kill point and was killed: %v", lines)
				require.Equal(t, fmt.Sprintf("at %s %d", tt.phase, tt.op), lines[len(lines)-1])
				require.False(t, completed[tt.op])
			}
			var skip []string
			for k := range completed {
				skip = append(skip, strconv.Itoa(k))
			}
			lines, killed = runMatrixChild(t, env, skip, "")
			require.False(t, killed)
			resumed := record(lines)
			if tt.op >= 0 {
				assert.Equal(t, []int{tt.op}, resumed, "the killed operation, and only it, was pending and resumed from Store.Pending")
			}
			require.NotEmpty(t, lines)
			assert.Equal(t, "pending 0", lines[len(lines)-1], "operations left pending")

			effects := map[int][]fakeserver.Entry{}
			for _, e := range fs.Ledger() {
				var obj struct {
					Op int `json:"op"`
				}
				require.NoError(t, json.Unmarshal(e.Object, &obj))
				effects[obj.Op] = append(effects[obj.Op], e)
			}
			for k := range matrixOps {
				if assert.Len(t, effects[k], 1, "op %d: effects", k) {
					assert.Equal(t, keys[k], effects[k][0].Key, "op %d: the effect's key", k)
				}
			}
			assert.Len(t, effects, matrixOps, "effects for operations that do not exist")
			assert.Zero(t, fs.Stats().DuplicateEffects)
		})
	}
}
