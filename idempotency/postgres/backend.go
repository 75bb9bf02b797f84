package postgres

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// backend is what the Store needs of a database: pgx or database/sql.
type backend interface {
	// begin opens a transaction; lease bounds it (database/sql rolls it
	// back then).
	begin(ctx context.Context, lease time.Time) (txn, error)
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	// lookup reads whether the scope's lock is held, and its record,
	// taking no lock.
	lookup(ctx context.Context, q queries, lockKey int64, scope []byte) (bool, *record, error)
}

// txn is an open transaction of a backend.
type txn interface {
	// lockAndRead takes the scope's lock, sets the idle timeout and reads
	// the scope's record (nil if none).
	lockAndRead(ctx context.Context, q queries, lockKey int64, idleMS string, scope []byte) (bool, *record, error)
	// start makes sure the transaction has begun on the server (a
	// backend may send BEGIN with the claim's first batch).
	start(ctx context.Context) error
	// commitWith runs sql, then commits; if sql fails, it rolls back.
	commitWith(ctx context.Context, sql string, args ...any) error
	// renew restarts the server's idle timer, unless the handler is
	// using the transaction (which keeps it from being idle).
	renew(ctx context.Context, q queries, idleMS string) error
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
	// view is the transaction as the handler gets it: a pgx.Tx (Tx) or a
	// *sql.Tx (SQLTx).
	view() any
}

// Pool is what New needs of a pgx pool: *pgxpool.Pool and *pgx.Conn have
// it.
type Pool interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// New returns a Store on pool, with the table of WithTable (default
// DefaultTable). The handler gets the claim's transaction from Tx. On a
// *pgxpool.Pool a claim costs two round trips of the Store's own: BEGIN,
// the lock and the read in one batch, then the record's INSERT and COMMIT
// in another (a replay: the batch, then ROLLBACK). On another Pool (a
// *pgx.Conn) it costs four: BEGIN, the batch, the INSERT, COMMIT.
func New(pool Pool, opts ...Option) *Store {
	if p, ok := pool.(*pgxpool.Pool); ok {
		return newStore(poolBackend{p}, opts)
	}
	return newStore(pgxBackend{pool}, opts)
}

// NewSQL returns a Store on db, a database/sql handle of a PostgreSQL
// driver (pgx's stdlib, lib/pq), with the table of WithTable. The handler
// gets the claim's transaction from SQLTx. Each claim costs one round trip
// more than with New: database/sql cannot send two statements at once.
func NewSQL(db *sql.DB, opts ...Option) *Store { return newStore(sqlBackend{db}, opts) }

type txKey struct{}

// Tx returns the transaction the handler runs in, when the Store was made
// by New; nil otherwise. Write the effect's rows in it: they commit with
// the stored answer (or, for a request without a record, when the
// handler writes a status below 500). Do not commit or roll it back. It
// is safe for use by the handler's goroutines one call at a time, and
// shares its connection with the claim's renewals; its Conn is not
// guarded, and a Rows left open blocks the renewals until closed. Its
// Begin opens a savepoint. On a *pgxpool.Pool its LargeObjects is not
// supported, and its Commit and Rollback return an error.
//
// For a request without a record (a safe method, or no key) the
// transaction begins at the first call of one of its methods, which
// returns the error of BEGIN if the database cannot be reached: a handler
// that does not use it costs no round trip and does not need the
// database.
func Tx(ctx context.Context) pgx.Tx {
	tx, _ := ctx.Value(txKey{}).(pgx.Tx)
	return tx
}

// SQLTx is Tx for a Store made by NewSQL. For a request without a record
// the transaction begins at the first call of SQLTx, with ctx; SQLTx
// returns nil if it cannot begin (the database cannot be reached), or if
// it is first called after the handler wrote its status.
func SQLTx(ctx context.Context) *sql.Tx {
	switch v := ctx.Value(txKey{}).(type) {
	case *sql.Tx:
		return v
	case *lazySQL:
		return v.tx(ctx)
	}
	return nil
}

type pgxBackend struct{ p Pool }

func (b pgxBackend) begin(ctx context.Context, _ time.Time) (txn, error) {
	tx, err := b.p.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	return pgxTxn{tx: tx, mu: new(sync.Mutex)}, nil
}

func (b pgxBackend) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := b.p.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// pgxTxn is a pgx transaction that the handler (through a lockedTx) and
// the claim's renewals share: mu gives them turns on its connection.
func (b pgxBackend) lookup(ctx context.Context, q queries, lockKey int64, scope []byte) (bool, *record, error) {
	tx, err := b.p.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return false, nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var held bool
	if err := tx.QueryRow(ctx, q.held, lockKey).Scan(&held); err != nil {
		return false, nil, err
	}
	rec, err := scanRecord(tx.QueryRow(ctx, q.read, scope))
	return held, rec, err
}

type pgxTxn struct {
	tx pgx.Tx
	mu *sync.Mutex
}

func (t pgxTxn) renew(ctx context.Context, q queries, idleMS string) error {
	if !t.mu.TryLock() {
		return nil // the handler is using the connection: it is not idle
	}
	defer t.mu.Unlock()
	_, err := t.tx.Exec(ctx, q.renew, idleMS)
	return err
}

func (t pgxTxn) lockAndRead(ctx context.Context, q queries, lockKey int64, idleMS string, scope []byte) (bool, *record, error) {
	batch := &pgx.Batch{}
	batch.Queue(q.lock, lockKey, idleMS)
	batch.Queue(q.read, scope)
	return readLocked(t.tx.SendBatch(ctx, batch))
}

// readLocked reads the rest of a batch queued as lockAndRead queues it:
// the lock's answer, then the record. It closes br.
func readLocked(br pgx.BatchResults) (bool, *record, error) {
	var locked bool
	var idle string
	if err := br.QueryRow().Scan(&locked, &idle); err != nil {
		_ = br.Close()
		return false, nil, err
	}
	rec, err := scanRecord(br.QueryRow())
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return locked, rec, err
}

func (t pgxTxn) start(context.Context) error { return nil }

func (t pgxTxn) commitWith(ctx context.Context, sql string, args ...any) error {
	if _, err := t.tx.Exec(ctx, sql, args...); err != nil {
		_ = t.tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return t.tx.Commit(ctx)
}

func (t pgxTxn) commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTxn) rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
func (t pgxTxn) view() any                          { return &lockedTx{tx: t.tx, mu: t.mu} }

// row is a pgx.Row or a *sql.Row.
type row interface{ Scan(dest ...any) error }

// scanRecord reads a record, or nil if there is none.
func scanRecord(r row) (*record, error) {
	var fp, header, body []byte
	var status int64
	var expires time.Time
	err := r.Scan(&fp, &status, &header, &body, &expires)
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(fp, status, header, body, expires)
}

type sqlBackend struct{ db *sql.DB }

// begin opens a transaction that outlives the request's cancellation
// (database/sql rolls a transaction back when its context ends: a client
// that went away would undo a run that completes, and a handler slower
// than the lease would lose its transaction while it renews it). The
// server's idle timeout bounds it.
func (b sqlBackend) begin(ctx context.Context, _ time.Time) (txn, error) {
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tx, err := b.db.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		cancel()
		return nil, err
	}
	return sqlTxn{tx, cancel}, nil
}

func (b sqlBackend) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := b.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (b sqlBackend) lookup(ctx context.Context, q queries, lockKey int64, scope []byte) (bool, *record, error) {
	var held bool
	if err := b.db.QueryRowContext(ctx, q.held, lockKey).Scan(&held); err != nil {
		return false, nil, err
	}
	rec, err := scanRecord(b.db.QueryRowContext(ctx, q.read, scope))
	return held, rec, err
}

type sqlTxn struct {
	tx     *sql.Tx
	cancel context.CancelFunc // ends the transaction's context, after it ended
}

func (t sqlTxn) lockAndRead(ctx context.Context, q queries, lockKey int64, idleMS string, scope []byte) (bool, *record, error) {
	var locked bool
	var idle string
	if err := t.tx.QueryRowContext(ctx, q.lock, lockKey, idleMS).Scan(&locked, &idle); err != nil {
		return false, nil, err
	}
	rec, err := scanRecord(t.tx.QueryRowContext(ctx, q.read, scope))
	return locked, rec, err
}

func (t sqlTxn) start(context.Context) error { return nil }

func (t sqlTxn) commitWith(ctx context.Context, query string, args ...any) error {
	if _, err := t.tx.ExecContext(ctx, query, args...); err != nil {
		_ = t.rollback(ctx)
		return err
	}
	return t.commit(ctx)
}

// renew runs the renewal statement; database/sql gives it and the
// handler's statements turns on the connection.
func (t sqlTxn) renew(ctx context.Context, q queries, idleMS string) error {
	_, err := t.tx.ExecContext(ctx, q.renew, idleMS)
	return err
}

func (t sqlTxn) commit(context.Context) error {
	defer t.cancel()
	return t.tx.Commit()
}

func (t sqlTxn) rollback(context.Context) error {
	defer t.cancel()
	return t.tx.Rollback()
}
func (t sqlTxn) view() any { return t.tx }
