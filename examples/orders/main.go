// Command orders is an order service whose payments survive a crash, with
// exactly one payment per order, because each payment's idempotency key is
// claimed in the same PostgreSQL transaction as its order (package
// persist/postgres).
//
// The program plays every role. As the parent it starts a throwaway
// PostgreSQL server (package pgtest: initdb and pg_ctl, from Debian's
// postgresql package) unless ORDERS_DSN names a database, and the fake
// payments API (package fakeserver), which dedupes by Idempotency-Key. It
// then runs itself as the order service, which places orders o1 to o5: for
// each it inserts the order and claims the payment's key in one transaction,
// commits, and pays through a resilient Transport. The parent kills the
// service with SIGKILL after the API applied the payment of o3 and before the
// service read the answer. A restarted service first runs a Resumer, which
// finds o3's payment pending and sends it again with its key (the API answers
// with the stored payment), then places the orders still missing. In the
// end: five orders, five payments.
//
//	go run ./examples/orders
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/examples/internal/selfexec"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
	"github.com/resilienthttp/resilient/persist/postgres/pgtest"
)

// The environment of the order service process.
const (
	dsnEnv   = "ORDERS_DSN"   // the database; the parent starts one if unset
	apiEnv   = "ORDERS_API"   // set: this process is the service; the API's base URL
	crashEnv = "ORDERS_CRASH" // an order: stop after the API applied its payment
)

// orders are the orders the service places, by id, with their amounts.
var orders = []struct {
	id     string
	amount int
}{{"o1", 1000}, {"o2", 2500}, {"o3", 700}, {"o4", 4200}, {"o5", 990}}

func main() {
	ctx := context.Background()
	selfexec.Main(apiEnv,
		func(api string) error { return service(ctx, os.Stdout, os.Getenv(dsnEnv), api, os.Getenv(crashEnv)) },
		func(exe string) error { return run(ctx, os.Stdout, exe) })
}

// run is the parent: it starts the database (unless ORDERS_DSN is set) and
// the API, runs the service and kills it, runs it again, and checks that
// every order was paid once. exe is the program to run as the service.
func run(ctx context.Context, w io.Writer, exe string, args ...string) error {
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		srv, err := pgtest.Start("")
		if err != nil {
			return fmt.Errorf("start PostgreSQL (or set %s): %w", dsnEnv, err)
		}
		defer srv.Stop()
		dsn = srv.DSN()
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool)
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS orders, `+store.Table()); err != nil {
		return err
	}
	if err := store.CreateSchema(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		return err
	}
	api := fakeserver.New()
	defer api.Close()

	start := func(crash string) (*selfexec.Process, error) {
		return selfexec.Start(ctx, exe, args, dsnEnv+"="+dsn, apiEnv+"="+api.URL, crashEnv+"="+crash)
	}

	first, err := start("o3")
	if err != nil {
		return err
	}
	crashed := false
	for first.Lines.Scan() {
		fmt.Fprintln(w, "service 1:", first.Lines.Text())
		if strings.HasPrefix(first.Lines.Text(), "crash") {
			crashed = true
			break
		}
	}
	if err := first.Kill(); err != nil { // SIGKILL: no cleanup runs
		return err
	}
	if !crashed {
		return errors.New("the first service never reached its crash point")
	}
	pending, err := store.Pending(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "service 1: killed; %d order(s) committed, %d payment(s) at the API, %d pending: %s\n",
		count(ctx, pool), api.TotalEffects(), len(pending), names(pending))

	second, err := start("")
	if err != nil {
		return err
	}
	for second.Lines.Scan() {
		fmt.Fprintln(w, "service 2:", second.Lines.Text())
	}
	if err := second.Wait(); err != nil {
		return fmt.Errorf("second service: %w", err)
	}

	perOrder := map[string]int{}
	for _, e := range api.Ledger() {
		var obj struct {
			Order string `json:"order"`
		}
		if err := json.Unmarshal(e.Object, &obj); err != nil {
			return err
		}
		perOrder[obj.Order]++
	}
	n := count(ctx, pool)
	fmt.Fprintf(w, "end: %d orders, %d payments, %d duplicate(s)\n", n, api.TotalEffects(), api.Stats().DuplicateEffects)
	for _, o := range orders {
		if perOrder[o.id] != 1 {
			return fmt.Errorf("order %s has %d payments", o.id, perOrder[o.id])
		}
	}
	if n != len(orders) || api.TotalEffects() != len(orders) {
		return fmt.Errorf("want %d orders and payments, got %d and %d", len(orders), n, api.TotalEffects())
	}
	return nil
}

// service is the order service: it resumes the payments a crash left
// pending, then places the orders not yet placed. With crash set to an
// order, it stops after the API applied that order's payment, before the
// answer is read, prints "crash ..." and waits to be killed.
func service(ctx context.Context, w io.Writer, dsn, api, crash string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.WithLease(time.Second), postgres.WithBoundCalls()) // a call never sends a payment no order committed

	base := http.DefaultTransport
	if crash != "" {
		base = crashAfter(crash, w, base)
	}
	client := &http.Client{Transport: resilient.NewTransport(base, resilient.WithStore(store))}
	payment := func(ctx context.Context, order string, amount int) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/payments",
			strings.NewReader(fmt.Sprintf(`{"order":%q,"amount":%d}`, order, amount)))
		if err == nil {
			req.Header.Set("X-Order", order)
		}
		return req, err
	}

	// First, what a crash left pending. The API dedupes by key, so a
	// payment that may have been sent is sent again with its key.
	resumer := &postgres.Resumer{
		Store:       store,
		Client:      client,
		KeysHonored: true,
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			order := strings.TrimPrefix(rec.Operation, "pay:")
			var amount int
			if err := pool.QueryRow(ctx, `SELECT amount FROM orders WHERE id = $1`, order).Scan(&amount); err != nil {
				return nil, err
			}
			return payment(ctx, order, amount)
		},
		Response: func(ctx context.Context, rec persist.Record, resp *http.Response) error {
			fmt.Fprintf(w, "resumed %s with key %s: %d, Idempotency-Status: %s\n",
				rec.Operation, rec.Key, resp.StatusCode, resp.Header.Get("Idempotency-Status"))
			return nil
		},
	}
	for {
		if _, err := resumer.Resume(ctx); err != nil {
			return err
		}
		pending, err := store.Pending(ctx)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the killed process's lease has not expired yet
	}

	for _, o := range orders {
		op := "pay:" + o.id
		placed, err := placeOrder(ctx, pool, store, o.id, o.amount)
		if err != nil {
			return err
		}
		if !placed {
			continue // placed (and paid or resumed) before the crash
		}
		req, err := payment(resilient.ContextWithOperation(ctx, op), o.id, o.amount)
		if err != nil {
			return err
		}
		rep := new(resilient.Report)
		resp, err := client.Do(req.WithContext(resilient.ContextWithReport(req.Context(), rep)))
		if err != nil {
			return fmt.Errorf("pay %s: %w", o.id, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Fprintf(w, "paid %s with key %s: %d\n", o.id, rep.Key, resp.StatusCode)
	}
	return nil
}

// placeOrder inserts the order and claims its payment's key in one
// transaction. It reports false if the order existed.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, store *postgres.Store, id string, amount int) (bool, error) {
	key, err := resilient.NewKey()
	if err != nil {
		return false, err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, amount)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err
	}
	if _, _, err := store.ClaimTx(ctx, tx, persist.Record{Operation: "pay:" + id, Key: key}); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// crashAfter is a base transport that, once the API has answered the payment
// of order, prints "crash ..." and waits for the parent's SIGKILL.
func crashAfter(order string, w io.Writer, next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && req.Header.Get("X-Order") == order {
			fmt.Fprintf(w, "crash: the API applied the payment of %s; its answer is never read\n", order)
			time.Sleep(time.Minute)
			os.Exit(3)
		}
		return resp, err
	})
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// count returns the number of orders, -1 on error.
func count(ctx context.Context, pool *pgxpool.Pool) int {
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// names returns the operations of recs, comma-separated.
func names(recs []persist.Record) string {
	s := make([]string, len(recs))
	for i, r := range recs {
		s[i] = r.Operation
	}
	return strings.Join(s, ", ")
}
