// Package bolt is a persist.Store in one file on local disk, on
// go.etcd.io/bbolt. It is the default choice when pending idempotency keys
// must survive a crash of a single process.
//
// Every write (Claim of a new operation, Finish, Delete, Expire) is durable,
// committed and fsync'd, before it returns. A write that finds no other in
// progress commits at once; writes that overlap are group-committed (bbolt's
// DB.Batch, see WithMaxBatchDelay): one transaction and one fsync for many
// claims, so throughput grows with concurrency.
//
// A method checks its context before it starts, then runs to its end: a
// write, once begun, is committed (or fails) before the method returns,
// whatever its context does meanwhile (bbolt's transactions take no
// context). Nothing of a call outlives its return; a caller that must not
// wait on a stalled disk past its deadline (the resilient Transport) leaves
// the call to finish in the background, and then a Claim may store its
// candidate after the caller has its error.
//
// One file is owned by one Store, in one process, at a time: Open takes an
// exclusive lock on the file and holds it until Close. A second Open of the
// same file, from this process or another, waits for the lock up to the lock
// timeout (WithLockTimeout, default 5 s) and then fails with ErrLocked. To
// share keys between processes, use persist/redis.
//
// The file holds three buckets: the records by operation name, and two
// indexes ordered by creation time (all records, for Expire; pending records,
// for Pending). Records use a small versioned binary encoding; data that does
// not decode is reported as an error wrapping ErrCorrupt.
package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/resilienthttp/resilient/persist"
)

// Bucket names and the schema version kept in the meta bucket.
var (
	bucketMeta    = []byte("meta")
	bucketRecords = []byte("records")
	bucketCreated = []byte("created")
	bucketPending = []byte("pending")
	keyVersion    = []byte("version")
	schemaVersion = []byte{1}
)

// maxOperationLen is the longest operation name: index keys (the name plus a
// 12-byte time prefix) must fit bbolt's key size limit.
const maxOperationLen = bbolt.MaxKeySize - indexPrefixLen

// expireChunk is the most records Expire deletes in one transaction.
const expireChunk = 1000

// ErrLocked is wrapped by the error Open returns when another Store holds the
// file's lock past the lock timeout.
var ErrLocked = errors.New("persist/bolt: file is locked by another Store")

// Store is a persist.Store kept in a bbolt file. Open returns one; Close
// releases the file. A Store is safe for concurrent use by multiple
// goroutines. Its methods return an error after Close.
//
// Created is stored with nanosecond precision and returned in UTC.
type Store struct {
	db      *bbolt.DB
	writers atomic.Int64 // write calls in progress, see write
	commits atomic.Int64 // write transactions committed (two fdatasyncs each)
	lastTx  atomic.Int64 // the id of the last one counted
}

var _ persist.Store = (*Store)(nil)

// Open opens the Store in the file at path, creating the file (mode 0600) if
// it does not exist. The directory must exist. It returns an error wrapping
// ErrLocked if another Store keeps the file locked past the lock timeout, and
// an error wrapping ErrCorrupt if the file was written by an incompatible
// version of this package.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{
		lockTimeout:   DefaultLockTimeout,
		maxBatchDelay: DefaultMaxBatchDelay,
		maxBatchSize:  DefaultMaxBatchSize,
	}
	for _, opt := range opts {
		opt(&o)
	}
	timeout := max(o.lockTimeout, 0)
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("persist/bolt: open %s: waited %v for the lock: %w", path, timeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("persist/bolt: open %s: %w", path, err)
	}
	db.MaxBatchDelay = o.maxBatchDelay
	db.MaxBatchSize = o.maxBatchSize
	if err := db.Update(initSchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("persist/bolt: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// initSchema creates the buckets of a new file and checks the schema version
// of an existing one.
func initSchema(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	switch v := meta.Get(keyVersion); {
	case v == nil:
		if err := meta.Put(keyVersion, schemaVersion); err != nil {
			return err
		}
	case string(v) != string(schemaVersion):
		return corrupt("schema version %v, want %v", v, schemaVersion)
	}
	for _, name := range [][]byte{bucketRecords, bucketCreated, bucketPending} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file and releases its lock. It waits for transactions in
// progress.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("persist/bolt: close: %w", err)
	}
	return nil
}

// Claim returns the record of candidate.Operation, storing candidate with
// State Pending if there is none; a new record is durable when Claim returns.
// A zero candidate.Created is set to the current time. An existing record is
// read without a write transaction.
//
// It returns an error if ctx is done when Claim starts, if candidate has an
// empty Operation or Key, an Operation longer than 32756 bytes or a negative
// Attempts, or if the file fails.
func (s *Store) Claim(ctx context.Context, candidate persist.Record) (persist.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/bolt: claim: %w", err)
	}
	if err := checkCandidate(candidate); err != nil {
		return persist.Record{}, false, err
	}
	op := []byte(candidate.Operation)

	var rec persist.Record
	found := false
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		rec, found, err = getRecord(tx, op)
		return err
	})
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/bolt: claim %q: %w", op, err)
	}
	if found {
		return rec, false, nil
	}

	if candidate.Created.IsZero() {
		candidate.Created = time.Now()
	}
	candidate.Created = candidate.Created.Round(0).UTC()
	candidate.State = persist.Pending
	value := encodeRecord(candidate)
	idx := indexKey(candidate.Created, candidate.Operation)
	claimed := false
	err = s.write(func(tx *bbolt.Tx) error {
		// Batch may run this function more than once (when another function
		// of the batch fails, the transaction is rolled back and run again):
		// it sets rec and claimed afresh on every run.
		var err error
		rec, found, err = getRecord(tx, op)
		if err != nil || found {
			claimed = false
			return err
		}
		if err := putAll(tx, op, value, idx, true); err != nil {
			return err
		}
		rec, claimed = candidate, true
		return nil
	})
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("persist/bolt: claim %q: %w", op, err)
	}
	return rec, claimed, nil
}

// Finish sets the state and attempt count of op's record; the change is
// durable when Finish returns. It returns an error wrapping
// persist.ErrNotFound if op has no record, and an error if ctx is done when
// Finish starts, state is neither Pending nor Done, attempts is negative, or
// the file fails.
func (s *Store) Finish(ctx context.Context, op string, state persist.State, attempts int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist/bolt: finish: %w", err)
	}
	if state != persist.Pending && state != persist.Done {
		return fmt.Errorf("persist/bolt: finish %q: invalid state %v", op, state)
	}
	if attempts < 0 {
		return fmt.Errorf("persist/bolt: finish %q: negative attempts %d", op, attempts)
	}
	key := []byte(op)
	var found bool
	err := s.write(func(tx *bbolt.Tx) error {
		// Idempotent: it recomputes found and rewrites the same values.
		rec, ok, err := getRecord(tx, key)
		found = ok
		if err != nil || !ok {
			return err
		}
		if rec.State != persist.Done { // Done is final
			rec.State = state
		}
		rec.Attempts = attempts
		return putAll(tx, key, encodeRecord(rec), indexKey(rec.Created, op), rec.State == persist.Pending)
	})
	if err != nil {
		return fmt.Errorf("persist/bolt: finish %q: %w", op, err)
	}
	if !found {
		return fmt.Errorf("persist/bolt: finish %q: %w", op, persist.ErrNotFound)
	}
	return nil
}

// Pending returns the records in state Pending, oldest Created first (ties
// in operation name order). It returns an error if ctx is done when Pending
// starts or if the file fails or holds corrupt data.
func (s *Store) Pending(ctx context.Context) ([]persist.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("persist/bolt: pending: %w", err)
	}
	var out []persist.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			op, err := indexOperation(k)
			if err != nil {
				return err
			}
			rec, found, err := getRecord(tx, op)
			if err != nil {
				return err
			}
			if !found {
				return corrupt("pending index names %q, which has no record", op)
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist/bolt: pending: %w", err)
	}
	return out, nil
}

// Delete removes op's record, if any; the removal is durable when Delete
// returns. A record that does not decode (ErrCorrupt) is removed too, with
// its index entries, so Delete is the way to clear damaged records. It
// returns an error if ctx is done when Delete starts or if the file fails.
func (s *Store) Delete(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("persist/bolt: delete: %w", err)
	}
	key := []byte(op)
	err := s.write(func(tx *bbolt.Tx) error {
		rec, found, err := getRecord(tx, key)
		switch {
		case errors.Is(err, ErrCorrupt):
			return deleteCorrupt(tx, key)
		case err != nil || !found:
			return err
		}
		return deleteAll(tx, key, indexKey(rec.Created, op))
	})
	if err != nil {
		return fmt.Errorf("persist/bolt: delete %q: %w", op, err)
	}
	return nil
}

// Expire deletes every record whose Created is before cutoff, in any state,
// and returns how many it deleted. It deletes in transactions of at most 1000
// records and checks ctx between them; on an error it returns the number
// deleted so far with the error.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	limit := make([]byte, indexPrefixLen)
	timePrefix(limit, cutoff)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("persist/bolt: expire: %w", err)
		}
		n, more := 0, false
		err := s.db.Update(func(tx *bbolt.Tx) error {
			n, more = 0, false
			var idxs [][]byte
			c := tx.Bucket(bucketCreated).Cursor()
			for k, _ := c.First(); k != nil && before(k, limit); k, _ = c.Next() {
				if len(idxs) == expireChunk {
					more = true
					break
				}
				idxs = append(idxs, append([]byte(nil), k...))
			}
			for _, idx := range idxs {
				op, err := indexOperation(idx)
				if err != nil {
					return err
				}
				if tx.Bucket(bucketRecords).Get(op) != nil {
					n++
				}
				if err := deleteAll(tx, op, idx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("persist/bolt: expire: %w", err)
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

// write runs fn in a write transaction and commits it. A write that finds no
// other in progress commits alone at once; one that arrives while others are
// in progress joins a group commit (DB.Batch), which waits up to the batch
// delay for more writes. So a lone writer pays one fsync and no delay, and
// concurrent writers share fsyncs. fn may run more than once (see DB.Batch)
// and must be idempotent.
func (s *Store) write(fn func(*bbolt.Tx) error) error {
	defer s.writers.Add(-1)
	counted := func(tx *bbolt.Tx) error {
		s.countCommit(tx)
		return fn(tx)
	}
	if s.writers.Add(1) == 1 {
		return s.db.Update(counted)
	}
	return s.db.Batch(counted)
}

// countCommit counts tx once when it commits, however many writes of a
// group commit run in it: the benchmarks report claims per commit.
func (s *Store) countCommit(tx *bbolt.Tx) {
	id := int64(tx.ID())
	tx.OnCommit(func() {
		for {
			last := s.lastTx.Load()
			if id <= last {
				return
			}
			if s.lastTx.CompareAndSwap(last, id) {
				s.commits.Add(1)
				return
			}
		}
	})
}

// getRecord returns op's record in tx, if any.
func getRecord(tx *bbolt.Tx, op []byte) (persist.Record, bool, error) {
	v := tx.Bucket(bucketRecords).Get(op)
	if v == nil {
		return persist.Record{}, false, nil
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return persist.Record{}, false, fmt.Errorf("record %q: %w", op, err)
	}
	if rec.Operation != string(op) {
		return persist.Record{}, false, corrupt("record stored under %q names operation %q", op, rec.Operation)
	}
	return rec, true, nil
}

// putAll stores a record and its index entries in tx; pending says whether
// it belongs in the pending index.
func putAll(tx *bbolt.Tx, op, value, idx []byte, pending bool) error {
	if err := tx.Bucket(bucketRecords).Put(op, value); err != nil {
		return err
	}
	if err := tx.Bucket(bucketCreated).Put(idx, []byte{}); err != nil {
		return err
	}
	if pending {
		return tx.Bucket(bucketPending).Put(idx, []byte{})
	}
	return tx.Bucket(bucketPending).Delete(idx)
}

// deleteAll removes a record and its index entries from tx; any of them may
// be missing.
func deleteAll(tx *bbolt.Tx, op, idx []byte) error {
	if err := tx.Bucket(bucketRecords).Delete(op); err != nil {
		return err
	}
	if err := tx.Bucket(bucketCreated).Delete(idx); err != nil {
		return err
	}
	return tx.Bucket(bucketPending).Delete(idx)
}

// deleteCorrupt removes op's record without decoding it, and every index
// entry that names op (a scan of both indexes).
func deleteCorrupt(tx *bbolt.Tx, op []byte) error {
	if err := tx.Bucket(bucketRecords).Delete(op); err != nil {
		return err
	}
	for _, name := range [][]byte{bucketCreated, bucketPending} {
		b := tx.Bucket(name)
		var idxs [][]byte
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) > indexPrefixLen && string(k[indexPrefixLen:]) == string(op) {
				idxs = append(idxs, append([]byte(nil), k...))
			}
		}
		for _, idx := range idxs {
			if err := b.Delete(idx); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCandidate reports why candidate cannot be claimed, or nil.
func checkCandidate(c persist.Record) error {
	switch {
	case c.Operation == "":
		return errors.New("persist/bolt: claim: empty operation name")
	case len(c.Operation) > maxOperationLen:
		return fmt.Errorf("persist/bolt: claim: operation name of %d bytes, limit %d", len(c.Operation), maxOperationLen)
	case c.Key == "":
		return fmt.Errorf("persist/bolt: claim %q: empty key", c.Operation)
	case c.Attempts < 0:
		return fmt.Errorf("persist/bolt: claim %q: negative attempts %d", c.Operation, c.Attempts)
	}
	return nil
}
