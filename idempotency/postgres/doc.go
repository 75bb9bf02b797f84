// Package postgres is an idempotency.Store in PostgreSQL that is atomic
// with the handler's effect: the handler (or an Inbox's function) gets the
// transaction that holds the key's record (Tx, or SQLTx for database/sql),
// writes its own rows in it, and the stored answer commits with them or
// not at all. A handler that fails (5xx, panic) is rolled back: no record,
// no effect, and the client's retry runs again.
//
// # How a request claims its key
//
// Begin opens a READ COMMITTED transaction and, in one round trip, takes a
// transaction-scoped advisory lock on the scope's hash
// (pg_try_advisory_xact_lock) and reads the scope's committed record. A
// concurrent duplicate finds the lock taken and is answered 409 at once:
// it never waits on the first request's uncommitted row, holding a pooled
// connection. The lock ends with the transaction, so a crashed process
// (its connection closed) frees the key for the retry. On a
// *pgxpool.Pool the Store pipelines: BEGIN goes with the lock and the read
// in one batch, the record's INSERT with COMMIT in another, so a first
// request costs two round trips of the Store's own, a replay two (the
// batch, ROLLBACK), a duplicate in progress two. Over database/sql, which
// cannot pipeline, they cost five (BEGIN, lock, read, INSERT, COMMIT),
// four and four; over a single *pgx.Conn four, three and three.
//
// A request the middleware passes through without a record (a safe
// method, or no key) gets a transaction too (BeginTx), begun at the
// handler's first use of Tx (SQLTx): a handler that does not use it costs
// no round trip and is answered with the database down; one statement in
// it costs three (BEGIN, the statement, COMMIT).
//
// # What bounds a stuck transaction
//
// The handler runs with a context that ends at the request's deadline or
// after the middleware's Lease; pgx cancels the statements it runs with
// it. The claim's transaction does not end with it: Begin sets
// idle_in_transaction_session_timeout for the transaction (SET LOCAL) to
// the lease, and while the handler runs the middleware renews the claim
// every third of the lease: a statement on the transaction that restarts
// the server's idle timer (skipped while the handler's own statement
// runs, which keeps it from being idle). So a slow, live handler keeps
// its transaction, and a duplicate gets 409 however long it runs. The
// renewals and the handler take turns on the connection: Tx is safe to
// use from the handler's goroutines one call at a time.
//
// When the owner stops renewing (its process paused, or cut off, for a
// whole lease: three renewals), the server ends the session, rolls the
// transaction back and frees the key: the next request runs, and nothing
// of the stopped run can commit. So two effects never commit, whatever
// the pause; two runs are at once only while the paused one can no longer
// commit. A crashed process (its connection closed) frees the key at
// once; a client host that vanished is found by the server's TCP
// keepalives (tcp_keepalives_idle) or by the idle timeout, whichever
// comes first. A handler that never returns keeps its key busy, and a
// connection, for the life of its process.
//
// Two scopes whose hashes share their first 64 bits share a lock: a
// request of one may get 409 while the other runs (about one chance in
// 2^64 per pair).
//
// The failed runs of Inbox.Do (its dead letters) are rows of the table
// named as the Store's with "_failures", which CreateSchema creates. A
// failed run rolls back its transaction, effects included, then counts
// the failure in a statement of its own: a delivery that claims the
// message between the two runs with the count before it, so a message
// redelivered concurrently may run once more than Inbox.MaxFailures.
// Reading the count costs Inbox.Do one round trip more per run.
package postgres
