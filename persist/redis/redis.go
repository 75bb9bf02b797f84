// Package redis is a persist.Store on Redis, for operations whose keys must be
// shared by many processes (replicas of a service, or a worker that resumes
// what another started). It is its own Go module, so that importing
// resilient does not pull in a Redis client.
//
// Claim is atomic on the server (a Lua script that creates the record only if
// it does not exist), so two processes that claim one operation get one key.
// A claim is durable as far as the Redis server's persistence is: configure
// appendonly with appendfsync always for a claim to survive a crash of Redis
// itself.
//
// Every method sends one command or script per call, except Pending and
// Expire, which work in pages of 1000 records, and Claim: concurrent Claims
// share one script (up to 128 claims per round trip, at most 4 in flight per
// Store). Redis answers a script after writing and, with appendfsync always,
// fsyncing its effects, so a claim is as durable when Claim returns as it
// would be sent alone.
//
// A Redis that cannot be reached makes each method return an error wrapping
// the client's, after the client's own dial timeout and retries.
//
// Every method returns by the time its context is done, whether or not the
// go-redis client was built with ContextTimeoutEnabled (without it, go-redis
// bounds a command by its ReadTimeout, not by the context's deadline). A call
// that the context ends returns an error wrapping ctx.Err()
// (context.DeadlineExceeded or context.Canceled). A Claim whose caller leaves
// before its script is sent sends nothing. A command already sent cannot be
// recalled: it goes on in the background until Redis answers or the
// client's own timeouts end it, and it may still take effect — a Claim may
// create its record, which a later Claim of the operation returns with the
// same key, so no operation is lost.
package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/persist"
)

// pageSize is how many index entries Pending and Expire handle per script.
const pageSize = 1000

// Store is a persist.Store in Redis. New returns one. A Store is safe for
// concurrent use by multiple goroutines, and any number of Stores, in any
// number of processes, may share one Redis and prefix.
//
// Its keys, under the prefix P (default "resilient:op:"):
//
//	P + "rec:" + operation   a hash: key, fp, created, state, attempts
//	P + "idx:pending"        sorted set of pending operations by creation time
//	P + "idx:all"            sorted set of all operations by creation time
//	P + "idx:exp"            sorted set of operations by expiry time (with a TTL)
//
// Redis expires a record after the TTL (default 48 h); the scripts drop the
// index entries of expired records as they meet them. Created is kept with
// microsecond precision and returned in UTC.
type Store struct {
	client    goredis.UniversalClient
	ttl       time.Duration
	recPrefix string
	pending   string
	all       string
	exp       string
	claims    *batcher
}

var _ persist.Store = (*Store)(nil)

// New returns a Store that keeps its records in client. The Store does not
// own client: closing it is the caller's job, after the last call.
func New(client goredis.UniversalClient, opts ...Option) *Store {
	o := options{prefix: DefaultPrefix, ttl: DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{
		client:    client,
		ttl:       max(o.ttl, 0),
		recPrefix: o.prefix + "rec:",
		pending:   o.prefix + "idx:pending",
		all:       o.prefix + "idx:all",
		exp:       o.prefix + "idx:exp",
	}
	s.claims = &batcher{
		client:  client,
		indexes: []string{s.pending, s.all, s.exp},
		ttl:     s.ttl.Milliseconds(),
		prefix:  s.recPrefix,
	}
	return s
}

// Claim returns the record of candidate.Operation, creating it with State
// Pending if there is none; Redis expires it after the TTL. A zero
// candidate.Created is set to the current time; Created is truncated to the
// microsecond.
//
// It returns an error if ctx is done when Claim starts or before Redis
// answers (the claim may still be made: see the package documentation), if
// candidate has an empty Operation or Key, a negative Attempts or a Created
// outside the years 1685 to 2255, or if Redis fails (for example cannot be
// reached).
func (s *Store) Claim(ctx context.Context, candidate persist.Record) (persist.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/redis: claim: %w", err)
	}
	if candidate.Created.IsZero() {
		candidate.Created = time.Now()
	}
	if err := checkCandidate(candidate); err != nil {
		return persist.Record{}, false, err
	}
	op := candidate.Operation
	created := micros(candidate.Created)
	res, err := s.claims.do(&claimCall{
		ctx:  ctx,
		rec:  s.recPrefix + op,
		args: [5]any{op, candidate.Key, candidate.Fingerprint, created, candidate.Attempts},
	})
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/redis: claim %q: %w", op, err)
	}
	if len(res) == 1 && res[0] == int64(1) {
		candidate.Created = time.UnixMicro(created).UTC()
		candidate.State = persist.Pending
		return candidate, true, nil
	}
	if len(res) != 2 || res[0] != int64(0) {
		return persist.Record{}, false, fmt.Errorf("persist/redis: claim %q: unexpected reply %v", op, res)
	}
	rec, err := decodeFields(op, res[1])
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/redis: claim %q: %w", op, err)
	}
	return rec, false, nil
}

// Finish sets the state and attempt count of op's record; the record keeps
// its TTL. It returns an error wrapping persist.ErrNotFound if op has no
// record (never claimed, deleted or expired), and an error if ctx is done
// when Finish starts or before Redis answers, state is neither Pending nor
// Done, attempts is negative, or Redis fails.
func (s *Store) Finish(ctx context.Context, op string, state persist.State, attempts int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist/redis: finish: %w", err)
	}
	if state != persist.Pending && state != persist.Done {
		return fmt.Errorf("persist/redis: finish %q: invalid state %v", op, state)
	}
	if attempts < 0 {
		return fmt.Errorf("persist/redis: finish %q: negative attempts %d", op, attempts)
	}
	found, err := bounded(ctx, func(ctx context.Context) (int64, error) {
		return finishScript.Run(ctx, s.client,
			[]string{s.recPrefix + op, s.pending},
			int(state), attempts, op,
		).Int64()
	})
	if err != nil {
		return fmt.Errorf("persist/redis: finish %q: %w", op, err)
	}
	if found == 0 {
		return fmt.Errorf("persist/redis: finish %q: %w", op, persist.ErrNotFound)
	}
	return nil
}

// Pending returns the records in state Pending, oldest Created first (ties
// in operation name order). It reads the index in pages of 1000 entries, each
// read atomically; a record claimed or finished while Pending runs may or may
// not be listed. It returns an error if ctx is done, if Redis fails, or if a
// record is corrupt (ErrCorrupt).
func (s *Store) Pending(ctx context.Context) ([]persist.Record, error) {
	var out []persist.Record
	seen := make(map[string]bool)
	from, limit := "-inf", pageSize
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("persist/redis: pending: %w", err)
		}
		res, err := bounded(ctx, func(ctx context.Context) ([]any, error) {
			return pendingScript.Run(ctx, s.client,
				[]string{s.pending, s.all, s.exp}, from, limit, s.recPrefix,
			).Slice()
		})
		if err != nil {
			return nil, fmt.Errorf("persist/redis: pending: %w", err)
		}
		examined, last, recs, err := parsePendingPage(res)
		if err != nil {
			return nil, fmt.Errorf("persist/redis: pending: %w", err)
		}
		for _, r := range recs {
			op, _ := r.([]any)[0].(string)
			if seen[op] {
				continue
			}
			seen[op] = true
			rec, err := decodeFields(op, r.([]any)[1])
			if err != nil {
				return nil, fmt.Errorf("persist/redis: pending: %w", err)
			}
			if rec.State == persist.Pending {
				out = append(out, rec)
			}
		}
		switch {
		case examined < limit:
			slices.SortFunc(out, compareCreated)
			return out, nil
		case last == from:
			limit *= 2 // a whole page of one score: read more of it at once
		default:
			from, limit = last, pageSize
		}
	}
}

// parsePendingPage checks the shape of a pendingScript reply and returns its
// parts; every element of recs is a []any of an operation name (string) and
// its fields.
func parsePendingPage(res []any) (examined int, last string, recs []any, err error) {
	if len(res) != 3 {
		return 0, "", nil, fmt.Errorf("unexpected reply %v", res)
	}
	n, ok := res[0].(int64)
	recs, ok2 := res[2].([]any)
	if !ok || !ok2 {
		return 0, "", nil, fmt.Errorf("unexpected reply %v", res)
	}
	last, _ = res[1].(string) // false (nil or bool) when the page is empty
	for _, r := range recs {
		pair, ok := r.([]any)
		if !ok || len(pair) != 2 {
			return 0, "", nil, fmt.Errorf("unexpected reply entry %v", r)
		}
		if _, ok := pair[0].(string); !ok {
			return 0, "", nil, fmt.Errorf("unexpected reply entry %v", r)
		}
	}
	return int(n), last, recs, nil
}

// Delete removes op's record, if any. It returns an error if ctx is done when
// Delete starts or before Redis answers, or if Redis fails.
func (s *Store) Delete(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist/redis: delete: %w", err)
	}
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, deleteScript.Run(ctx, s.client,
			[]string{s.recPrefix + op, s.pending, s.all, s.exp}, op,
		).Err()
	})
	if err != nil {
		return fmt.Errorf("persist/redis: delete %q: %w", op, err)
	}
	return nil
}

// Expire deletes every record whose Created is before cutoff, in any state,
// and returns how many it deleted (records Redis had already expired are not
// counted). It deletes in pages of 1000, each atomically, and returns when
// ctx is done; on an error it returns the number deleted so far with the
// error (a page abandoned to ctx may still be deleted, uncounted).
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	// Created < cutoff <=> micros(Created) < cutoff in microseconds rounded up.
	cut := micros(cutoff)
	if cutoff.Nanosecond()%1000 != 0 {
		cut++
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("persist/redis: expire: %w", err)
		}
		res, err := bounded(ctx, func(ctx context.Context) ([]int64, error) {
			return expireScript.Run(ctx, s.client,
				[]string{s.pending, s.all, s.exp}, cut, pageSize, s.recPrefix,
			).Int64Slice()
		})
		if err != nil {
			return total, fmt.Errorf("persist/redis: expire: %w", err)
		}
		if len(res) != 2 {
			return total, fmt.Errorf("persist/redis: expire: unexpected reply %v", res)
		}
		total += int(res[0])
		if res[1] < pageSize {
			return total, nil
		}
	}
}

// bounded runs f, one round trip to Redis, with ctx and returns its result,
// or returns ctx.Err() as soon as ctx is done, whichever comes first: go-redis
// ignores a context's deadline on the socket unless the client was built with
// ContextTimeoutEnabled, and the caller's deadline must hold either way. When
// ctx ends first, f goes on in its goroutine until the client returns (its
// read timeout, or an answer), and its result is dropped. An error f returns
// after ctx is done is wrapped together with ctx.Err(), so that errors.Is
// sees the deadline whichever of the two noticed it first.
func bounded[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	if ctx.Done() == nil { // never done: nothing to bound
		return f(ctx)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // buffered: an abandoned f does not block
	go func() {
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(r.err, ctxErr) {
				r.err = fmt.Errorf("%w: %w", ctxErr, r.err)
			}
		}
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// checkCandidate reports why candidate cannot be claimed, or nil.
func checkCandidate(c persist.Record) error {
	switch {
	case c.Operation == "":
		return errors.New("persist/redis: claim: empty operation name")
	case c.Key == "":
		return fmt.Errorf("persist/redis: claim %q: empty key", c.Operation)
	case c.Attempts < 0:
		return fmt.Errorf("persist/redis: claim %q: negative attempts %d", c.Operation, c.Attempts)
	}
	if us := micros(c.Created); us <= -maxMicros || us >= maxMicros {
		return fmt.Errorf("persist/redis: claim %q: Created %v out of range", c.Operation, c.Created)
	}
	return nil
}

// compareCreated orders records oldest first, then by operation name.
func compareCreated(a, b persist.Record) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return strings.Compare(a.Operation, b.Operation)
}
