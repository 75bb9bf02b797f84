package postgres

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolBackend is pgx over a *pgxpool.Pool, pipelined: a claim's BEGIN
// goes with its lock and read in one batch, its record's INSERT with its
// COMMIT in another, so that the Store's own statements cost two round
// trips.
type poolBackend struct{ p *pgxpool.Pool }

// begin acquires a connection; BEGIN is sent with the first batch.
func (b poolBackend) begin(ctx context.Context, _ time.Time) (txn, error) {
	conn, err := b.p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &poolTxn{conn: conn, mu: new(sync.Mutex)}, nil
}

func (b poolBackend) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return pgxBackend{b.p}.exec(ctx, sql, args...)
}

func (b poolBackend) lookup(ctx context.Context, q queries, lockKey int64, scope []byte) (bool, *record, error) {
	return pgxBackend{b.p}.lookup(ctx, q, lockKey, scope)
}

const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

// poolTxn is a transaction on an acquired connection, released when the
// transaction ends (a connection released inside a transaction, after an
// error, is closed by the pool).
type poolTxn struct {
	conn  *pgxpool.Conn
	mu    *sync.Mutex // the handler's calls (lockedTx) and the renewals take turns
	begun bool
}

func (t *poolTxn) start(ctx context.Context) error {
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, beginSQL); err != nil {
		t.conn.Release()
		return err
	}
	t.begun = true
	return nil
}

func (t *poolTxn) lockAndRead(ctx context.Context, q queries, lockKey int64, idleMS string, scope []byte) (bool, *record, error) {
	batch := &pgx.Batch{}
	batch.Queue(beginSQL)
	batch.Queue(q.lock, lockKey, idleMS)
	batch.Queue(q.read, scope)
	br := t.conn.SendBatch(ctx, batch)
	t.begun = true
	if _, err := br.Exec(); err != nil { // BEGIN
		_ = br.Close()
		return false, nil, err
	}
	return readLocked(br)
}

func (t *poolTxn) commitWith(ctx context.Context, sql string, args ...any) error {
	defer t.conn.Release()
	batch := &pgx.Batch{}
	batch.Queue(sql, args...)
	batch.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, batch)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The pipeline skipped COMMIT after the error, or the connection
		// failed: roll back what is left (Release closes a connection
		// still in a transaction).
		_, _ = t.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

func (t *poolTxn) renew(ctx context.Context, q queries, idleMS string) error {
	if !t.mu.TryLock() {
		return nil // the handler is using the connection: it is not idle
	}
	defer t.mu.Unlock()
	_, err := t.conn.Exec(ctx, q.renew, idleMS)
	return err
}

func (t *poolTxn) commit(ctx context.Context) error {
	defer t.conn.Release()
	_, err := t.conn.Exec(ctx, "COMMIT")
	return err
}

func (t *poolTxn) rollback(ctx context.Context) error {
	defer t.conn.Release()
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

func (t *poolTxn) view() any { return &lockedTx{tx: &connTx{conn: t.conn.Conn()}, mu: t.mu} }

// errClaimTx: the handler tried to end the claim's transaction itself.
var errClaimTx = errors.New("idempotency/postgres: the claim's transaction ends with the answer: do not commit or roll it back")

// connTx is the pgx.Tx of a claim on a pipelined connection: its
// statements run on the connection, which is in the claim's transaction.
// Begin opens a savepoint (a nested transaction, as pgx's own Tx does);
// the claim's transaction itself cannot be committed or rolled back
// through it. LargeObjects is not supported.
type connTx struct {
	conn *pgx.Conn
	sp   int // 0: the claim's transaction; else the savepoint's depth
}

var _ pgx.Tx = (*connTx)(nil)

func (t *connTx) savepoint() string { return "sp_" + strconv.Itoa(t.sp) }

func (t *connTx) Begin(ctx context.Context) (pgx.Tx, error) {
	nested := &connTx{conn: t.conn, sp: t.sp + 1}
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+nested.savepoint()); err != nil {
		return nil, err
	}
	return nested, nil
}

func (t *connTx) Commit(ctx context.Context) error {
	if t.sp == 0 {
		return errClaimTx
	}
	_, err := t.conn.Exec(ctx, "RELEASE SAVEPOINT "+t.savepoint())
	return err
}

func (t *connTx) Rollback(ctx context.Context) error {
	if t.sp == 0 {
		return errClaimTx
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+t.savepoint())
	return err
}

func (t *connTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

func (t *connTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *connTx) Conn() *pgx.Conn { return t.conn }
