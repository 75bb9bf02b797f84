package crashmatrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
)

// API starts the matrix's payments API, closed when t ends: the fake
// server (which dedupes by key) with 10 ms of latency on POST /v1/charges,
// so that a random kill often lands while a request is in flight, behind a
// gateway that answers POST /v1/redirect/charges with its redirect there.
func API(t testing.TB) (*fakeserver.Server, string) {
	t.Helper()
	fs := fakeserver.NewUnstarted(fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges",
		Mix: []fakeserver.Fault{{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(10 * time.Millisecond), Probability: 1}}}))
	srv := httptest.NewUnstartedServer(redirecting(fs.Handler()))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		fs.Close()
	})
	return fs, srv.URL
}

// redirecting answers POST redirectPath with its redirect to /v1/charges
// (the body is read, nothing is created), as a gateway that moved a route
// would.
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

// run is a matrix child of ops operations on the Store named by store, at
// url, that skips the operations in completed and is killed at kill
// ("phase:op", "random:DELAY_MS" or "" for none).
func run(t testing.TB, url, store string, ops int, completed map[int]bool, kill string) Incarnation {
	t.Helper()
	var skip []string
	for k := range completed {
		skip = append(skip, strconv.Itoa(k))
	}
	c := Child{Env: append([]string{urlEnv + "=" + url, storeEnv + "=" + store, opsEnv + "=" + strconv.Itoa(ops),
		skipEnv + "=" + strings.Join(skip, ",")}, childEnv...)}
	return c.KilledAt(killEnv, kill).Run(t)
}

// childEnv is added to every matrix child's environment: the package's own
// tests plant harness defects with it (defects.go).
var childEnv []string

// ledger is what the children reported of the operations: the key each was
// sent with and whether it completed.
type ledger struct {
	keys      map[int]string
	completed map[int]bool
}

func newLedger() *ledger { return &ledger{keys: map[int]string{}, completed: map[int]bool{}} }

// record takes in a child's lines and returns the operations it resumed
// from Store.Pending and those it issued anew, in order. Every operation
// completes with 201, under one key.
func (l *ledger) record(t testing.TB, inc Incarnation, what string) (resumed, issued []int) {
	t.Helper()
	for _, line := range inc.Lines {
		f := strings.Fields(line)
		switch f[0] {
		case "done", "resume":
			require.Len(t, f, 4, line)
			k, _ := strconv.Atoi(f[1])
			require.Equal(t, "201", f[3], "%s: %s", what, line)
			if prev, ok := l.keys[k]; ok {
				require.Equal(t, prev, f[2], "op %d was sent under two keys", k)
			}
			l.keys[k], l.completed[k] = f[2], true
			if f[0] == "resume" {
				resumed = append(resumed, k)
			} else {
				issued = append(issued, k)
			}
		case "error":
			t.Fatalf("%s: child: %s", what, line)
		}
	}
	return resumed, issued
}

// check is the oracle: one effect per operation on srv, under the key the
// client used, and none for operations that do not exist.
func (l *ledger) check(t testing.TB, srv *fakeserver.Server, ops int) {
	t.Helper()
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
			assert.Equal(t, l.keys[k], effects[k][0].Key, "op %d: the effect's key", k)
		}
	}
	assert.Len(t, effects, ops, "effects for operations that do not exist")
	assert.Zero(t, srv.Stats().DuplicateEffects)
}

// EachPoint runs the matrix once per kill point, each in a subtest with a
// new API and the Store that store names (a new one each call): four
// operations (1 through a 307, 3 through a 308), a child killed at the
// point (at operation 2, or 1 and 3 for a point in the second hop of a
// redirect; at a random time for Random), then a second child that resumes
// the pending operations and issues the rest. The operation killed at a
// kill point, and only it, is resumed (it was pending: not lost, not marked
// done by a redirect hop); every operation has exactly one effect under the
// key it was sent with; nothing is left pending.
func EachPoint(t *testing.T, store func(t *testing.T) string) {
	const ops = 4
	seed := uint64(time.Now().UnixNano())
	t.Logf("random kill delays drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	type point struct {
		phase string
		op    int // -1 for a random kill
	}
	var points []point
	for _, phase := range Phases {
		switch {
		case phase == Random:
			points = append(points, point{phase, -1})
		case hopPhase(phase):
			points = append(points, point{phase, 1}, point{phase, 3})
		default:
			points = append(points, point{phase, 2})
		}
	}
	for _, p := range points {
		name := p.phase
		if p.op >= 0 {
			name = fmt.Sprintf("%s op %d (redirect %d)", p.phase, p.op, redirectCode(p.op))
		}
		t.Run(name, func(t *testing.T) {
			srv, url := API(t)
			st := store(t)
			kill := fmt.Sprintf("%s:%d", p.phase, p.op)
			if p.phase == Random {
				kill = fmt.Sprintf("%s:%d", Random, 15+rng.IntN(50))
			}
			l := newLedger()
			inc := run(t, url, st, ops, nil, kill)
			l.record(t, inc, "first child")
			if p.op >= 0 {
				require.True(t, inc.Killed, "the child reached its kill point and was killed: %v", inc.Lines)
				require.Equal(t, fmt.Sprintf("at %s %d", p.phase, p.op), inc.Lines[len(inc.Lines)-1])
				require.False(t, l.completed[p.op])
			} else if !inc.Killed {
				require.NoError(t, inc.Err, "child: %v", inc.Lines)
			}
			inc = run(t, url, st, ops, l.completed, "")
			require.False(t, inc.Killed)
			require.NoError(t, inc.Err, "child: %v", inc.Lines)
			resumed, _ := l.record(t, inc, "second child")
			if p.op >= 0 {
				assert.Equal(t, []int{p.op}, resumed, "the killed operation, and only it, was pending and resumed from Store.Pending")
			}
			require.NotEmpty(t, inc.Lines)
			assert.Equal(t, "pending 0", inc.Lines[len(inc.Lines)-1], "operations left pending")
			l.check(t, srv, ops)
		})
	}
}

// Sequence runs the matrix as one life of a client on the Store that store
// names: ops operations, and a child killed and restarted on that Store up
// to maxKills times. The first kills take every kill point once, in a
// random order (a point in a second hop at an operation that goes through
// a redirect); the rest are drawn at random. Each restarted child resumes
// the pending operations with their keys, then goes on. An operation killed
// at a kill point is resumed by the next child (it was pending, not lost
// nor marked done by a redirect); at the end every operation has exactly
// one effect, under the key its Store holds, and nothing is pending.
//
// After each kill the parent opens the Store itself (open, the children's
// Opener) and reads the record of each operation killed at a kill point
// and not seen completed (settle): a later child may have resumed it, and
// been killed after the Store wrote Done and before it printed its line.
// Such an operation is done for the oracle only if its effect is on the
// server under the record's key; a record done without its effect, or
// gone, fails the matrix.
func Sequence(t testing.TB, open Opener, store string, ops, maxKills int) {
	srv, url := API(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	plan := append([]string(nil), Phases...)
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

	l := newLedger()
	kills := map[string]int{}
	resumed := 0
	// Operations killed at a kill point and not completed since: pending in
	// the Store, so the next child must resume them (Store.Pending), not
	// issue them as new ones.
	killedOps := map[int]string{} // op → the kill it was killed at
	var final Incarnation
	for i := 0; ; i++ {
		require.Less(t, i, maxKills+5, "the child never finished")
		kill, killOp := "", -1
		if sum(kills) < maxKills {
			phase := Phases[rng.IntN(len(Phases))]
			if i < len(plan) {
				phase = plan[i]
			}
			kill, killOp = pick(rng, phase, l.remaining(ops))
		}
		inc := run(t, url, store, ops, l.completed, kill)
		r, issued := l.record(t, inc, fmt.Sprintf("incarnation %d (kill %q)", i, kill))
		resumed += len(r)
		for _, k := range issued {
			if at, ok := killedOps[k]; ok {
				t.Errorf("incarnation %d: op %d, killed at %q before, was issued anew, not resumed from Store.Pending (lost, or marked done too early)", i, k, at)
			}
		}
		for _, k := range append(r, issued...) {
			delete(killedOps, k)
		}
		if inc.Killed {
			phase, _, _ := strings.Cut(kill, ":")
			kills[phase]++
			if killOp >= 0 && stoppedAt(inc, kill) {
				killedOps[killOp] = kill
			}
			l.settle(t, open, store, srv, killedOps)
			continue
		}
		require.NoError(t, inc.Err, "incarnation %d (kill %q): %v", i, kill, inc.Lines)
		final = inc
		break
	}
	require.NotEmpty(t, final.Lines)
	assert.Equal(t, "pending 0", final.Lines[len(final.Lines)-1], "the last process left pending operations")
	assert.Empty(t, killedOps, "operations killed at a kill point and never resumed")
	l.check(t, srv, ops)
	for _, phase := range Phases {
		if phase != Random { // a random kill may come after the child is done
			assert.Positive(t, kills[phase], "kill point %s never taken", phase)
		}
	}
	t.Logf("crash matrix: %d operations, %d SIGKILLs %v, %d operations resumed from Store.Pending, %d effects, %d duplicates, %d requests",
		ops, sum(kills), kills, resumed, srv.TotalEffects(), srv.Stats().DuplicateEffects, srv.Stats().Requests)
}

// stoppedAt reports whether inc stopped at the kill point kill
// ("PHASE:OP"): its last line is "at PHASE OP".
func stoppedAt(inc Incarnation, kill string) bool {
	return len(inc.Lines) > 0 && inc.Lines[len(inc.Lines)-1] == "at "+strings.Replace(kill, ":", " ", 1)
}

// settle reads, in the Store (opened with open, between two children),
// the record of each operation of killed: one still pending stays there
// (the next child must resume it); one done, whose effect is on srv under
// the record's key, was completed by a child killed before it printed its
// line: it is completed, with that key. A record done without its effect,
// or none, is an error (marked done too early; lost).
func (l *ledger) settle(t testing.TB, open Opener, store string, srv *fakeserver.Server, killed map[int]string) {
	t.Helper()
	if len(killed) == 0 {
		return
	}
	s, closeStore, err := open(store)
	require.NoError(t, err, "the parent opens the Store")
	defer closeStore()
	ctx := context.Background()
	for k, at := range killed {
		// Claim of an existing record returns it unchanged: a read.
		rec, created, err := s.Claim(ctx, persist.Record{Operation: opName(k), Key: "crashmatrix-parent-probe"})
		require.NoError(t, err)
		switch {
		case created:
			require.NoError(t, s.Delete(ctx, opName(k)))
			t.Errorf("op %d, killed at %q: no record in the Store (lost)", k, at)
			delete(killed, k)
		case rec.State == persist.Pending:
			// The next child resumes it.
		case srv.Effects(rec.Key) == 0:
			t.Errorf("op %d, killed at %q: done in the Store, no effect on the server under its key %s (marked done too early)", k, at, rec.Key)
		default:
			// A later child completed it and was killed before printing.
			l.keys[k], l.completed[k] = rec.Key, true
			delete(killed, k)
		}
	}
}

// remaining lists the operations not completed yet, in order.
func (l *ledger) remaining(ops int) []int {
	var out []int
	for k := range ops {
		if !l.completed[k] {
			out = append(out, k)
		}
	}
	return out
}

// pick chooses where to kill for phase: a random delay, or one of the first
// three remaining operations (one that goes through a redirect for a point
// in a second hop; the same point in the first hop if none is left). It
// returns "" if no operation remains.
func pick(rng *rand.Rand, phase string, remaining []int) (kill string, op int) {
	if len(remaining) == 0 {
		return "", -1
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
	if phase == Random {
		return fmt.Sprintf("%s:%d", phase, 15+rng.IntN(50)), -1
	}
	op = candidates[rng.IntN(min(len(candidates), 3))]
	return fmt.Sprintf("%s:%d", phase, op), op
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
