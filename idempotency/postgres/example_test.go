package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/postgres"
)

// The handler writes its payment in the transaction that holds the key's
// record (postgres.Tx): the row and the stored answer commit together.
// dsn is the test server's (TestMain); use your own.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	payments := newTable() // a table name of its own, for the example
	store := postgres.New(pool, postgres.WithTable(payments+"_idempotency"))
	if err := store.CreateSchema(ctx); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+payments+` (id bigserial PRIMARY KEY, amount int NOT NULL)`); err != nil {
		panic(err)
	}
	mw, err := idempotency.New(store, idempotency.Config{})
	if err != nil {
		panic(err)
	}
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id int64
		err := postgres.Tx(r.Context()).QueryRow(r.Context(),
			`INSERT INTO `+payments+` (amount) VALUES (1000) RETURNING id`).Scan(&id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // rolled back, not stored
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": %d}`, id)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(pay))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount": 1000}`))
		req.Header.Set("Idempotency-Key", "order-1")
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotency-Status"), string(body))
	}
	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM `+payments).Scan(&n)
	fmt.Println("payments:", n)
	// Output:
	// 201 stored {"id": 1}
	// 201 replayed {"id": 1}
	// payments: 1
}
