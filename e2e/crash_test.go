package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist/bolt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The crash child's environment.
const (
	crashChildEnv = "E2E_CRASH_CHILD" // set: this process is a crash child
	crashURLEnv   = "E2E_CRASH_URL"   // the API's base URL
	crashDBEnv    = "E2E_CRASH_DB"    // the bolt file
	crashOpsEnv   = "E2E_CRASH_OPS"   // operations 0..N-1 exist
	crashSkipEnv  = "E2E_CRASH_SKIP"  // operations already completed, comma-separated
	crashKillEnv  = "E2E_CRASH_KILL"  // "phase:op": where the parent will kill it
)

// Kill points. The child stops at claimed, sent and backoff itself (it
// prints "at PHASE OP" and sleeps until the parent's SIGKILL); random is a
// SIGKILL at a random time, wherever the child is.
const (
	// claimed: the operation's key is durable in the Store, nothing is sent.
	killClaimed = "claimed"
	// sent: the server has committed the effect and answered; the answer has
	// not reached the Transport.
	killSent = "sent"
	// backoff: attempt 0 reached the server, committed, and its connection
	// was reset; the Transport sleeps before the retry.
	killBackoffAfterEffect = "backoff-after-effect"
	// backoff: attempt 0 was answered 503 by a gateway that never reached
	// the server; the Transport sleeps before the retry.
	killBackoffBeforeEffect = "backoff-before-effect"
	killRandom              = "random"
	// The same four kill points in the second hop of an operation that
	// goes through a 307 or 308 redirect (see redirects): after the first
	// hop's redirect was answered and the client follows it.
	killHopClaimed             = "hop-claimed"
	killHopSent                = "hop-sent"
	killHopBackoffAfterEffect  = "hop-backoff-after-effect"
	killHopBackoffBeforeEffect = "hop-backoff-before-effect"
)

// crashPhases are the kill points of the crash matrices, in the order the
// first kills take them (each once), before random draws.
var crashPhases = []string{killClaimed, killSent, killBackoffAfterEffect, killBackoffBeforeEffect,
	killHopClaimed, killHopSent, killHopBackoffAfterEffect, killHopBackoffBeforeEffect, killRandom}

// hopPhase reports whether a kill point is in the second hop of a redirect.
func hopPhase(phase string) bool { return strings.HasPrefix(phase, "hop-") }

// redirectCode is the status of the redirect that operation n goes
// through before it reaches POST /v1/charges (307, 308), or 0 if it goes
// there directly: a quarter of the operations each way, half directly.
func redirectCode(n int) int {
	switch n % 4 {
	case 1:
		return http.StatusTemporaryRedirect
	case 3:
		return http.StatusPermanentRedirect
	}
	return 0
}

// redirectPath is the path that redirects to /v1/charges with the status
// given in its code parameter.
const redirectPath = "/v1/redirect/charges"

// redirecting is the API's middleware that answers POST redirectPath with
// its redirect to /v1/charges (the body is read, nothing is created), as a
// gateway that moved a route would.
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

// opURL is the URL operation n is first sent to.
func opURL(base string, n int) string {
	if c := redirectCode(n); c != 0 {
		return base + redirectPath + "?code=" + strconv.Itoa(c)
	}
	return base + "/v1/charges"
}

// opName is the Store's name of operation n.
func opName(n int) string { return "charge:" + strconv.Itoa(n) }

// crashChild is the client process of TestCrashMatrix. It opens the bolt
// Store, resumes every pending operation (Store.Pending, each re-issued with
// ContextWithOperation), then issues operations START..N-1 one by one, and
// prints a line per event: "ready", "resume OP KEY STATUS", "done OP KEY
// STATUS", "at PHASE OP" (then waits to be killed), "pending N" at the end.
func crashChild() int {
	fail := func(format string, args ...any) int {
		fmt.Printf("error "+format+"\n", args...)
		return 1
	}
	n, err := strconv.Atoi(os.Getenv(crashOpsEnv))
	if err != nil {
		return fail("%v", err)
	}
	skip := map[int]bool{}
	for _, f := range strings.FieldsFunc(os.Getenv(crashSkipEnv), func(r rune) bool { return r == ',' }) {
		k, err := strconv.Atoi(f)
		if err != nil {
			return fail("%s: %v", crashSkipEnv, err)
		}
		skip[k] = true
	}
	phase, killOp := "", -1
	if k := os.Getenv(crashKillEnv); k != "" {
		p, o, _ := strings.Cut(k, ":")
		phase = p
		killOp, _ = strconv.Atoi(o)
	}
	store, err := bolt.Open(os.Getenv(crashDBEnv))
	if err != nil {
		return fail("open: %v", err)
	}
	defer store.Close()

	backoff := resilient.Exponential(5*time.Millisecond, 20*time.Millisecond)
	if strings.Contains(phase, "backoff") {
		backoff = resilient.Exponential(5*time.Second, 5*time.Second) // the parent kills it meanwhile
	}
	base := &crashBase{next: &http.Transport{}, phase: phase, op: killOp}
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
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, opURL(os.Getenv(crashURLEnv), n), strings.NewReader(chargeBody(n)))
		if err != nil {
			return "", 0, err
		}
		req.Header.Set("X-E2E-Op", strconv.Itoa(n))
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

// crashBase is the crash child's base transport: it stops at the kill point
// of its phase for operation op (the X-E2E-Op header): at its attempt 0, or
// for a hop phase at the first request of its second hop (POST /v1/charges
// after the redirect).
type crashBase struct {
	next  http.RoundTripper
	phase string
	op    int
	hop   atomic.Bool // the second hop's first request was seen
}

func (b *crashBase) RoundTrip(req *http.Request) (*http.Response, error) {
	mine := req.Header.Get("X-E2E-Op") == strconv.Itoa(b.op)
	if hopPhase(b.phase) {
		mine = mine && req.URL.Path == "/v1/charges" && b.hop.CompareAndSwap(false, true)
	} else {
		mine = mine && req.Header.Get("Retry-Attempt") == "" // a first attempt
	}
	if !mine {
		return b.next.RoundTrip(req)
	}
	switch strings.TrimPrefix(b.phase, "hop-") {
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
	switch strings.TrimPrefix(b.phase, "hop-") {
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

// incarnation is what one run of the crash child printed.
type incarnation struct {
	kill    string // the planned kill point, "" for none
	killed  bool
	lines   []string
	exitErr error
}

// runCrashChild runs one incarnation of the child, which skips the
// operations in completed, and kills it at kill ("phase:op",
// "random:DELAY_MS" or "" for no kill).
func runCrashChild(t *testing.T, url, db string, ops int, completed map[int]bool, kill string) incarnation {
	t.Helper()
	var skip []string
	for k := range completed {
		skip = append(skip, strconv.Itoa(k))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashURLEnv+"="+url, crashDBEnv+"="+db,
		crashOpsEnv+"="+strconv.Itoa(ops), crashSkipEnv+"="+strings.Join(skip, ","))
	phase, arg, _ := strings.Cut(kill, ":")
	if phase != killRandom && kill != "" {
		cmd.Env = append(cmd.Env, crashKillEnv+"="+kill)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	inc := incarnation{kill: kill}
	var timer *time.Timer
	if phase == killRandom {
		ms, _ := strconv.Atoi(arg)
		timer = time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { _ = cmd.Process.Kill() })
	}
	watchdog := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		inc.lines = append(inc.lines, line)
		if strings.HasPrefix(line, "at ") {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
		}
	}
	watchdog.Stop()
	inc.exitErr = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	var ee *exec.ExitError
	if errors.As(inc.exitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			inc.killed = true
		}
	}
	return inc
}

// TestCrashMatrix kills the client process with SIGKILL at points of its
// operations — after the Store claim and before sending, after the server
// committed, during the backoff before a retry (with and without an
// effect), each also in the second hop of an operation that goes through a
// 307 or 308 redirect, and at random times — and restarts it each time on
// the same bolt file. The first kills take every kill point once, in a
// random order; the rest are drawn at random. Each restarted process resumes
// the pending operations with their keys (Store.Pending,
// ContextWithOperation), then goes on. An operation killed at a kill point
// is resumed by the next process (it was pending, not lost nor marked done
// by a redirect), and at the end every operation has exactly one effect,
// under the key its Store holds, and nothing is pending.
func TestCrashMatrix(t *testing.T) {
	ops, maxKills := 36, 14
	if testing.Short() {
		ops, maxKills = 16, len(crashPhases)
	}
	// 10 ms of server latency, so that a random kill often lands while a
	// request is in flight.
	srv, url := startAPI(t, chargesRoute(fakeserver.Fault{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(10 * time.Millisecond), Probability: 1}), redirecting)
	db := filepath.Join(t.TempDir(), "keys.db")
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	plan := append([]string(nil), crashPhases...)
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

	keys := map[int]string{} // op → key the child reported
	completed := map[int]bool{}
	kills := map[string]int{}
	resumed := 0
	// Operations killed at a kill point and not completed since: pending in
	// the Store, so the next process must resume them (Store.Pending), not
	// issue them as new ones.
	killedOps := map[int]bool{}
	var final incarnation
	for i := 0; ; i++ {
		require.Less(t, i, maxKills+5, "the child never finished")
		var remaining []int
		for k := range ops {
			if !completed[k] {
				remaining = append(remaining, k)
			}
		}
		kill, killOp := "", -1
		if sum(kills) < maxKills && len(remaining) > 0 {
			phase := crashPhases[rng.IntN(len(crashPhases))]
			if i < len(plan) {
				phase = plan[i]
			}
			candidates := remaining
			if hopPhase(phase) {
				candidates = nil
				for _, k := range remaining {
					if redirectCode(k) != 0 {
						candidates = append(candidates, k)
					}
				}
				if len(candidates) == 0 { // no redirect left: the same point, first hop
					phase, candidates = strings.TrimPrefix(phase, "hop-"), remaining
				}
			}
			switch {
			case phase == killRandom:
				kill = fmt.Sprintf("%s:%d", phase, 15+rng.IntN(50))
			case len(candidates) > 0:
				killOp = candidates[rng.IntN(min(len(candidates), 3))]
				kill = fmt.Sprintf("%s:%d", phase, killOp)
			}
		}
		inc := runCrashChild(t, url, db, ops, completed, kill)
		for _, line := range inc.lines {
			f := strings.Fields(line)
			switch f[0] {
			case "done", "resume":
				require.Len(t, f, 4, line)
				k, _ := strconv.Atoi(f[1])
				require.Equal(t, "201", f[3], "incarnation %d: %s", i, line)
				if prev, ok := keys[k]; ok {
					require.Equal(t, prev, f[2], "op %d was sent under two keys", k)
				}
				keys[k] = f[2]
				completed[k] = true
				if f[0] == "resume" {
					resumed++
				} else if killedOps[k] {
					t.Errorf("incarnation %d: op %d, killed at a kill point before, was issued anew, not resumed from Store.Pending (lost, or marked done too early)", i, k)
				}
				delete(killedOps, k)
			case "error":
				t.Fatalf("incarnation %d (kill %q): child: %s", i, kill, line)
			}
		}
		if inc.killed {
			phase, _, _ := strings.Cut(kill, ":")
			kills[phase]++
			if killOp >= 0 {
				killedOps[killOp] = true
			}
			continue
		}
		require.NoError(t, inc.exitErr, "incarnation %d (kill %q): %v", i, kill, inc.lines)
		final = inc
		break
	}
	require.NotEmpty(t, final.lines)
	assert.Equal(t, "pending 0", final.lines[len(final.lines)-1], "the last process left pending operations")
	assert.Empty(t, killedOps, "operations killed at a kill point and never resumed")

	// The oracle: one effect per operation, under the key the client used.
	effects := map[int][]fakeserver.Entry{}
	for _, e := range srv.Ledger() {
		var obj struct {
			Op int `json:"op"`
		}
		require.NoError(t, json.Unmarshal(e.Object, &obj))
		effects[obj.Op] = append(effects[obj.Op], e)
	}
	for k := range ops {
		if assert.Len(t, effects[k], 1, "op %d: effects", k) {
			assert.Equal(t, keys[k], effects[k][0].Key, "op %d: the effect's key", k)
		}
	}
	assert.Len(t, effects, ops, "effects for operations that do not exist")
	for _, phase := range crashPhases {
		if phase != killRandom { // a random kill may come after the child is done
			assert.Positive(t, kills[phase], "kill point %s never taken", phase)
		}
	}
	assert.Zero(t, srv.Stats().DuplicateEffects)
	t.Logf("crash matrix (bolt): %d operations, %d SIGKILLs %v, %d operations resumed from Store.Pending, %d effects, %d duplicates, %d requests",
		ops, sum(kills), kills, resumed, srv.TotalEffects(), srv.Stats().DuplicateEffects, srv.Stats().Requests)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
