package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resilienthttp/resilient"
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
//     once, and it is never re-driven;
//   - a record whose request can never be sent (Request returned an error
//     wrapping ErrCannotRebuild, or the Transport refused the rebuilt
//     request with resilient.ErrOperationMismatch, ErrInvalidKey or
//     ErrKeyExpired) is handed to Unknown the same way, once.
//
// Any other failure (a database blip while rebuilding the request, no
// answer from the server, a callback's error) leaves the record pending: it
// is tried again by a later Resume, once its lease, doubled per failed try
// (the tries column) up to 64 times the lease length, has expired. A
// transient failure is never turned into a hand-over, however many tries.
//
// A re-send goes through Client, whose Transport must be a resilient
// Transport with WithStore(Store): Resume binds the call to the record
// (Bind) and passes its lease in the request's context; the Transport
// claims the record (which fails, sending nothing, if another Resumer took
// the lease meanwhile or the record is gone), sends its key and records the
// outcome. A done record is never re-driven.
//
// The fields must not change while Resume or Run runs.
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
	// it with a context of its own (deriving from Resume's). An error
	// wrapping ErrCannotRebuild says the request can never be rebuilt (the
	// order is gone): the record is handed to Unknown. Any other error is
	// taken as transient: the record is tried again later. Required.
	Request func(ctx context.Context, rec persist.Record) (*http.Request, error)
	// Response, if set, receives the answer to a re-sent request; Resume
	// closes its body afterwards. An error it returns is reported by Resume.
	// The record is already done (or still pending if the answer was not
	// definitive) when Response runs.
	Response func(ctx context.Context, rec persist.Record, resp *http.Response) error
	// Unknown receives, inside tx, each operation that may have been sent
	// and is not re-sent (KeysHonored false), or whose request can never be
	// sent: its effect is unknown, and rec.Key is what to ask the server
	// about. tx also marks the record done; both commit or neither does (an
	// error from Unknown rolls back). Required unless KeysHonored; without
	// it, a record whose request can never be sent is marked done and
	// reported in Resume's error, once.
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
	// none of the records due when it started is left. Default 100.
	Limit int
	// Report, if set, receives the result and error of each pass of Run.
	Report func(res Result, err error)
}

// ErrCannotRebuild is what Resumer.Request wraps in its error when the
// request of an operation can never be rebuilt: the record is handed to
// Resumer.Unknown instead of tried again.
var ErrCannotRebuild = errors.New("persist/postgres: the request cannot be rebuilt")

// Result counts what one Resume did.
type Result struct {
	// Resent counts operations re-sent and answered (by a success or an
	// error response; see the record's state for which).
	Resent int
	// Unknown counts operations handed to Resumer.Unknown (or, without
	// it, marked done as unknown).
	Unknown int
	// Failed counts operations Resume took but could not finish: the
	// request could not be built or got no answer, or a callback failed.
	// They stay pending and are taken again once their lease expires.
	Failed int
}

// ResumeError is the error of a Resume some of whose operations failed:
// how many, and the first few errors, each naming its operation (and its
// try count). Its size is bounded, however many records failed.
type ResumeError struct {
	// Count is the number of operations that failed.
	Count int
	// Sample holds the first errors, at most eight.
	Sample []error
}

// maxSample is the most errors a ResumeError keeps.
const maxSample = 8

func (e *ResumeError) add(err error) {
	e.Count++
	if len(e.Sample) < maxSample {
		e.Sample = append(e.Sample, err)
	}
}

// Error returns the count and the sample, one error per line.
func (e *ResumeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "persist/postgres: resume: %d operations failed", e.Count)
	if e.Count > len(e.Sample) {
		fmt.Fprintf(&b, " (the first %d follow)", len(e.Sample))
	}
	for _, err := range e.Sample {
		b.WriteString("\n")
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the sample, for errors.Is and errors.As.
func (e *ResumeError) Unwrap() []error { return e.Sample }

// Resume takes the lease of every pending record due when it starts, batch
// after batch, each at most once, and re-drives each (see Resumer); records
// that fail are left for a later call. It returns what it did and, if some
// operations failed, a *ResumeError; it returns early, with ctx's error
// (joined to a *ResumeError, if any), when ctx is done.
func (r *Resumer) Resume(ctx context.Context) (Result, error) {
	var res Result
	if err := r.check(); err != nil {
		return res, err
	}
	limit := r.Limit
	if limit <= 0 {
		limit = 100
	}
	var (
		rerr  ResumeError
		after cursor
	)
	// A record created from now on is for the next Resume.
	until := time.Now()
	failed := func(err error) error {
		if rerr.Count == 0 {
			return err
		}
		return errors.Join(&rerr, err)
	}
	for {
		batch, err := r.take(ctx, limit, until, after)
		if err != nil {
			return res, failed(err)
		}
		for _, p := range batch {
			after = cursor{p.rec.Created, p.rec.Operation}
			if err := r.drive(ctx, p, &res); err != nil {
				rerr.add(fmt.Errorf("persist/postgres: resume %q: %w", p.rec.Operation, err))
			}
			if ctx.Err() != nil {
				return res, failed(ctx.Err())
			}
		}
		if len(batch) < limit {
			return res, failed(nil)
		}
	}
}

// check reports a missing field.
func (r *Resumer) check() error {
	switch {
	case r.Store == nil || r.Client == nil || r.Request == nil:
		return errors.New("persist/postgres: resumer: Store, Client and Request are required")
	case r.Unknown == nil && !r.KeysHonored:
		return errors.New("persist/postgres: resumer: Unknown is required unless KeysHonored")
	}
	return nil
}

// Run calls Resume, then again every interval after each pass ends, until
// ctx is done; each pass's result and error go to Report, if set. It
// returns ctx's error, or at once the error of a Resumer that lacks a
// required field. An interval of zero or less is the Store's lease length.
func (r *Resumer) Run(ctx context.Context, every time.Duration) error {
	if err := r.check(); err != nil {
		return err
	}
	if every <= 0 {
		every = r.Store.lease
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		res, err := r.Resume(ctx)
		if r.Report != nil && ctx.Err() == nil {
			r.Report(res, err)
		}
		t.Reset(every)
	}
}

// cursor is the (created, operation) of the last record a Resume took:
// the next batch starts after it.
type cursor struct {
	created time.Time
	op      string
}

// taken is a pending record whose lease Resume holds.
type taken struct {
	rec   persist.Record
	gen   int64 // the lease generation Resume took
	sends int   // sends allowed before: 0 proves it was never sent
	tries int   // earlier Resumes that could not finish it
}

// take takes the lease of up to limit due records created by until,
// after the record at after.
func (r *Resumer) take(ctx context.Context, limit int, until time.Time, after cursor) ([]taken, error) {
	s := r.Store
	rows, err := s.pool.Query(ctx, s.q.take, r.Grace.Microseconds(), s.lease.Microseconds(), limit,
		until, after.created, []byte(after.op))
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
			tries       int32
		)
		if err := row.Scan(&op, &key, &fp, &created, &state, &attempts, &gen, &sends, &tries); err != nil {
			return taken{}, err
		}
		return taken{rec: persist.Record{Operation: string(op), Key: string(key), Fingerprint: string(fp),
			Created: created.UTC(), State: persist.State(state), Attempts: int(attempts)},
			gen: gen, sends: int(sends), tries: int(tries)}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist/postgres: resume: take leases: %w", err)
	}
	return batch, nil
}

// drive re-sends p or hands it to Unknown. A failure that may pass is
// recorded as a try (see Resumer), and counted in res.Failed.
func (r *Resumer) drive(ctx context.Context, p taken, res *Result) error {
	if p.sends > 0 && !r.KeysHonored {
		return r.retry(ctx, p, res, r.handOver(ctx, p, res, nil))
	}
	err := r.resend(ctx, p, res)
	if permanent(err) {
		return r.retry(ctx, p, res, r.handOver(ctx, p, res, err))
	}
	return r.retry(ctx, p, res, err)
}

// resend rebuilds p's request and sends it, bound to its record.
func (r *Resumer) resend(ctx context.Context, p taken, res *Result) error {
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

// permanent reports whether err says p's request can never be sent: a
// rebuild the application says is impossible, or a refusal of the
// Transport that no later try can change.
func permanent(err error) bool {
	for _, target := range []error{ErrCannotRebuild, resilient.ErrOperationMismatch, resilient.ErrInvalidKey, resilient.ErrKeyExpired} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// retry records a failed try of p (err not nil): one more try, a longer
// lease. It returns err with the try count.
func (r *Resumer) retry(ctx context.Context, p taken, res *Result, err error) error {
	if h, ok := errors.AsType[*handedOver](err); err == nil || ok {
		return h.orNil()
	}
	res.Failed++
	s := r.Store
	var tries int32
	if terr := s.pool.QueryRow(ctx, s.q.failed, []byte(p.rec.Operation), p.gen, s.lease.Microseconds()).Scan(&tries); terr != nil {
		return fmt.Errorf("try %d: %w (and recording the try: %w)", p.tries+1, err, terr)
	}
	return fmt.Errorf("try %d: %w", tries, err)
}

// handOver calls Unknown in a transaction that marks p's record done, if
// Resume still holds its lease. cause is why p can never be sent (nil for a
// record that may have been sent): without Unknown, it is returned once the
// record is marked.
func (r *Resumer) handOver(ctx context.Context, p taken, res *Result, cause error) error {
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
	if r.Unknown != nil {
		if err := r.Unknown(ctx, tx, p.rec); err != nil {
			return fmt.Errorf("unknown callback: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("hand over: commit: %w", err)
	}
	res.Unknown++
	if r.Unknown == nil && cause != nil {
		return &handedOver{cause}
	}
	return nil
}

// handedOver is the error of a record marked done as unknown without an
// Unknown callback: reported once, not a failed try.
type handedOver struct{ err error }

func (h *handedOver) Error() string {
	return "marked done as unknown (no Unknown callback): " + h.err.Error()
}
func (h *handedOver) Unwrap() error { return h.err }

// orNil returns h as an error, nil for a nil h.
func (h *handedOver) orNil() error {
	if h == nil {
		return nil
	}
	return h
}
