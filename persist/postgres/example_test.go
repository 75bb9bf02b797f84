package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/postgres"
)

// An order service inserts an order and claims its payment's key in one
// transaction, then pays with a call bound to that claim. An order whose
// transaction failed is never paid, even if the application ignored the
// error and called anyway.
func ExampleBind() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn) // the application's database
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.WithTable("shop_operations"))
	if err := store.CreateSchema(ctx); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE shop_orders (id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		panic(err)
	}
	api := fakeserver.New() // a payments API
	defer api.Close()
	client := resilient.NewClient(resilient.WithStore(store))

	payment := func(id string, amount int) (*http.Request, error) {
		return http.NewRequest(http.MethodPost, api.URL+"/v1/payments",
			strings.NewReader(fmt.Sprintf(`{"order":%q,"amount":%d}`, id, amount)))
	}
	// placeOrder inserts the order and claims its payment: both commit, or
	// neither does. The claim records the payment's fingerprint, so that
	// no other request is ever sent under its name.
	placeOrder := func(ctx context.Context, id string, amount int) (persist.Record, error) {
		req, err := payment(id, amount)
		if err != nil {
			return persist.Record{}, err
		}
		fp, err := persist.Fingerprint(req)
		if err != nil {
			return persist.Record{}, err
		}
		key, err := resilient.NewKey()
		if err != nil {
			return persist.Record{}, err
		}
		rec := persist.Record{Operation: "pay:" + id, Key: key, Fingerprint: fp}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return rec, err
		}
		defer tx.Rollback(ctx) // after Commit, a no-op
		if _, err := tx.Exec(ctx, `INSERT INTO shop_orders (id, amount) VALUES ($1, $2)`, id, amount); err != nil {
			return rec, err
		}
		claimed, _, err := store.ClaimTx(ctx, tx, rec) // the record to bind: the existing one if any
		if err != nil {
			return rec, err
		}
		return claimed, tx.Commit(ctx)
	}
	// pay sends the payment, bound to its claim: it is sent with the
	// claimed key, or not at all.
	pay := func(ctx context.Context, rec persist.Record, id string, amount int) (int, error) {
		req, err := payment(id, amount)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req.WithContext(postgres.Bind(ctx, rec)))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}

	rec, err := placeOrder(ctx, "o1", 1000)
	if err != nil {
		panic(err)
	}
	status, err := pay(ctx, rec, "o1", 1000)
	fmt.Println("o1:", status, err)

	// The same order id again: the insert fails, the transaction rolls
	// back, and the claim with it.
	rec, err = placeOrder(ctx, "o1", 2000)
	fmt.Println("o1 again: placed:", err == nil)
	_, err = pay(ctx, rec, "o1", 2000) // the error above ignored: still not sent
	fmt.Println("o1 again: paid:", errors.Is(err, postgres.ErrClaimNotCommitted))

	fmt.Println("payments:", api.TotalEffects())
	if _, err := pool.Exec(ctx, `DROP TABLE shop_orders, shop_operations`); err != nil {
		panic(err)
	}
	// Output:
	// o1: 201 <nil>
	// o1 again: placed: false
	// o1 again: paid: false
	// payments: 1
}

// An order service inserts an order and claims its payment's key in one
// transaction; the process dies after the commit, before it pays. After the
// restart a Resumer finds the pending payment and sends it, with its key.
// A payment whose order row is gone cannot be rebuilt: it is handed to
// Unknown, once.
func ExampleResumer() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn) // the application's database
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.WithTable("resume_operations"), postgres.WithLease(time.Millisecond))
	if err := store.CreateSchema(ctx); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE resume_orders (id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		panic(err)
	}
	api := fakeserver.New() // a payments API that dedupes by Idempotency-Key
	defer api.Close()
	client := resilient.NewClient(resilient.WithStore(store))

	// Before the crash: two orders placed, their payments claimed, neither
	// paid; then o2's row is deleted.
	for _, id := range []string{"o1", "o2"} {
		key, err := resilient.NewKey()
		if err != nil {
			panic(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO resume_orders (id, amount) VALUES ($1, 1000)`, id); err != nil {
			panic(err)
		}
		if _, _, err := store.ClaimTx(ctx, tx, persist.Record{Operation: "pay:" + id, Key: key}); err != nil {
			panic(err)
		}
		if err := tx.Commit(ctx); err != nil {
			panic(err)
		}
	}
	if _, err := pool.Exec(ctx, `DELETE FROM resume_orders WHERE id = 'o2'`); err != nil {
		panic(err)
	}
	time.Sleep(2 * time.Millisecond) // the leases expire

	// After the restart:
	r := &postgres.Resumer{
		Store:  store,
		Client: client, // its Transport has WithStore(store)
		Request: func(ctx context.Context, rec persist.Record) (*http.Request, error) {
			id := strings.TrimPrefix(rec.Operation, "pay:")
			var amount int
			err := pool.QueryRow(ctx, `SELECT amount FROM resume_orders WHERE id = $1`, id).Scan(&amount)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("order %s: %w", id, postgres.ErrCannotRebuild) // never: hand it over
			}
			if err != nil {
				return nil, err // a database blip: tried again later
			}
			return http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/payments",
				strings.NewReader(fmt.Sprintf(`{"order":%q,"amount":%d}`, id, amount)))
		},
		Response: func(ctx context.Context, rec persist.Record, resp *http.Response) error {
			fmt.Println(rec.Operation, "answered", resp.StatusCode)
			return nil
		},
		Unknown: func(ctx context.Context, tx pgx.Tx, rec persist.Record) error {
			// Recorded in tx with the hand-over: ask the API about rec.Key.
			fmt.Println(rec.Operation, "handed over")
			return nil
		},
		KeysHonored: true, // the API dedupes by Idempotency-Key
	}
	res, err := r.Resume(ctx) // or, in a service: go r.Run(ctx, time.Minute)
	fmt.Printf("%+v %v\n", res, err)
	res, err = r.Resume(ctx)
	fmt.Printf("again: %+v %v\n", res, err)
	fmt.Println("payments:", api.TotalEffects())
	if _, err := pool.Exec(ctx, `DROP TABLE resume_orders, resume_operations`); err != nil {
		panic(err)
	}
	// Output:
	// pay:o1 answered 201
	// pay:o2 handed over
	// {Resent:1 Unknown:1 Failed:0} <nil>
	// again: {Resent:0 Unknown:0 Failed:0} <nil>
	// payments: 1
}
