package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resilienthttp/resilient/idempotency"
)

// DefaultTable is the name of the Store's table.
const DefaultTable = "idempotency_records"

// Option configures New and NewSQL.
type Option func(*options)

type options struct{ table []string }

// WithTable sets the Store's table: one name, or a schema and a name
// ("app", "idempotency" for app.idempotency). Default DefaultTable.
func WithTable(name ...string) Option { return func(o *options) { o.table = name } }

// Store is an idempotency.Store in a PostgreSQL table, atomic with the
// effects the handler writes in its transaction (Tx, SQLTx). Create it
// with New (pgx) or NewSQL (database/sql), and its table with
// CreateSchema, once at startup: without the table every claim fails
// with an error that says so (the middleware logs it and answers 503). Safe for concurrent use by multiple goroutines.
type Store struct {
	db    backend
	table string // quoted
	salt  uint64 // mixed into lock keys: tables do not share locks
	q     queries
	fq    failureQueries // deadletter.go
}

func newStore(db backend, opts []Option) *Store {
	o := options{table: []string{DefaultTable}}
	for _, opt := range opts {
		opt(&o)
	}
	parts := make([]string, len(o.table))
	for i, p := range o.table {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	table := strings.Join(parts, ".")
	sum := sha256.Sum256([]byte(table))
	return &Store{db: db, table: table, salt: binary.BigEndian.Uint64(sum[:8]), q: newQueries(table), fq: newFailureQueries(table)}
}

// Table returns the Store's table name, quoted.
func (s *Store) Table() string { return s.table }

// CreateSchema creates the Store's table, its index and the table of
// Inbox.Do's failed runs (the table's name with "_failures") if they do
// not exist.
func (s *Store) CreateSchema(ctx context.Context) error {
	if _, err := s.db.exec(ctx, s.q.schema); err != nil {
		return fmt.Errorf("idempotency/postgres: create schema: %w", err)
	}
	if _, err := s.db.exec(ctx, s.fq.schema); err != nil {
		return fmt.Errorf("idempotency/postgres: create schema: %w", err)
	}
	return nil
}

// Atomic returns true: a claim is a transaction the handler's effects
// share.
func (s *Store) Atomic() bool { return true }

// Sweep deletes the records expired at now, and the failed runs of
// Inbox.Do forgotten by then; it returns how many records it deleted.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	n, err := s.db.exec(ctx, s.q.sweep, now)
	if err != nil {
		return 0, s.explain("sweep", err)
	}
	var pe *pgconn.PgError
	if _, err := s.db.exec(ctx, s.fq.sweep, now); err != nil && !(errors.As(err, &pe) && pe.Code == "42P01") {
		return int(n), s.explain("sweep", err) // a table created before dead letters has no failures table: nothing to sweep
	}
	return int(n), nil
}

// Begin implements idempotency.Store: see the package documentation.
func (s *Store) Begin(ctx context.Context, sc idempotency.Scope, fp idempotency.Fingerprint, now, lease time.Time) (idempotency.Begun, error) {
	h := sc.Hash()
	lockKey := int64(binary.BigEndian.Uint64(h[:8]) ^ s.salt)
	idle := max(lease.Sub(now), time.Second)
	tx, err := s.db.begin(ctx, now.Add(idle))
	if err != nil {
		return idempotency.Begun{}, fmt.Errorf("idempotency/postgres: begin: %w", err)
	}
	idleMS := strconv.FormatInt(idle.Milliseconds(), 10)
	locked, rec, err := tx.lockAndRead(ctx, s.q, lockKey, idleMS, h[:])
	if err != nil {
		_ = tx.rollback(context.WithoutCancel(ctx))
		return idempotency.Begun{}, s.explain("claim", err)
	}
	expired := rec != nil && !now.Before(rec.expires)
	var b idempotency.Begun
	switch {
	case !locked:
		b = idempotency.Begun{State: idempotency.Busy}
	case rec != nil && !expired && rec.fp != fp:
		b = idempotency.Begun{State: idempotency.Mismatch}
	case rec != nil && !expired:
		b = idempotency.Begun{State: idempotency.Replay, Response: rec.resp}
	default:
		c := &claim{s: s, tx: tx, scope: h, sc: sc, fp: fp, created: now, idleMS: idleMS}
		return idempotency.Begun{State: idempotency.Claimed, Claim: c, Expired: expired}, nil
	}
	if err := tx.rollback(ctx); err != nil {
		return idempotency.Begun{}, fmt.Errorf("idempotency/postgres: end the lookup: %w", err)
	}
	return b, nil
}

// explain wraps err of the step op, naming CreateSchema when the table
// does not exist (SQLSTATE 42P01): a newcomer's first request tells what
// to do, in the error and in the middleware's log.
func (s *Store) explain(op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return fmt.Errorf("idempotency/postgres: %s: table %s does not exist: call Store.CreateSchema once at startup: %w", op, s.table, err)
	}
	return fmt.Errorf("idempotency/postgres: %s: %w", op, err)
}

// record is a row read by Begin.
type record struct {
	fp      idempotency.Fingerprint
	resp    *idempotency.Response
	expires time.Time
}

func decodeRecord(fp []byte, status int64, header, body []byte, expires time.Time) (*record, error) {
	r := &record{expires: expires, resp: &idempotency.Response{Status: int(status), Body: body}}
	if copy(r.fp[:], fp) != len(r.fp) {
		return nil, errors.New("stored fingerprint has the wrong length")
	}
	if err := json.Unmarshal(header, &r.resp.Header); err != nil {
		return nil, fmt.Errorf("stored header: %w", err)
	}
	if r.resp.Body == nil {
		r.resp.Body = []byte{}
	}
	return r, nil
}

// claim is a Store claim: the open transaction holding the scope's lock.
type claim struct {
	s       *Store
	tx      txn
	scope   [sha256.Size]byte
	sc      idempotency.Scope
	fp      idempotency.Fingerprint
	created time.Time
	idleMS  string // the server's idle timeout, which each renewal restarts
	ended   bool
}

func (c *claim) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, c.tx.view())
}

func (c *claim) Complete(ctx context.Context, resp *idempotency.Response, expires time.Time) error {
	if c.ended {
		return idempotency.ErrClaimEnded
	}
	c.ended = true
	header := resp.Header
	if header == nil {
		header = http.Header{}
	}
	hb, err := json.Marshal(header)
	if err != nil {
		_ = c.tx.rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("idempotency/postgres: store: %w", err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL; nil would be NULL
	}
	if err := c.tx.commitWith(ctx, c.s.q.upsert, c.scope[:], c.sc.Route, c.sc.Key, c.fp[:], resp.Status, hb, body, c.created, expires); err != nil {
		return fmt.Errorf("idempotency/postgres: store and commit: %w", err)
	}
	return nil
}

var _ idempotency.Renewer = (*claim)(nil)

// Renew restarts the server's idle timer of the claim's transaction: a
// live, slow handler keeps it. The lease argument is not used: the timer
// is the length of the lease given to Begin.
func (c *claim) Renew(ctx context.Context, _ time.Time) error {
	if c.ended {
		return idempotency.ErrClaimEnded
	}
	if err := c.tx.renew(ctx, c.s.q, c.idleMS); err != nil {
		return fmt.Errorf("idempotency/postgres: renew: %w", err)
	}
	return nil
}

func (c *claim) Release(ctx context.Context) error {
	if c.ended {
		return idempotency.ErrClaimEnded
	}
	c.ended = true
	if err := c.tx.rollback(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("idempotency/postgres: roll back: %w", err)
	}
	return nil
}

var _ idempotency.TxStore = (*Store)(nil)

// BeginTx implements idempotency.TxStore: the transaction of a request
// the middleware passes through without a record (a safe method, or no
// key), so that Tx (SQLTx) is never nil in a handler it wraps. It begins
// at the handler's first use of Tx's methods (SQLTx), not before: a
// handler that does not use it costs no round trip and never fails for
// the database. It commits when the handler writes a status below 500; a
// 5xx or a panic rolls it back. BeginTx itself sends nothing and returns
// no error.
func (s *Store) BeginTx(context.Context) (idempotency.Tx, error) {
	if _, ok := s.db.(sqlBackend); ok {
		return passTx{&lazySQL{lazy{b: s.db}}}, nil
	}
	return passTx{&lazyPgx{lazy{b: s.db}}}, nil
}

// passTx is a transaction without a record, begun lazily: a *lazyPgx or
// a *lazySQL.
type passTx struct{ l interface{ ends() *lazy } }

func (p passTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, p.l)
}
func (p passTx) Commit(ctx context.Context) error   { return p.l.ends().end(ctx, true) }
func (p passTx) Rollback(ctx context.Context) error { return p.l.ends().end(ctx, false) }
