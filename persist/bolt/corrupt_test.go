package bolt

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/resilienthttp/resilient/persist"
)

// corruptFile returns the path of a closed Store file holding record "op",
// after edit changed it through bbolt directly.
func corruptFile(t *testing.T, edit func(tx *bbolt.Tx) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, _, err = s.Claim(t.Context(), persist.Record{Operation: "op", Key: "k", Created: time.Unix(1700000000, 0)})
	require.NoError(t, err)
	require.NoError(t, s.db.Update(edit))
	require.NoError(t, s.Close())
	return path
}

func TestCorruptRecord(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(tx *bbolt.Tx) error
		wantMsg string
	}{
		{"garbage value", func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketRecords).Put([]byte("op"), []byte("garbage"))
		}, "record version 103"},
		{"truncated value", func(tx *bbolt.Tx) error {
			v := tx.Bucket(bucketRecords).Get([]byte("op"))
			return tx.Bucket(bucketRecords).Put([]byte("op"), append([]byte(nil), v[:len(v)-1]...))
		}, "truncated"},
		{"record under another name", func(tx *bbolt.Tx) error {
			v := tx.Bucket(bucketRecords).Get([]byte("op"))
			rec, err := decodeRecord(v)
			require.NoError(t, err)
			rec.Operation = "other"
			return tx.Bucket(bucketRecords).Put([]byte("op"), encodeRecord(rec))
		}, `names operation "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(corruptFile(t, tt.edit))
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			ctx := t.Context()

			_, claimed, err := s.Claim(ctx, persist.Record{Operation: "op", Key: "k2"})
			require.ErrorIs(t, err, ErrCorrupt)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.ErrorContains(t, err, `persist/bolt: claim "op": `)
			assert.False(t, claimed)

			_, err = s.Pending(ctx)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, s.Finish(ctx, "op", persist.Done, 1), ErrCorrupt)

			// Other operations still work.
			_, claimed, err = s.Claim(ctx, persist.Record{Operation: "fine", Key: "k"})
			require.NoError(t, err)
			assert.True(t, claimed)
		})
	}
}

func TestCorruptRecordRepair(t *testing.T) {
	garbage := func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRecords).Put([]byte("op"), []byte("garbage"))
	}
	tests := []struct {
		name   string
		repair func(t *testing.T, s *Store)
	}{
		{"Delete", func(t *testing.T, s *Store) {
			require.NoError(t, s.Delete(t.Context(), "op"))
		}},
		{"Expire", func(t *testing.T, s *Store) {
			n, err := s.Expire(t.Context(), time.Unix(1700000001, 0))
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(corruptFile(t, garbage))
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()

			tt.repair(t, s)
			pending, err := s.Pending(t.Context())
			require.NoError(t, err)
			assert.Empty(t, pending)
			require.NoError(t, s.db.View(func(tx *bbolt.Tx) error {
				for _, b := range [][]byte{bucketRecords, bucketCreated, bucketPending} {
					k, _ := tx.Bucket(b).Cursor().First()
					assert.Nil(t, k, "bucket %s", b)
				}
				return nil
			}))
			rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: "op", Key: "fresh"})
			require.NoError(t, err)
			assert.True(t, claimed)
			assert.Equal(t, "fresh", rec.Key)
		})
	}
}

func TestCorruptIndex(t *testing.T) {
	path := corruptFile(t, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPending).Put(indexKey(time.Unix(1, 0), "ghost"), []byte{})
	})
	s, err := Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	_, err = s.Pending(t.Context())
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, `pending index names "ghost", which has no record`)
}

func TestSchemaVersionMismatch(t *testing.T) {
	path := corruptFile(t, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyVersion, []byte{9})
	})
	s, err := Open(path)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, "schema version")
	assert.Nil(t, s)
	// The failed Open released the file.
	s, err = Open(path, WithLockTimeout(100*time.Millisecond))
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Nil(t, s)
}

// TestBatchRerun makes a group commit fail in one of its functions (a claim
// of a corrupt record), so that bbolt rolls back and runs the others again:
// each must still be claimed exactly once, with its own key.
func TestBatchRerun(t *testing.T) {
	s, err := Open(corruptFile(t, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRecords).Put([]byte("op"), []byte("garbage"))
	}), WithMaxBatchDelay(20*time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	const n = 40
	type result struct {
		op      string
		rec     persist.Record
		claimed bool
		err     error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for i := range n {
		op := "new" + string(rune('A'+i%20))
		if i%10 == 0 {
			op = "op" // the corrupt one
		}
		key := op + "-" + string(rune('a'+i))
		go func() {
			<-start
			rec, claimed, err := s.Claim(t.Context(), persist.Record{Operation: op, Key: key})
			results <- result{op, rec, claimed, err}
		}()
	}
	close(start)
	winners := map[string]int{}
	keys := map[string]string{}
	for range n {
		r := <-results
		if r.op == "op" {
			require.ErrorIs(t, r.err, ErrCorrupt)
			continue
		}
		require.NoError(t, r.err)
		if k, ok := keys[r.op]; ok {
			assert.Equal(t, k, r.rec.Key, r.op)
		}
		keys[r.op] = r.rec.Key
		if r.claimed {
			winners[r.op]++
		}
	}
	for op := range keys {
		assert.Equal(t, 1, winners[op], op)
	}
	pending, err := s.Pending(t.Context())
	require.ErrorIs(t, err, ErrCorrupt) // "op" is still in the pending index
	assert.Nil(t, pending)
	require.NoError(t, s.Delete(t.Context(), "op"))
	pending, err = s.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, len(keys))
	for _, rec := range pending {
		assert.Equal(t, keys[rec.Operation], rec.Key)
	}
}
