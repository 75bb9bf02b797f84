package postgres

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lockedTx is the claim's pgx.Tx as the handler gets it from Tx: each of
// its calls holds mu, which the claim's renewals take too, so that they
// never use the connection at once. A Rows or BatchResults holds mu until
// it is closed (or, for Rows, read to its end).
type lockedTx struct {
	tx pgx.Tx
	mu *sync.Mutex
}

var _ pgx.Tx = (*lockedTx)(nil)

func (t *lockedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inner, err := t.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &lockedTx{tx: inner, mu: t.mu}, nil
}

func (t *lockedTx) Commit(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx.Commit(ctx)
}

func (t *lockedTx) Rollback(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx.Rollback(ctx)
}

func (t *lockedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx.CopyFrom(ctx, table, columns, src)
}

func (t *lockedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t.mu.Lock()
	return &lockedBatch{BatchResults: t.tx.SendBatch(ctx, b), unlock: sync.OnceFunc(t.mu.Unlock)}
}

func (t *lockedTx) LargeObjects() pgx.LargeObjects { return t.tx.LargeObjects() }

func (t *lockedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx.Prepare(ctx, name, sql)
}

func (t *lockedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx.Exec(ctx, sql, args...)
}

func (t *lockedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t.mu.Lock()
	rows, err := t.tx.Query(ctx, sql, args...)
	if err != nil {
		t.mu.Unlock()
		return nil, err
	}
	return &lockedRows{Rows: rows, unlock: sync.OnceFunc(t.mu.Unlock)}, nil
}

func (t *lockedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return lockedRow{rows: rows, err: err}
}

func (t *lockedTx) Conn() *pgx.Conn { return t.tx.Conn() }

// lockedRows releases its transaction's turn when closed or read to its
// end.
type lockedRows struct {
	pgx.Rows
	unlock func()
}

func (r *lockedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.unlock() // pgx closed the rows
	return false
}

func (r *lockedRows) Close() {
	r.Rows.Close()
	r.unlock()
}

// lockedRow is QueryRow's pgx.Row: the first row, as pgx's own.
type lockedRow struct {
	rows pgx.Rows
	err  error
}

func (r lockedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// lockedBatch releases its transaction's turn when closed.
type lockedBatch struct {
	pgx.BatchResults
	unlock func()
}

func (b *lockedBatch) Close() error {
	err := b.BatchResults.Close()
	b.unlock()
	return err
}
