package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"
)

// DefaultMaxFailures is Inbox.MaxFailures's default: the failed runs
// after which a message is a dead letter.
const DefaultMaxFailures = 5

// MaxErrorLength bounds the error text a dead letter keeps, in bytes.
const MaxErrorLength = 1024

// ErrDeadLetter: the message failed Inbox.MaxFailures times and is a dead
// letter; fn was not run. Inbox.ReleaseDeadLetter lets it run again.
var ErrDeadLetter = errors.New("idempotency: the message is a dead letter: it failed too often")

// FailedRun is a failed run of Inbox.Do, as Failer.Fail records it.
type FailedRun struct {
	// Error is fn's error text, at most MaxErrorLength bytes.
	Error string
	// Max makes the scope a dead letter once its count of failed runs
	// reaches it; 0 never does.
	Max int
	// At is when the run failed; Expires is when the scope's failures
	// are forgotten (the records' clock).
	At, Expires time.Time
}

// Failer is a Claim that counts the failed runs of its scope, for the
// dead letters of Inbox.Do. The count is kept where the scope's record is,
// as durable. Every store of this module and its sub-modules makes
// Failers. With a store whose claims are not, Inbox.Do has no dead
// letters: a message whose fn always fails runs on every delivery (the
// Inbox logs no_dead_letters once).
type Failer interface {
	// Failures returns the failed runs recorded for the claim's scope,
	// and whether it is a dead letter; 0 and false if they expired by now.
	Failures(ctx context.Context, now time.Time) (count int, dead bool, err error)
	// Fail ends the claim as Release does (nothing is stored; an atomic
	// store rolls back), and records f: the count grows by one, f.Error is
	// kept as the last error, and the scope becomes a dead letter when
	// the count reaches f.Max.
	Fail(ctx context.Context, f FailedRun) error
}

// DeadLetter is a message that failed too often, as a DeadLetterStore
// lists it.
type DeadLetter struct {
	Key       string    // the message id
	Failures  int       // failed runs
	LastError string    // the last failed run's error, at most MaxErrorLength bytes
	Failed    time.Time // when the last run failed
	Expires   time.Time // when it is forgotten: a delivery after that runs fn
}

// DeadLetterStore is a Store that lists and releases the dead letters of
// Inbox.Do. Every store of this module and its sub-modules is one.
type DeadLetterStore interface {
	// DeadLetters returns up to limit dead letters of route, live at now.
	DeadLetters(ctx context.Context, route string, now time.Time, limit int) ([]DeadLetter, error)
	// ReleaseDeadLetter forgets the failed runs of s: its next delivery
	// runs, and may fail MaxFailures times again. It is not an error if s
	// has none.
	ReleaseDeadLetter(ctx context.Context, s Scope) error
}

// DeadLetters returns up to limit of the inbox's dead letters, oldest
// failure first (Redis: by expiry), for operators. It returns an error if the store is not a DeadLetterStore.
func (in *Inbox) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	ds, ok := in.Store.(DeadLetterStore)
	if !ok {
		return nil, fmt.Errorf("idempotency: Inbox.DeadLetters: %T keeps no dead letters", in.Store)
	}
	if limit <= 0 {
		return nil, nil
	}
	return ds.DeadLetters(ctx, in.scope("").Route, time.Now(), limit)
}

// ReleaseDeadLetter lets the dead letter key run again: its failed runs
// are forgotten, and its next delivery runs fn. It returns an error if
// the store is not a DeadLetterStore.
func (in *Inbox) ReleaseDeadLetter(ctx context.Context, key string) error {
	ds, ok := in.Store.(DeadLetterStore)
	if !ok {
		return fmt.Errorf("idempotency: Inbox.ReleaseDeadLetter: %T keeps no dead letters", in.Store)
	}
	s := in.scope(key)
	if err := ds.ReleaseDeadLetter(ctx, s); err != nil {
		return err
	}
	in.event(ctx, slog.LevelInfo, "dead_letter_released", s)
	return nil
}

// maxFailures resolves Inbox.MaxFailures: 0 is the default, a negative
// value means never.
func (in *Inbox) maxFailures() int {
	switch {
	case in.MaxFailures == 0:
		return DefaultMaxFailures
	case in.MaxFailures < 0:
		return 0
	}
	return in.MaxFailures
}

// deadLetter reports whether c's scope is a dead letter; if so it ends c.
// A store whose claims are not Failers has none, nor has one whose count
// cannot be read (the message runs: never lost for want of a count).
func (in *Inbox) deadLetter(ctx context.Context, s Scope, c Claim) bool {
	f, ok := c.(Failer)
	if !ok || in.maxFailures() == 0 {
		return false
	}
	n, dead, err := f.Failures(ctx, time.Now())
	if err != nil {
		in.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", "failures: "+err.Error()))
		return false
	}
	if !dead {
		return false
	}
	if err := c.Release(ctx); err != nil {
		in.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
	}
	in.event(ctx, slog.LevelInfo, "dead_letter", s, slog.Int("failures", n))
	return true
}

// fail ends c after a failed run of fn whose error text is msg: recorded
// by a Failer, else released.
func (in *Inbox) fail(ctx context.Context, s Scope, c Claim, msg string) {
	f, ok := c.(Failer)
	if !ok {
		if in.noFailer.CompareAndSwap(false, true) {
			in.event(ctx, slog.LevelWarn, "no_dead_letters", s, slog.String("store", fmt.Sprintf("%T", in.Store)),
				slog.String("detail", "the store's claims are not Failers: a message whose fn always fails runs on every delivery"))
		}
		if err := c.Release(ctx); err != nil {
			in.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", err.Error()))
		}
		return
	}
	now := time.Now()
	run := FailedRun{Error: truncateError(msg), Max: in.maxFailures(), At: now, Expires: now.Add(orDefault(in.TTL, DefaultTTL))}
	if err := f.Fail(ctx, run); err != nil {
		in.event(ctx, slog.LevelWarn, "store_error", s, slog.String("error", "fail: "+err.Error()))
		_ = c.Release(ctx) // ends the claim if Fail did not
	}
}

// truncateError cuts msg to MaxErrorLength bytes, at a rune boundary.
func truncateError(msg string) string {
	if len(msg) <= MaxErrorLength {
		return msg
	}
	cut := MaxErrorLength
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}
