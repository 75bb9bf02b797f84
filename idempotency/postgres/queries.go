package postgres

// queries are the Store's SQL statements for its table.
type queries struct {
	schema, lock, renew, read, upsert, sweep, held string
}

func newQueries(t string) queries {
	return queries{
		schema: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	scope bytea PRIMARY KEY,
	route text NOT NULL,
	idem_key text NOT NULL,
	fingerprint bytea NOT NULL,
	status integer NOT NULL,
	header bytea NOT NULL,
	body bytea NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ` + indexName(t) + ` ON ` + t + ` (expires_at)`,
		// The lock, and the idle timeout that bounds a stuck transaction
		// (see the package documentation), in one statement; the read in
		// another, so that its snapshot is taken after the lock.
		lock: `SELECT pg_try_advisory_xact_lock($1), set_config('idle_in_transaction_session_timeout', $2, true)`,
		// A renewal: any statement restarts the server's idle timer.
		renew: `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`,
		read:  `SELECT fingerprint, status, header, body, expires_at FROM ` + t + ` WHERE scope = $1`,
		upsert: `INSERT INTO ` + t + ` (scope, route, idem_key, fingerprint, status, header, body, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (scope) DO UPDATE SET route = $2, idem_key = $3, fingerprint = $4, status = $5, header = $6, body = $7,
	created_at = $8, expires_at = $9`,
		// Whether a transaction holds the scope's lock (pg_try_advisory_xact_lock
		// of one bigint: classid its high 32 bits, objid its low ones).
		held: `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
	AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid)`,
		sweep: `DELETE FROM ` + t + ` WHERE expires_at <= $1`,
	}
}

// indexName derives the expiry index's name from the quoted table name:
// the table's last part with "_expires" (quoted, in the same schema).
func indexName(t string) string {
	// t ends with a quoted identifier: "name" → "name_expires"
	return `"` + t[lastQuoted(t)+1:len(t)-1] + `_expires"`
}

// lastQuoted returns the index of the opening quote of t's last part.
func lastQuoted(t string) int {
	for i := len(t) - 2; i >= 0; i-- {
		if t[i] == '"' && (i == 0 || t[i-1] == '.') {
			return i
		}
	}
	return 0
}
