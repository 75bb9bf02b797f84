package postgres

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resilienthttp/resilient/persist"
)

// queries holds the SQL of one Store, with its table name filled in.
type queries struct {
	schema     []string
	claim      string
	claimBound string
	claimRead  string
	claimTx    string
	read       string
	finish     string
	pending    string
	delete     string
	expire     string
	take       string
	failed     string
	handed     string
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = "operation, key, fingerprint, created, state, attempts"

// newQueries returns the SQL for the table, a quoted identifier.
func newQueries(table string) queries {
	t := func(sql string) string { return strings.ReplaceAll(sql, "$T", table) }
	// An index name is the table's last name part plus a suffix, quoted
	// again: pgx.Identifier quotes each part of a qualified name.
	name := table[strings.LastIndex(table, ".")+1:]
	name = strings.Trim(name, `"`)
	idx := func(suffix string) string { return pgx.Identifier{name + suffix}.Sanitize() }
	return queries{
		schema: []string{
			t(`CREATE TABLE IF NOT EXISTS $T (
    operation   bytea       PRIMARY KEY,
    key         bytea       NOT NULL,
    fingerprint bytea       NOT NULL,
    created     timestamptz NOT NULL,
    state       smallint    NOT NULL,
    attempts    integer     NOT NULL,
    lease_until timestamptz NOT NULL,
    epoch       bigint      NOT NULL,
    sends       integer     NOT NULL,
    unknown     boolean     NOT NULL,
    tries       integer     NOT NULL DEFAULT 0
)`),
			// A table made before the tries column: add it.
			t(`ALTER TABLE $T ADD COLUMN IF NOT EXISTS tries integer NOT NULL DEFAULT 0`),
			t(`CREATE INDEX IF NOT EXISTS ` + idx("_pending") + ` ON $T (created, operation) WHERE state = 1`),
		},
		// $1 operation, $2 key, $3 fingerprint, $4 created, $5 attempts,
		// $6 lease (µs), $7 the caller's lease generation. A new record is
		// the caller's (generation 1, one send). An existing one is
		// returned only to its current generation, for the same request
		// (its fingerprint, or none yet), which renews the lease and
		// counts the send if it is pending; otherwise no row (claimRead
		// says why).
		claim: t(`INSERT INTO $T AS r (operation, key, fingerprint, created, state, attempts, lease_until, epoch, sends, unknown)
VALUES ($1, $2, $3, $4, 1, $5, clock_timestamp() + $6 * interval '1 microsecond', 1, 1, false)
ON CONFLICT (operation) DO UPDATE SET
    fingerprint = CASE WHEN r.fingerprint = '' THEN EXCLUDED.fingerprint ELSE r.fingerprint END,
    sends = CASE WHEN r.state = 1 THEN r.sends + 1 ELSE r.sends END,
    lease_until = CASE WHEN r.state = 1 THEN greatest(r.lease_until, EXCLUDED.lease_until) ELSE r.lease_until END
WHERE r.epoch = $7 AND (r.fingerprint = '' OR r.fingerprint = EXCLUDED.fingerprint)
RETURNING ` + recordColumns + `, (xmax = 0)`),
		// A bound call's claim: the update of claim, never an insert.
		// $1 operation, $2 the bound key ('' for any), $3 fingerprint,
		// $4 lease (µs), $5 generation. A record another transaction
		// inserted and has not committed is invisible here: no row, no wait.
		claimBound: t(`UPDATE $T AS r SET
    fingerprint = CASE WHEN r.fingerprint = '' THEN $3 ELSE r.fingerprint END,
    sends = CASE WHEN r.state = 1 THEN r.sends + 1 ELSE r.sends END,
    lease_until = CASE WHEN r.state = 1 THEN greatest(r.lease_until, clock_timestamp() + $4 * interval '1 microsecond') ELSE r.lease_until END
WHERE r.operation = $1 AND r.epoch = $5 AND ($2 = ''::bytea OR r.key = $2) AND (r.fingerprint = '' OR r.fingerprint = $3)
RETURNING ` + recordColumns + `, false`),
		// Why a claim returned no row: the record (if any) and its generation.
		claimRead: t(`SELECT ` + recordColumns + `, epoch FROM $T WHERE operation = $1`),
		// ClaimTx: the same insert with no send counted; on conflict
		// nothing is changed and read fetches the existing record.
		claimTx: t(`INSERT INTO $T (operation, key, fingerprint, created, state, attempts, lease_until, epoch, sends, unknown)
VALUES ($1, $2, $3, $4, 1, $5, clock_timestamp() + $6 * interval '1 microsecond', 1, 0, false)
ON CONFLICT (operation) DO NOTHING`),
		read: t(`SELECT ` + recordColumns + ` FROM $T WHERE operation = $1`),
		// $1 operation, $2 state, $3 attempts, $4 the caller's generation.
		// Done (2) is final: a later Pending keeps it.
		finish: t(`UPDATE $T SET
    state = CASE WHEN state = 2 THEN state WHEN $2::smallint = 2 OR epoch = $4 THEN $2::smallint ELSE state END,
    attempts = CASE WHEN $2::smallint = 2 OR epoch = $4 THEN $3::integer ELSE attempts END
WHERE operation = $1`),
		pending: t(`SELECT ` + recordColumns + ` FROM $T WHERE state = 1 ORDER BY created, operation`),
		delete:  t(`DELETE FROM $T WHERE operation = $1`),
		expire:  t(`DELETE FROM $T WHERE created < $1`),
		// $1 grace (µs), $2 lease (µs), $3 limit, $4 created at most,
		// ($5, $6) the (created, operation) of the last record this
		// Resume took: takes the lease of up to $3 pending records after
		// it, created by $4 and older than the grace period, whose lease
		// has expired, skipping rows another transaction holds.
		take: t(`UPDATE $T AS r SET epoch = r.epoch + 1, lease_until = clock_timestamp() + $2 * interval '1 microsecond'
FROM (SELECT operation FROM $T
      WHERE state = 1 AND lease_until < clock_timestamp() AND created < clock_timestamp() - $1 * interval '1 microsecond'
        AND created <= $4 AND (created, operation) > ($5, $6)
      ORDER BY created, operation LIMIT $3 FOR UPDATE SKIP LOCKED) AS due
WHERE r.operation = due.operation
RETURNING r.operation, r.key, r.fingerprint, r.created, r.state, r.attempts, r.epoch, r.sends, r.tries`),
		// $1 operation, $2 generation, $3 lease (µs): a Resume could not
		// finish the record: one more try, and its lease is extended by
		// the lease length times 2^tries (at most 64), so that a record
		// that keeps failing is retried less and less often.
		failed: t(`UPDATE $T SET tries = tries + 1,
    lease_until = greatest(lease_until, clock_timestamp() + $3 * least(power(2, tries), 64) * interval '1 microsecond')
WHERE operation = $1 AND epoch = $2 AND state = 1
RETURNING tries`),
		// $1 operation, $2 generation: a Resumer hands the record over.
		handed: t(`UPDATE $T SET state = 2, unknown = true WHERE operation = $1 AND epoch = $2 AND state = 1`),
	}
}

// scanRecord reads the recordColumns of a row.
func scanRecord(row pgx.CollectableRow) (persist.Record, error) {
	var (
		op, key, fp []byte
		created     time.Time
		state       int16
		attempts    int32
	)
	if err := row.Scan(&op, &key, &fp, &created, &state, &attempts); err != nil {
		return persist.Record{}, err
	}
	return persist.Record{Operation: string(op), Key: string(key), Fingerprint: string(fp),
		Created: created.UTC(), State: persist.State(state), Attempts: int(attempts)}, nil
}

// scanClaim reads the reply of the claim query: the record and whether it
// was inserted. The operation name is op (the row's is the same).
func scanClaim(op string, row pgx.Row) (persist.Record, bool, error) {
	var (
		name, key, fp []byte
		created       time.Time
		state         int16
		attempts      int32
		inserted      bool
	)
	if err := row.Scan(&name, &key, &fp, &created, &state, &attempts, &inserted); err != nil {
		return persist.Record{}, false, err
	}
	return persist.Record{Operation: op, Key: string(key), Fingerprint: string(fp),
		Created: created.UTC(), State: persist.State(state), Attempts: int(attempts)}, inserted, nil
}
