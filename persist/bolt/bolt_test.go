package bolt_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/bolt"
	"github.com/resilienthttp/resilient/persist/persisttest"
)

// openTemp opens a Store in a new file under t's temporary directory and
// closes it when t ends.
func openTemp(t testing.TB, opts ...bolt.Option) (*bolt.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := bolt.Open(path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s, path
}

func TestConformance(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestConformanceWithoutBatching(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		s, _ := openTemp(t, bolt.WithMaxBatchDelay(0))
		return s
	})
}

func TestConformanceSmallBatches(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		s, _ := openTemp(t, bolt.WithMaxBatchSize(3), bolt.WithMaxBatchDelay(5*time.Millisecond))
		return s
	})
}

func TestReopenKeepsRecords(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ops.db")
	created := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

	s, err := bolt.Open(path)
	require.NoError(t, err)
	for i, op := range []string{"a", "b", "c"} {
		_, claimed, err := s.Claim(ctx, persist.Record{
			Operation: op, Key: "key-" + op, Fingerprint: "fp-" + op,
			Created: created.Add(time.Duration(i) * time.Second),
		})
		require.NoError(t, err)
		require.True(t, claimed)
	}
	require.NoError(t, s.Finish(ctx, "b", persist.Done, 2))
	require.NoError(t, s.Close())

	s, err = bolt.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, persist.Record{
		Operation: "a", Key: "key-a", Fingerprint: "fp-a", Created: created, State: persist.Pending,
	}, pending[0])
	assert.Equal(t, "c", pending[1].Operation)

	rec, claimed, err := s.Claim(ctx, persist.Record{Operation: "b", Key: "new"})
	require.NoError(t, err)
	assert.False(t, claimed)
	assert.Equal(t, persist.Record{
		Operation: "b", Key: "key-b", Fingerprint: "fp-b", Created: created.Add(time.Second),
		State: persist.Done, Attempts: 2,
	}, rec)
}

// TestOpenLockedFile: a second Open of a locked file gives up after its lock
// timeout with ErrLocked; bbolt itself would wait for the lock forever. The
// 30 s bound only turns such a hang into a failure: a busy machine cannot
// break it.
func TestOpenLockedFile(t *testing.T) {
	_, path := openTemp(t)
	opened := make(chan error, 1)
	go func() {
		s, err := bolt.Open(path, bolt.WithLockTimeout(100*time.Millisecond))
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		require.ErrorIs(t, err, bolt.ErrLocked)
		assert.Contains(t, err.Error(), path)
	case <-time.After(30 * time.Second):
		t.Fatal("Open of a locked file did not give up after its lock timeout")
	}
}

func TestOpenLockedFileOtherProcess(t *testing.T) {
	_, path := openTemp(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PERSIST_BOLT_TEST_OPEN="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "error: persist/bolt: open "+path)
	assert.Contains(t, string(out), "file is locked by another Store")
}

func TestOpenAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := bolt.Open(path, bolt.WithLockTimeout(100*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = bolt.Open(path, bolt.WithLockTimeout(100*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	require.NoError(t, os.WriteFile(garbage, make([]byte, 64<<10), 0o600))
	tests := []struct {
		name string
		path string
	}{
		{"not a bolt file", garbage},
		{"missing directory", filepath.Join(dir, "missing", "ops.db")},
		{"directory", dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := bolt.Open(tt.path, bolt.WithLockTimeout(100*time.Millisecond))
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), "persist/bolt: open "+tt.path)
		})
	}
}

func TestClosedStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := bolt.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ctx := t.Context()
	_, _, err = s.Claim(ctx, persist.Record{Operation: "op", Key: "k"})
	assert.ErrorContains(t, err, "persist/bolt: claim")
	assert.Error(t, s.Finish(ctx, "op", persist.Done, 1))
	_, err = s.Pending(ctx)
	assert.Error(t, err)
	assert.Error(t, s.Delete(ctx, "op"))
	_, err = s.Expire(ctx, time.Now())
	assert.Error(t, err)
}

func TestClaimLongOperation(t *testing.T) {
	s, _ := openTemp(t)
	long := string(make([]byte, 40000))
	_, claimed, err := s.Claim(t.Context(), persist.Record{Operation: long, Key: "k"})
	require.ErrorContains(t, err, "limit")
	assert.False(t, claimed)
}

func TestExpireManyChunks(t *testing.T) {
	s, _ := openTemp(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 2500
	recs := make([]persist.Record, n)
	for i := range recs {
		recs[i] = persist.Record{Operation: fmt.Sprintf("op%05d", i), Key: "k", Created: base.Add(time.Duration(i) * time.Millisecond)}
	}
	claimAll(t, s, recs)
	deleted, err := s.Expire(t.Context(), base.Add(2100*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, 2100, deleted)
	pending, err := s.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, n-2100)
	assert.Equal(t, "op02100", pending[0].Operation)
}

// claimAll claims recs concurrently (so that they share commits).
func claimAll(t *testing.T, s *bolt.Store, recs []persist.Record) {
	t.Helper()
	errs := make(chan error, len(recs))
	for _, r := range recs {
		go func() {
			_, _, err := s.Claim(context.Background(), r)
			errs <- err
		}()
	}
	for range recs {
		require.NoError(t, <-errs)
	}
}

// BenchmarkClaim reports, beside claims/s, the group commit's effect:
// claims per commit and fsyncs/s (bbolt fdatasyncs twice per commit: the
// pages, then the meta page).
func BenchmarkClaim(b *testing.B) {
	persisttest.Benchmark(b, func(b *testing.B) persist.Store {
		s, _ := openTemp(b)
		start := time.Now()
		b.Cleanup(func() {
			commits := bolt.Commits(s)
			if commits == 0 {
				return
			}
			b.ReportMetric(float64(b.N)/float64(commits), "claims/commit")
			b.ReportMetric(float64(2*commits)/time.Since(start).Seconds(), "fsyncs/s")
		})
		return s
	})
}

// TestCommitsCounted: a commit is counted once, however many claims a
// group commit holds.
func TestCommitsCounted(t *testing.T) {
	s, _ := openTemp(t)
	_, _, err := s.Claim(t.Context(), persist.Record{Operation: "one", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), bolt.Commits(s))
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, _, err := s.Claim(context.Background(), persist.Record{Operation: fmt.Sprintf("op%d", i), Key: "k"})
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	c := bolt.Commits(s)
	assert.Greater(t, c, int64(1))
	assert.LessOrEqual(t, c, int64(1+n))
}
