// Command payments is a payments service whose POST /payments runs once
// per Idempotency-Key, atomically with its effect: the payment row and the
// stored answer commit in one PostgreSQL transaction (packages idempotency
// and idempotency/postgres).
//
// It starts a throwaway PostgreSQL server (package pgtest: initdb and
// pg_ctl, from Debian's postgresql package) unless PAYMENTS_DSN names a
// database, serves the API on a loopback port, and plays a client built
// with resilient.NewClient() and its defaults:
//
//  1. a payment with the key the client mints: stored;
//  2. a payment with the application's own key, stored; the same request
//     again, replayed, no new row; the same key with another amount: 422;
//  3. a payment whose answer is lost after it committed (the service drops
//     the connection once): the client retries it with its key, since the
//     route's answers showed that the server dedupes, and gets the replay;
//  4. a payment whose handler fails after writing its row: rolled back,
//     nothing stored, and the client's retry runs it again.
//
// In the end: four payments, one per operation.
//
//	go run ./examples/payments
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/idempotency"
	"github.com/resilienthttp/resilient/idempotency/postgres"
	"github.com/resilienthttp/resilient/persist/postgres/pgtest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// service is the payments API.
type service struct {
	pool     *pgxpool.Pool
	loseNext atomic.Bool // drop the next answer after it committed
	failNext atomic.Bool // fail the next payment after its INSERT
}

// pay is POST /payments: it inserts the payment in the transaction that
// holds the idempotency record, so both commit or neither does.
func (s *service) pay(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Amount   int    `json:"amount"`
		Currency string `json:"currency"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 {
		http.Error(w, "want {\"amount\": >0, \"currency\": ...}", http.StatusBadRequest)
		return
	}
	var id int64
	err := postgres.Tx(r.Context()).QueryRow(r.Context(),
		`INSERT INTO payments (amount, currency) VALUES ($1, $2) RETURNING id`, in.Amount, in.Currency).Scan(&id)
	if err == nil && s.failNext.CompareAndSwap(true, false) {
		err = errors.New("the card network timed out") // after the INSERT: rolled back with the claim
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", id))
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "amount": in.Amount, "currency": in.Currency})
}

// ServeHTTP is the service's front: it loses an answer when told to.
func (s *service) serve(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.loseNext.CompareAndSwap(true, false) {
			api.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(discard{w.Header().Clone()}, r) // committed; the answer is lost
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	})
}

// discard is a ResponseWriter that writes nowhere.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}

func run(ctx context.Context, w io.Writer) error {
	dsn := os.Getenv("PAYMENTS_DSN")
	if dsn == "" {
		srv, err := pgtest.Start("")
		if err != nil {
			return fmt.Errorf("start PostgreSQL (or set PAYMENTS_DSN): %w", err)
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
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS payments, `+store.Table()); err != nil {
		return err
	}
	if err := store.CreateSchema(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, amount int NOT NULL, currency text NOT NULL)`); err != nil {
		return err
	}

	// The service: the middleware after authentication (none here), on
	// the unsafe route only.
	svc := &service{pool: pool}
	mw, err := idempotency.New(store, idempotency.Config{RequireKey: true})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(http.HandlerFunc(svc.pay)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	server := &http.Server{Handler: svc.serve(mux)}
	go func() { _ = server.Serve(ln) }()
	defer server.Close()
	url := "http://" + ln.Addr().String() + "/payments"

	// The client: resilient's defaults, nothing declared.
	client := resilient.NewClient()
	defer client.CloseIdleConnections()
	send := func(label, key, body string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rep := &resilient.Report{}
		resp, err := client.Do(req.WithContext(resilient.ContextWithReport(ctx, rep)))
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(w, "%s: %d attempt(s), %d %s Idempotency-Status: %q\n", label, len(rep.Attempts), resp.StatusCode,
			strings.TrimSpace(string(b)), resp.Header.Get("Idempotency-Status"))
		return nil
	}
	steps := []func() error{
		func() error { return send("pay", "", `{"amount": 500, "currency": "eur"}`) },
		func() error { return send("pay with a key", "order-1", `{"amount": 1000, "currency": "eur"}`) },
		func() error { return send("pay again", "order-1", `{"currency": "eur", "amount": 1000}`) },
		func() error { return send("other amount", "order-1", `{"amount": 9999, "currency": "eur"}`) },
		func() error {
			svc.loseNext.Store(true)
			return send("answer lost", "", `{"amount": 2500, "currency": "eur"}`)
		},
		func() error {
			svc.failNext.Store(true)
			return send("handler fails", "", `{"amount": 700, "currency": "eur"}`)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		return err
	}
	st := mw.Stats()
	fmt.Fprintf(w, "end: %d payments; stored %d, replayed %d, mismatch %d, released %d\n",
		n, st.Stored, st.Replayed, st.Mismatch, st.Released)
	if n != 4 {
		return fmt.Errorf("want 4 payments, got %d", n)
	}
	return nil
}
