package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errPassEnded: the handler used its transaction for the first time, or
// again, after writing its status, which ended it.
var errPassEnded = errors.New("idempotency/postgres: the request's transaction ended when the handler wrote its status")

// lazy is the transaction of a request without a record: begun at the
// handler's first use, so that a handler that does not use it needs no
// database. mu orders the begin and the end.
type lazy struct {
	b     backend
	mu    sync.Mutex
	t     txn // guarded by mu; nil until begun
	ended bool
}

func (l *lazy) ends() *lazy { return l }

// get returns the transaction's view, beginning it with ctx if need be.
func (l *lazy) get(ctx context.Context) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return nil, errPassEnded
	}
	if l.t == nil {
		t, err := l.b.begin(ctx, time.Time{})
		if err == nil {
			err = t.start(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("idempotency/postgres: begin: %w", err)
		}
		l.t = t
	}
	return l.t.view(), nil
}

// end commits (or rolls back) the transaction if it began; later uses
// fail.
func (l *lazy) end(ctx context.Context, commit bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	switch {
	case l.t == nil:
		return nil
	case commit:
		return l.t.commit(ctx)
	}
	return l.t.rollback(ctx)
}

// lazySQL is SQLTx's lazy transaction.
type lazySQL struct{ lazy }

// tx begins the transaction if need be; nil if it cannot.
func (l *lazySQL) tx(ctx context.Context) *sql.Tx {
	v, err := l.get(ctx)
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.t != nil {
			return l.t.view().(*sql.Tx) // ended: its methods return sql.ErrTxDone
		}
		return nil
	}
	return v.(*sql.Tx)
}

// lazyPgx is Tx's lazy transaction: each method begins it if need be,
// and returns the begin's error.
type lazyPgx struct{ lazy }

var _ pgx.Tx = (*lazyPgx)(nil)

func (l *lazyPgx) tx(ctx context.Context) (pgx.Tx, error) {
	v, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return v.(pgx.Tx), nil
}

func (l *lazyPgx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.tx(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (l *lazyPgx) Commit(ctx context.Context) error {
	tx, err := l.tx(ctx)
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (l *lazyPgx) Rollback(ctx context.Context) error {
	tx, err := l.tx(ctx)
	if err != nil {
		return err
	}
	return tx.Rollback(ctx)
}

func (l *lazyPgx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := l.tx(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

func (l *lazyPgx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := l.tx(ctx)
	if err != nil {
		return errBatch{err}
	}
	return tx.SendBatch(ctx, b)
}

// LargeObjects begins the transaction with a background context; if it
// cannot, its LargeObjects are the zero value.
func (l *lazyPgx) LargeObjects() pgx.LargeObjects {
	tx, err := l.tx(context.Background())
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

func (l *lazyPgx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := l.tx(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (l *lazyPgx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := l.tx(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

func (l *lazyPgx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := l.tx(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

func (l *lazyPgx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	tx, err := l.tx(ctx)
	if err != nil {
		return lockedRow{err: err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

// Conn begins the transaction with a background context; nil if it
// cannot.
func (l *lazyPgx) Conn() *pgx.Conn {
	tx, err := l.tx(context.Background())
	if err != nil {
		return nil
	}
	return tx.Conn()
}

// errBatch is the BatchResults of a batch that could not be sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return lockedRow{err: b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
