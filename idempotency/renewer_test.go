package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// oldStore is a Store written against the Claim interface of e10c1d1: its
// claims have Context, Complete and Release, and no Renew.
type oldStore struct{ idempotency.Store }

type oldClaim struct{ c idempotency.Claim }

func (c oldClaim) Context(ctx context.Context) context.Context { return c.c.Context(ctx) }
func (c oldClaim) Complete(ctx context.Context, r *idempotency.Response, exp time.Time) error {
	return c.c.Complete(ctx, r, exp)
}
func (c oldClaim) Release(ctx context.Context) error { return c.c.Release(ctx) }

func (s oldStore) Begin(ctx context.Context, sc idempotency.Scope, fp idempotency.Fingerprint, now, lease time.Time) (idempotency.Begun, error) {
	b, err := s.Store.Begin(ctx, sc, fp, now, lease)
	if b.Claim != nil {
		b.Claim = oldClaim{b.Claim}
	}
	return b, err
}

// A store whose claims are not Renewers still works: its claims are not
// renewed, so a claim passes on at its lease even while its owner runs,
// and the middleware and the Inbox say so once, at first use.
func TestClaimWithoutRenewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		store := oldStore{idempotency.NewMemoryStore()}
		mw, err := idempotency.New(store, idempotency.Config{Lease: time.Minute, Logger: logger})
		require.NoError(t, err)
		var runs atomic.Int64
		h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			time.Sleep(2 * time.Minute) // ignores its context
			w.WriteHeader(http.StatusCreated)
		}))
		serve := func() int {
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", "slow")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code
		}
		first := make(chan int)
		go func() { first <- serve() }()
		time.Sleep(30 * time.Second)
		assert.Equal(t, http.StatusConflict, serve(), "within the lease")
		time.Sleep(31 * time.Second)
		second := make(chan int)
		go func() { second <- serve() }() // past the lease: the claim passed on
		assert.Equal(t, http.StatusInternalServerError, <-first, "its claim was taken over: its answer is not stored")
		assert.Equal(t, http.StatusCreated, <-second)
		assert.Equal(t, int64(2), runs.Load(), "not renewed: the claim passed on at the lease")
		assert.Equal(t, 1, strings.Count(buf.String(), "idempotency: no_renewal"), "logged once:\n%s", buf.String())
		assert.Contains(t, buf.String(), "idempotency_test.oldStore")

		buf.Reset()
		in := &idempotency.Inbox{Store: store, Logger: logger}
		for _, key := range []string{"a", "b"} {
			_, _, err := in.Do(context.Background(), key, nil, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
			require.NoError(t, err)
		}
		assert.Equal(t, 1, strings.Count(buf.String(), "idempotency: no_renewal"), "the Inbox logs once too:\n%s", buf.String())
	})
}

// A store whose claims are not Failers has no dead letters: a message
// whose fn always fails runs on every delivery, and the Inbox says so
// once.
func TestClaimWithoutFailer(t *testing.T) {
	var buf bytes.Buffer
	in := &idempotency.Inbox{Store: oldStore{idempotency.NewMemoryStore()}, Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	runs := 0
	for range 8 {
		_, _, err := in.Do(context.Background(), "evt", nil, func(context.Context) ([]byte, error) {
			runs++
			return nil, errors.New("boom")
		})
		require.EqualError(t, err, "boom")
	}
	assert.Equal(t, 8, runs)
	assert.Equal(t, 1, strings.Count(buf.String(), "idempotency: no_dead_letters"), "logged once:\n%s", buf.String())
	_, err := in.DeadLetters(context.Background(), 10)
	assert.ErrorContains(t, err, "keeps no dead letters")
}
