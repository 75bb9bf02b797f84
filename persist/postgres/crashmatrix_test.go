package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/internal/crashmatrix"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// The environment of a child of TestCrashMatrix.
const (
	matrixDSNEnv     = "RESILIENT_PG_MATRIX_DSN"     // set: this process is a matrix child; the database
	matrixTablesEnv  = "RESILIENT_PG_MATRIX_TABLES"  // "store,orders,unknown": the tables
	matrixURLEnv     = "RESILIENT_PG_MATRIX_URL"     // the payments API's base URL
	matrixHonoredEnv = "RESILIENT_PG_MATRIX_HONORED" // "1": the API dedupes by key (Resumer.KeysHonored)
	matrixOrdersEnv  = "RESILIENT_PG_MATRIX_ORDERS"  // "FIRST,N": the orders this child places
	matrixKillEnv    = "RESILIENT_PG_MATRIX_KILL"    // "PHASE:ORDER": where the parent will kill it
)

// The kill points. The child stops at a deterministic one itself (it prints
// "at PHASE ORDER" and sleeps until the parent's SIGKILL); random is a
// SIGKILL at a random time after the child is ready.
const (
	// before-commit: the order and its pending record are written in the
	// transaction, which has not committed.
	killBeforeCommit = "before-commit"
	// committed: the transaction committed; the HTTP call has not begun.
	killCommitted = "committed"
	// claimed: the Transport claimed the key (a send is counted); nothing
	// has left the process.
	killClaimed = "claimed"
	// applied: the server applied the payment and answered; the answer
	// has not reached the Transport.
	killApplied = "applied"
	// answered: the Transport has the answer and is about to record the
	// operation as done.
	killAnswered = "answered"
	// resume-applied: a Resumer's re-send was applied by the server, its
	// answer not yet seen (scheduled after a committed kill, which leaves
	// an operation the next child resumes).
	killResumeApplied = "resume-applied"
	killRandom        = crashmatrix.Random
)

// matrixPhases is the cycle of kill points of TestCrashMatrix.
var matrixPhases = []string{killBeforeCommit, killCommitted, killResumeApplied, killClaimed, killApplied, killAnswered, killRandom}

// ordersPerChild is how many orders a child places; the deterministic kill
// points are at its second.
const ordersPerChild = 3

// matrixLease is the lease of the children's Stores: short, so that the
// next child, run after the previous one was killed, waits little for it.
const matrixLease = 50 * time.Millisecond

// orderID is the id of order n.
func orderID(n int) string { return fmt.Sprintf("o%05d", n) }

// matrixChild is the client process of TestCrashMatrix, an order service: it
// runs a Resumer until nothing is pending, then places its orders one by one
// — insert the order and claim its payment in one transaction, commit, pay
// through the resilient Transport — and prints "ready", "resumed R unknown U"
// and "at PHASE ORDER" (then waits to be killed).
func matrixChild() int {
	fail := func(format string, args ...any) int {
		fmt.Printf("error "+format+"\n", args...)
		return 1
	}
	tables := strings.Split(os.Getenv(matrixTablesEnv), ",")
	if len(tables) != 3 {
		return fail("%s: %q", matrixTablesEnv, os.Getenv(matrixTablesEnv))
	}
	storeTable, orders, unknown := tables[0], tables[1], tables[2]
	var first, n int
	if _, err := fmt.Sscanf(os.Getenv(matrixOrdersEnv), "%d,%d", &first, &n); err != nil {
		return fail("%s: %v", matrixOrdersEnv, err)
	}
	phase, killOrder := "", ""
	if k := os.Getenv(matrixKillEnv); k != "" {
		p, o, _ := strings.Cut(k, ":")
		phase, killOrder = p, o
	}
	at := func(p, order string) {
		if p == phase && (order == killOrder || p == killResumeApplied) {
			crashmatrix.At(p, order) // the parent's SIGKILL arrives meanwhile
		}
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(matrixDSNEnv))
	if err != nil {
		return fail("pool: %v", err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.WithTable(storeTable), postgres.WithLease(matrixLease), postgres.WithBoundCalls())
	url := os.Getenv(matrixURLEnv) + "/v1/payments"

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		order := req.Header.Get("X-Order")
		if req.Header.Get("X-Resume") == "" {
			at(killClaimed, order)
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			if req.Header.Get("X-Resume") != "" {
				at(killResumeApplied, order)
			} else {
				at(killApplied, order)
			}
		}
		return resp, err
	})
	client := &http.Client{Transport: resilient.NewTransport(base,
		resilient.WithStore(finishHook{store, func(op string) { at(killAnswered, strings.TrimPrefix(op, "pay:")) }}),
		resilient.WithBackoff(resilient.Exponential(5*time.Millisecond, 20*time.Millisecond)))}
	payment := func(ctx context.Context, order string, amount int, resume bool) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
			strings.NewReader(fmt.Sprintf(`{"order":%q,"amount":%d}`, order, amount)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Order", order)
		if resume {
			req.Header.Set("X-Resume", "1")
		}
		return req, nil
	}

	fmt.Println("ready")
	r := &postgres.Resumer{
		Store:       store,
		Client:      client,
		KeysHonored: os.Getenv(matrixHonoredEnv) == "1",
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			order := strings.TrimPrefix(rec.Operation, "pay:")
			var amount int
			if err := pool.QueryRow(ctx, `SELECT amount FROM `+orders+` WHERE id = $1`, order).Scan(&amount); err != nil {
				return nil, err
			}
			return payment(ctx, order, amount, true)
		},
		Unknown: func(ctx context.Context, tx pgx.Tx, rec persist.Record) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+unknown+` (order_id, key) VALUES ($1, $2)`,
				strings.TrimPrefix(rec.Operation, "pay:"), rec.Key)
			return err
		},
	}
	var total postgres.Result
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := r.Resume(ctx)
		total.Resent += res.Resent
		total.Unknown += res.Unknown
		if err != nil {
			return fail("resume: %v", err)
		}
		pending, err := store.Pending(ctx)
		if err != nil {
			return fail("pending: %v", err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fail("still pending after 20 s: %v", pending)
		}
		time.Sleep(5 * time.Millisecond) // a lease of the killed process has not expired yet
	}
	fmt.Printf("resumed %d unknown %d\n", total.Resent, total.Unknown)

	for i := first; i < first+n; i++ {
		order, amount := orderID(i), 100+i
		op := "pay:" + order
		tx, err := pool.Begin(ctx)
		if err != nil {
			return fail("begin: %v", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id, amount) VALUES ($1, $2)`, order, amount); err != nil {
			return fail("insert order: %v", err)
		}
		if _, _, err := store.ClaimTx(ctx, tx, persist.Record{Operation: op, Key: uuid.Must(uuid.NewV7()).String()}); err != nil {
			return fail("claim: %v", err)
		}
		at(killBeforeCommit, order)
		if err := tx.Commit(ctx); err != nil {
			return fail("commit: %v", err)
		}
		at(killCommitted, order)
		req, err := payment(resilient.ContextWithOperation(ctx, op), order, amount, false)
		if err != nil {
			return fail("request: %v", err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fail("pay %s: %v", order, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fail("pay %s: status %d", order, resp.StatusCode)
		}
	}
	return 0
}

// finishHook is a persist.Store that calls hook with the operation before
// each Finish: the "answered" kill point.
type finishHook struct {
	*postgres.Store
	hook func(op string)
}

func (f finishHook) Finish(ctx context.Context, op string, state persist.State, attempts int) error {
	f.hook(op)
	return f.Store.Finish(ctx, op, state, attempts)
}

// ignoringServer is a payments API that ignores Idempotency-Key: every POST
// is a new payment. It keeps the order of each.
type ignoringServer struct {
	mu       sync.Mutex
	payments []string // order ids, one per effect
}

func (s *ignoringServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Order string `json:"order"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.payments = append(s.payments, body.Order)
	n := len(s.payments)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"py_%d","order":%q}`+"\n", n, body.Order)
}

func (s *ignoringServer) orders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.payments...)
}

// runMatrixChild runs one child and kills it at kill ("PHASE:ORDER",
// "random:DELAY_MS" or "" for none; a random delay counts from the child's
// "ready"). It returns the child's lines and whether SIGKILL ended it.
func runMatrixChild(t *testing.T, env []string, kill string) (lines []string, killed bool) {
	t.Helper()
	inc := crashmatrix.Child{Env: env, FromReady: true}.KilledAt(matrixKillEnv, kill).Run(t)
	if !inc.Killed {
		require.NoError(t, inc.Err, "child: %v", inc.Lines)
	}
	return inc.Lines, inc.Killed
}

// matrixKills is the number of kills of TestCrashMatrix: CRASH_KILLS, else 40.
func matrixKills(t *testing.T) int {
	if v := os.Getenv("CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "CRASH_KILLS")
		return n
	}
	return 40
}

// TestCrashMatrix is the order service of matrixChild, killed with SIGKILL at
// each step of placing and paying an order — before the transaction commits,
// after the commit and before the call, after the Transport's claim, after
// the server applied the payment and before the answer, after the answer and
// before the record is finished, during a Resumer's re-send, and at random
// times — each time followed by a fresh process that runs the Resumer. Half
// of the kills are against a payments API that dedupes by key (fakeserver),
// half against one that ignores keys. In the end: every committed order has
// exactly one payment, or — only against the key-ignoring API, and only if
// its payment may have been sent — was handed to the application as unknown
// with at most one payment; a rolled-back order has none; nothing is left
// pending. It prints "kills N, duplicates D, lost L".
func TestCrashMatrix(t *testing.T) {
	kills := matrixKills(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random kill delays drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 26))
	pool := newPool(t)
	var total matrixTally
	for _, honored := range []bool{true, false} {
		name := map[bool]string{true: "key-honoring API", false: "key-ignoring API"}[honored]
		t.Run(name, func(t *testing.T) {
			modeKills := kills / 2
			if !honored {
				modeKills = kills - kills/2
			}
			tally := runMatrix(t, pool, honored, modeKills, rng)
			t.Logf("%s: kills %d, duplicates %d, lost %d, unknown %d", name, tally.kills, tally.duplicates, tally.lost, tally.unknown)
			total.add(tally)
		})
	}
	line := fmt.Sprintf("kills %d, duplicates %d, lost %d", total.kills, total.duplicates, total.lost)
	t.Log(line)
	fmt.Println("TestCrashMatrix:", line)
	assert.GreaterOrEqual(t, total.kills, kills, "every round was a kill")
}

// matrixTally is what one run of the matrix counted.
type matrixTally struct {
	kills, duplicates, lost, unknown int
}

func (m *matrixTally) add(o matrixTally) {
	m.kills += o.kills
	m.duplicates += o.duplicates
	m.lost += o.lost
	m.unknown += o.unknown
}

// runMatrix runs kills rounds against one API and checks the end state.
func runMatrix(t *testing.T, pool *pgxpool.Pool, honored bool, kills int, rng *rand.Rand) matrixTally {
	storeTable := newTable()
	store := newStore(t, pool, postgres.WithTable(storeTable))
	orders, unknown := newTable(), newTable()
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+orders+` (id text PRIMARY KEY, amount integer NOT NULL)`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `CREATE TABLE `+unknown+` (order_id text PRIMARY KEY, key text NOT NULL)`)
	require.NoError(t, err)

	var payments func() []string
	var url string
	honoredFlag := "0"
	if honored {
		fs := fakeserver.New()
		defer fs.Close()
		url, honoredFlag = fs.URL, "1"
		payments = func() []string {
			var out []string
			for _, e := range fs.Ledger() {
				var obj struct {
					Order string `json:"order"`
				}
				require.NoError(t, json.Unmarshal(e.Object, &obj))
				out = append(out, obj.Order)
			}
			return out
		}
	} else {
		is := &ignoringServer{}
		srv := httptest.NewServer(is)
		defer srv.Close()
		url, payments = srv.URL, is.orders
	}
	env := []string{matrixDSNEnv + "=" + dsn, matrixTablesEnv + "=" + storeTable + "," + orders + "," + unknown,
		matrixURLEnv + "=" + url, matrixHonoredEnv + "=" + honoredFlag}

	var tally matrixTally
	next := 0 // the first order of the next child
	// A random kill may come after the child is done; such a round is not
	// counted, and rounds go on until kills were made.
	for round := 0; tally.kills < kills; round++ {
		require.Less(t, round, 2*kills+10, "too many rounds without a kill")
		phase := matrixPhases[round%len(matrixPhases)]
		n := ordersPerChild
		kill := fmt.Sprintf("%s:%s", phase, orderID(next+1))
		if phase == killRandom {
			n = 20 // enough that the kill usually lands among them
			kill = fmt.Sprintf("%s:%d", killRandom, 5+rng.IntN(60))
		}
		orderEnv := fmt.Sprintf("%s=%d,%d", matrixOrdersEnv, next, n)
		lines, killed := runMatrixChild(t, append(env, orderEnv), kill)
		for _, l := range lines {
			require.False(t, strings.HasPrefix(l, "error"), "child: %s", l)
		}
		if phase != killRandom {
			require.True(t, killed, "round %d: the child reached %s and was killed: %v", round, phase, lines)
			require.Equal(t, fmt.Sprintf("at %s", phase), strings.Join(strings.Fields(lines[len(lines)-1])[:2], " "), lines)
		}
		if killed {
			tally.kills++
		}
		next += n
	}
	// A last process resumes what the last kill left.
	lines, killed := runMatrixChild(t, append(env, matrixOrdersEnv+"=0,0"), "")
	require.False(t, killed)
	t.Logf("last process: %v", lines)

	committed := map[string]bool{}
	rows, err := pool.Query(t.Context(), `SELECT id FROM `+orders)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, id := range ids {
		committed[id] = true
	}
	handed := map[string]bool{}
	rows, err = pool.Query(t.Context(), `SELECT order_id FROM `+unknown)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, id := range ids {
		handed[id] = true
	}
	effects := map[string]int{}
	for _, o := range payments() {
		effects[o]++
		assert.True(t, committed[o], "a payment for order %s, which was rolled back", o)
	}
	for o := range committed {
		switch n := effects[o]; {
		case n > 1:
			tally.duplicates += n - 1
		case n == 0 && !handed[o]:
			tally.lost++
		}
		if handed[o] {
			tally.unknown++
		}
	}
	assert.NotEmpty(t, committed)
	assert.Zero(t, tally.duplicates, "duplicate payments")
	assert.Zero(t, tally.lost, "committed orders neither paid nor handed over as unknown")
	if honored {
		assert.Empty(t, handed, "against a key-honoring API every operation is re-sent, none handed over")
		for o := range committed {
			assert.Equal(t, 1, effects[o], "order %s: payments", o)
		}
	}
	pending, err := store.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending, "records left pending")
	return tally
}
