package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resilienthttp/resilient/persist"
)

// Resumer re-drives, after a crash, the operations whose records are still
// pending: those claimed with ClaimTx whose transaction committed but whose
// call never finished, and those whose call ended without a definitive
// answer. Resume takes the lease of each pending record older than Grace
// whose lease has expired (FOR UPDATE SKIP LOCKED, so Resumers in several
// processes share the work), then either re-sends it with its key or hands
// it to the application:
//
//   - a record that was provably never sent (no Claim ever allowed a send:
//     the process died between its commit and its call) is re-sent, whatever
//     the server;
//   - a record that may have been sent is re-sent only if KeysHonored says
//     the server dedupes by idempotency key; otherwise re-sending could apply
//     it twice, so it is handed to Unknown, with its key, in a transaction
//     that also marks the record done: the application learns of it exactly
//     once, and it is never re-driven.
//
// A re-send goes through Client, whose Transport must be a resilient
// Transport with WithStore(Store): Resume names the operation
// (resilient.ContextWithOperation) and passes its lease in the request's
// context, the Transport claims the record (which fails, sending nothing, if
// another Resumer took the lease meanwhile), sends its key and records the
// outcome. A done record is never re-driven.
//
// The fields must not change while Resume runs.
type Resumer struct {
	// Store holds the records. Required.
	Store *Store
	// Client sends the re-driven requests; its Transport is a resilient
	// Transport with WithStore(Store). Required.
	Client *http.Client
	// Request rebuilds the request of a pending operation from the
	// application's own rows, for example the order the operation name
	// refers to. It must make the same request as the first time (method,
	// URL and body: the Transport compares their fingerprint). Resume sends
	// it with a context of its own (deriving from Resume's). Required.
	Request func(ctx context.Context, rec persist.Record) (*http.Request, error)
	// Response, if set, receives the answer to a re-sent request; Resume
	// closes its body afterwards. An error it returns is reported by Resume.
	// The record is already done (or still pending if the answer was not
	// definitive) when Response runs.
	Response func(ctx context.Context, rec persist.Record, resp *http.Response) error
	// Unknown receives, inside tx, each operation that may have been sent
	// and is not re-sent (KeysHonored false): its effect is unknown, and
	// rec.Key is what to ask the server about. tx also marks the record
	// done; both commit or neither does (an error from Unknown rolls back).
	// Required unless KeysHonored.
	Unknown func(ctx context.Context, tx pgx.Tx, rec persist.Record) error
	// KeysHonored says the server dedupes requests by their idempotency
	// key, so that re-sending an operation that may have been applied is
	// answered with the stored outcome instead of applied again. False (the
	// default) re-sends only operations that were provably never sent.
	KeysHonored bool
	// Grace is how old (by Created) a pending record must be before Resume
	// takes it. Default 0: its lease alone decides.
	Grace time.Duration
	// Limit is the most records taken at once; Resume takes batches until
	// none is due. Default 100.
	Limit int
}

// Result counts what one Resume did.
type Result struct {
	// Resent counts operations re-sent and answered (by a success or an
	// error response; see the record's state for which).
	Resent int
	// Unknown counts operations handed to Resumer.Unknown.
	Unknown int
	// Failed counts operations Resume took but could not finish: the
	// request could not be built or got no answer, or a callback failed.
	// They stay pending and are taken again once their lease expires.
	Failed int
}

// Resume takes the lease of every due pending record, batch after batch, and
// re-drives each (see Resumer). It returns what it did, and the errors of the
// operations it could not finish, joined, with their operation names; it
// returns early, with ctx's error, when ctx is done.
func (r *Resumer) Resume(ctx context.Context) (Result, error) {
	var res Result
	switch {
	case r.Store == nil || r.Client == nil || r.Request == nil:
		return res, errors.New("persist/postgres: resumer: Store, Client and Request are required")
	case r.Unknown == nil && !r.KeysHonored:
		return res, errors.New("persist/postgres: resumer: Unknown is required unless KeysHonored")
	}
	limit := r.Limit
	if limit <= 0 {
		limit = 100
	}
	var errs []error
	for {
		batch, err := r.take(ctx, limit)
		if err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		for _, p := range batch {
			if err := r.drive(ctx, p, &res); err != nil {
				res.Failed++
				errs = append(errs, fmt.Errorf("persist/postgres: resume %q: %w", p.rec.Operation, err))
			}
			if ctx.Err() != nil {
				return res, errors.Join(append(errs, ctx.Err())...)
			}
		}
		if len(batch) < limit {
			return res, errors.Join(errs...)
		}
	}
}

// taken is a pending record whose lease Resume holds.
type taken struct {
	rec   persist.Record
	gen   int64 // the lease generation Resume took
	sends int   // sends allowed before: 0 proves it was never sent
}

// take takes the lease of up to limit due records.
func (r *Resumer) take(ctx context.Context, limit int) ([]taken, error) {
	s := r.Store
	rows, err := s.pool.Query(ctx, s.q.take, r.Grace.Microseconds(), s.lease.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("persist/postgres: resume: take leases: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (taken, error) {
		var (
			op, key, fp []byte
			created     time.Time
			state       int16
			attempts    int32
			gen         int64
			sends       int32
		)
		if err := row.Scan(&op, &key, &fp, &created, &state, &attempts, &gen, &sends); err != nil {
			return taken{}, err
		}
		return taken{rec: persist.Record{Operation: string(op), Key: string(key), Fingerprint: string(fp),
			Created: created.UTC(), State: persist.State(state), Attempts: int(attempts)}, gen: gen, sends: int(sends)}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist/postgres: resume: take leases: %w", err)
	}
	return batch, nil
}

// drive re-sends p or hands it to Unknown.
func (r *Resumer) drive(ctx context.Context, p taken, res *Result) error {
	if p.sends > 0 && !r.KeysHonored {
		return r.handOver(ctx, p, res)
	}
	opCtx := contextWithLease(Bind(ctx, p.rec), p.gen) // never inserts: a record gone meanwhile is not sent
	req, err := r.Request(opCtx, p.rec)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if req == nil {
		return errors.New("build request: nil request")
	}
	resp, err := r.Client.Do(req.WithContext(opCtx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	res.Resent++
	if r.Response != nil {
		if err := r.Response(opCtx, p.rec, resp); err != nil {
			return fmt.Errorf("response callback: %w", err)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body) // lets the connection be reused
	return nil
}

// handOver calls Unknown in a transaction that marks p's record done, if
// Resume still holds its lease.
func (r *Resumer) handOver(ctx context.Context, p taken, res *Result) error {
	s := r.Store
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	tag, err := tx.Exec(ctx, s.q.handed, []byte(p.rec.Operation), p.gen)
	if err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("hand over: %w", ErrLeaseLost) // finished or taken meanwhile
	}
	if err := r.Unknown(ctx, tx, p.rec); err != nil {
		return fmt.Errorf("unknown callback: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("hand over: commit: %w", err)
	}
	res.Unknown++
	return nil
}
