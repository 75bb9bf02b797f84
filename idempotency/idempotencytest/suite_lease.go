package idempotencytest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// slowLease is the lease of the rules with slow handlers: long enough for
// a busy machine to renew a claim thrice in it, short enough to wait past.
const slowLease = 1500 * time.Millisecond

// renewSpy is a Store that counts the successful renewals of its claims.
type renewSpy struct {
	idempotency.Store
	renewed chan struct{} // one value per successful renewal
}

func newRenewSpy(s idempotency.Store) *renewSpy {
	return &renewSpy{Store: s, renewed: make(chan struct{}, 1024)}
}

func (s *renewSpy) Begin(ctx context.Context, sc idempotency.Scope, fp idempotency.Fingerprint, now, lease time.Time) (idempotency.Begun, error) {
	b, err := s.Store.Begin(ctx, sc, fp, now, lease)
	if r, ok := b.Claim.(idempotency.Renewer); ok { // a claim that is not one is never renewed: waitPastLease fails
		b.Claim = spyClaim{Claim: b.Claim, r: r, renewed: s.renewed}
	}
	return b, err
}

// waitPastLease waits for four renewals of one claim: renewals come at
// least a third of a lease apart, so more than a lease has passed since
// the claim was taken, on any machine.
func (s *renewSpy) waitPastLease(t *testing.T) {
	t.Helper()
	for i := range 4 {
		select {
		case <-s.renewed:
		case <-time.After(time.Minute):
			t.Fatalf("renewal %d did not come (the store's claims must be idempotency.Renewers)", i+1)
		}
	}
}

type spyClaim struct {
	idempotency.Claim
	r       idempotency.Renewer
	renewed chan struct{}
}

func (c spyClaim) Renew(ctx context.Context, lease time.Time) error {
	err := c.r.Renew(ctx, lease)
	if err == nil {
		c.renewed <- struct{}{}
	}
	return err
}

// slowHandler answers 201 once release is closed, ignoring its context,
// after one effect named by X-Effect, written in its context's
// transaction (an atomic store's). A request with X-Dup does not wait.
func slowHandler(env Env, started chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.Header.Get("X-Dup") == "" {
			started <- struct{}{}
			<-release // its context ended long ago: the handler ignores it
		}
		if err := env.Apply(context.WithoutCancel(r.Context()), r.Header.Get("X-Effect")); err != nil {
			http.Error(w, "apply: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "done")
	})
}

// leaseServer serves h behind a middleware of cfg over store.
func leaseServer(t *testing.T, store idempotency.Store, cfg idempotency.Config, h http.Handler) *server {
	t.Helper()
	mw, err := idempotency.New(store, cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Handler(h))
	s := &server{Server: httptest.NewServer(mux), mw: mw}
	t.Cleanup(s.Close)
	return s
}

// slowHandlerKeepsClaim: a handler that ignores its context and runs for
// longer than the lease keeps its claim: a duplicate gets 409, never a
// second run, and the first answer is stored.
func slowHandlerKeepsClaim(t *testing.T, env Env) {
	spy := newRenewSpy(env.Store)
	started, release := make(chan struct{}, 4), make(chan struct{})
	s := leaseServer(t, spy, idempotency.Config{Lease: slowLease}, slowHandler(env, started, release))
	first := make(chan answer, 1)
	go func() {
		a, err := s.send(t, context.Background(), http.MethodPost, "/v1/payments", "slow", payment, "X-Effect", "slow")
		if err != nil {
			t.Error(err)
		}
		first <- a
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("the run did not start")
	}
	spy.waitPastLease(t)
	dup := s.post(t, "/v1/payments", "slow", payment, "X-Effect", "slow", "X-Dup", "1")
	close(release)
	assertProblem(t, dup, http.StatusConflict, "in-progress")
	a := <-first
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	assert.Equal(t, idempotency.StatusStored, a.header.Get("Idempotency-Status"), "the slow run kept its claim (and its transaction)")
	again := s.post(t, "/v1/payments", "slow", payment, "X-Effect", "slow", "X-Dup", "1")
	assert.Equal(t, idempotency.StatusReplayed, again.header.Get("Idempotency-Status"))
	assert.Equal(t, 1, env.Count("slow"), "one run")
	assert.Equal(t, int64(0), s.mw.Stats().StoreError)
}

// answerAtLeaseEnd: a handler acts, then answers 504 as its context ends
// at the lease. Its answer is settled with a context of its own: stored by
// a store that is not atomic (a retry gets it, never a second run), rolled
// back with the effect by one that is; never a store error.
func answerAtLeaseEnd(t *testing.T, env Env) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := env.Apply(r.Context(), "edge"); err != nil {
			http.Error(w, "apply: "+err.Error(), http.StatusInternalServerError)
			return
		}
		<-r.Context().Done()
		http.Error(w, "timed out", http.StatusGatewayTimeout)
	})
	s := leaseServer(t, env.Store, idempotency.Config{Lease: 300 * time.Millisecond}, h)
	a := s.post(t, "/v1/payments", "edge", payment)
	require.Equal(t, http.StatusGatewayTimeout, a.status, "%s", a)
	assert.Equal(t, int64(0), s.mw.Stats().StoreError, "the answer was settled")
	if env.Store.Atomic() {
		assert.Empty(t, a.header.Values("Idempotency-Status"), "rolled back")
		assert.Equal(t, 0, env.Count("edge"), "with its effect")
		return
	}
	assert.Equal(t, idempotency.StatusStored, a.header.Get("Idempotency-Status"))
	retry := s.post(t, "/v1/payments", "edge", payment)
	assert.Equal(t, http.StatusGatewayTimeout, retry.status)
	assert.Equal(t, idempotency.StatusReplayed, retry.header.Get("Idempotency-Status"), "the retry gets the answer")
	assert.Equal(t, 1, env.Count("edge"), "never a second run")
}

// inboxSlowFnKeepsClaim: Inbox.Do's fn ignores its context and runs for
// longer than the lease: a duplicate delivery gets ErrInProgress.
func inboxSlowFnKeepsClaim(t *testing.T, env Env) {
	spy := newRenewSpy(env.Store)
	in := &idempotency.Inbox{Store: spy, Lease: slowLease}
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	first := make(chan error, 1)
	go func() {
		_, _, err := in.Do(context.Background(), "evt_slow", []byte("p"), func(ctx context.Context) ([]byte, error) {
			runs.Add(1)
			close(started)
			<-release
			return []byte("ok"), env.Apply(context.WithoutCancel(ctx), "evt_slow")
		})
		first <- err
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the run did not start")
	}
	spy.waitPastLease(t)
	_, _, err := in.Do(context.Background(), "evt_slow", []byte("p"), func(ctx context.Context) ([]byte, error) {
		runs.Add(1)
		return []byte("again"), env.Apply(ctx, "evt_slow")
	})
	close(release)
	assert.True(t, errors.Is(err, idempotency.ErrInProgress), "%v", err)
	require.NoError(t, <-first)
	res, replayed, err := in.Do(context.Background(), "evt_slow", []byte("p"), nil)
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "ok", string(res))
	assert.Equal(t, int64(1), runs.Load())
	assert.Equal(t, 1, env.Count("evt_slow"))
}
