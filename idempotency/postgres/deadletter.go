package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resilienthttp/resilient/idempotency"
)

// The failed runs of a scope (idempotency.Failer) are a row of their own
// in the table's sibling, <table>_failures, which CreateSchema creates:
// the count, the last error, and whether the scope is a dead letter. A
// failed run rolls back the claim's transaction (and the run's effects),
// then counts the failure in a statement of its own.

var (
	_ idempotency.Failer          = (*claim)(nil)
	_ idempotency.DeadLetterStore = (*Store)(nil)
)

// failureQueries are the statements of the failures table.
type failureQueries struct {
	schema, read, fail, list, release, sweep string
}

func newFailureQueries(t string) failureQueries {
	f := t[:lastQuoted(t)] + `"` + t[lastQuoted(t)+1:len(t)-1] + `_failures"`
	// The count restarts at 1 when the failures had expired.
	count := `CASE WHEN f.expires_at <= $5 THEN 1 ELSE f.failures + 1 END`
	return failureQueries{
		schema: `CREATE TABLE IF NOT EXISTS ` + f + ` (
	scope bytea PRIMARY KEY,
	route text NOT NULL,
	idem_key text NOT NULL,
	failures integer NOT NULL,
	last_error text NOT NULL,
	dead boolean NOT NULL,
	failed_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
)`,
		read: `SELECT failures, dead FROM ` + f + ` WHERE scope = $1 AND expires_at > $2`,
		fail: `INSERT INTO ` + f + ` AS f (scope, route, idem_key, failures, last_error, dead, failed_at, expires_at)
VALUES ($1, $2, $3, 1, $4, $7::integer > 0 AND 1 >= $7::integer, $5, $6)
ON CONFLICT (scope) DO UPDATE SET failures = ` + count + `, last_error = $4,
	dead = $7::integer > 0 AND ` + count + ` >= $7::integer, failed_at = $5, expires_at = $6`,
		list: `SELECT idem_key, failures, last_error, failed_at, expires_at FROM ` + f + `
WHERE route = $1 AND dead AND expires_at > $2 ORDER BY failed_at LIMIT $3`,
		release: `DELETE FROM ` + f + ` WHERE scope = $1`,
		sweep:   `DELETE FROM ` + f + ` WHERE expires_at <= $1`,
	}
}

// Failures implements idempotency.Failer: one statement in the claim's
// transaction, which holds the scope's lock.
func (c *claim) Failures(ctx context.Context, now time.Time) (int, bool, error) {
	if c.ended {
		return 0, false, idempotency.ErrClaimEnded
	}
	var n int
	var dead bool
	bctx := context.WithValue(ctx, txKey{}, c.tx.view())
	var err error
	if tx := Tx(bctx); tx != nil {
		err = tx.QueryRow(bctx, c.s.fq.read, c.scope[:], now).Scan(&n, &dead)
	} else {
		err = SQLTx(bctx).QueryRowContext(bctx, c.s.fq.read, c.scope[:], now).Scan(&n, &dead)
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, c.s.explain("failures", err)
	}
	return n, dead, nil
}

// Fail implements idempotency.Failer: it rolls the claim's transaction
// back, then counts the failed run.
func (c *claim) Fail(ctx context.Context, run idempotency.FailedRun) error {
	if err := c.Release(ctx); err != nil {
		return err
	}
	if _, err := c.s.db.exec(context.WithoutCancel(ctx), c.s.fq.fail, c.scope[:], c.sc.Route, c.sc.Key, run.Error,
		run.At, run.Expires, run.Max); err != nil {
		return c.s.explain("count the failure", err)
	}
	return nil
}

// DeadLetters implements idempotency.DeadLetterStore, oldest failure
// first.
func (s *Store) DeadLetters(ctx context.Context, route string, now time.Time, limit int) ([]idempotency.DeadLetter, error) {
	tx, err := s.db.begin(ctx, time.Time{})
	if err == nil {
		err = tx.start(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency/postgres: dead letters: %w", err)
	}
	defer func() { _ = tx.rollback(context.WithoutCancel(ctx)) }()
	bctx := context.WithValue(ctx, txKey{}, tx.view())
	var out []idempotency.DeadLetter
	scan := func(r row) error {
		var d idempotency.DeadLetter
		if err := r.Scan(&d.Key, &d.Failures, &d.LastError, &d.Failed, &d.Expires); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	}
	if ptx := Tx(bctx); ptx != nil {
		rows, qerr := ptx.Query(bctx, s.fq.list, route, now, limit)
		if qerr == nil {
			for rows.Next() && err == nil {
				err = scan(rows)
			}
			rows.Close()
			qerr = rows.Err()
		}
		err = errors.Join(err, qerr)
	} else {
		rows, qerr := SQLTx(bctx).QueryContext(bctx, s.fq.list, route, now, limit)
		if qerr == nil {
			for rows.Next() && err == nil {
				err = scan(rows)
			}
			qerr = errors.Join(rows.Err(), rows.Close())
		}
		err = errors.Join(err, qerr)
	}
	if err != nil {
		return nil, s.explain("dead letters", err)
	}
	return out, nil
}

// ReleaseDeadLetter implements idempotency.DeadLetterStore.
func (s *Store) ReleaseDeadLetter(ctx context.Context, sc idempotency.Scope) error {
	h := sc.Hash()
	if _, err := s.db.exec(ctx, s.fq.release, h[:]); err != nil {
		return s.explain("release dead letter", err)
	}
	return nil
}
