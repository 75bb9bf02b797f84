package idempotencytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// Run runs every rule of the suite as a subtest of t, each on a new Env
// from f.
func Run(t *testing.T, f Factory) {
	defer runScope(t, f) // suite_scope.go
	// suite_deadletter.go
	defer runDeadLetters(t, f)
	rules := []struct {
		name string
		run  func(*testing.T, Env)
	}{
		{"StoredThenReplayed", storedThenReplayed},
		{"KeyForms", keyForms},
		{"MalformedKey", malformedKey},
		{"MissingKey", missingKey},
		{"Mismatch", mismatch},
		{"NonJSONBodies", nonJSONBodies},
		{"OneExecutionOf64", oneExecutionOf64},
		{"RoutesAreScopes", routesAreScopes},
		{"Expiry", expiry},
		{"OversizedAnswer", oversizedAnswer},
		{"OversizedRequest", oversizedRequest},
		{"Panic", panicking},
		{"ServerError", serverError},
		{"NothingDoneIsNotStored", nothingDoneNotStored},
		{"ClientDisconnects", clientDisconnects},
		{"RepeatedHeaders", repeatedHeaders},
		{"Streaming", streaming},
		{"SafeMethodsPassThrough", safeMethods},
		{"InboxOnce", inboxOnce},
		{"InboxConcurrent", inboxConcurrent},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) { r.run(t, f(t)) })
	}
	runMore(t, f)
}

const payment = `{"amount": 1000, "currency": "eur"}`

// assertProblem checks an answer of the middleware's own: an RFC 9457
// problem of the given status and type slug, without Idempotency-Status.
func assertProblem(t *testing.T, a answer, status int, slug string) {
	t.Helper()
	require.Equal(t, status, a.status, "%s", a)
	assert.Equal(t, "application/problem+json", a.header.Get("Content-Type"))
	assert.Empty(t, a.header.Values("Idempotency-Status"), "an unstored answer never carries Idempotency-Status")
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	require.NoError(t, json.Unmarshal(a.body, &p), "%s", a.body)
	assert.Equal(t, idempotency.ProblemTypeBase+slug, p.Type)
	assert.Equal(t, status, p.Status)
	assert.NotEmpty(t, p.Title)
}

func storedThenReplayed(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	first := s.post(t, "/v1/payments", "k1", payment)
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	assert.Equal(t, idempotency.StatusStored, first.header.Get("Idempotency-Status"))
	assert.NotEmpty(t, first.header.Get("X-Request-Id"), "the first answer keeps every header the handler set")
	for range 3 {
		again := s.post(t, "/v1/payments", "k1", payment)
		require.Equal(t, first.status, again.status)
		assert.Equal(t, first.body, again.body, "replayed byte for byte")
		assert.Equal(t, idempotency.StatusReplayed, again.header.Get("Idempotency-Status"))
		for _, h := range []string{"Content-Type", "Location", "Link", "Content-Length"} {
			assert.Equal(t, first.header.Values(h), again.header.Values(h), h)
		}
		assert.Empty(t, again.header.Get("X-Request-Id"), "headers outside the allow-list are not stored")
	}
	assert.Equal(t, 1, env.Count("k1"))
	st := s.mw.Stats()
	assert.Equal(t, int64(1), st.Stored)
	assert.Equal(t, int64(3), st.Replayed)
}

func keyForms(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	tests := []struct{ first, again, effect string }{
		{"bare", `"bare"`, "bare"},
		{`"sf-first"`, "sf-first", "sf-first"},
		{`"with \"quote\" and \\"`, `"with \"quote\" and \\"`, "q"},
		{strings.Repeat("k", idempotency.MaxKeyLength), strings.Repeat("k", idempotency.MaxKeyLength), "long"},
		{"  spaced\t", "spaced", "spaced"},
	}
	for _, tt := range tests {
		a := s.post(t, "/v1/payments", tt.first, payment, "X-Effect", tt.effect)
		require.Equal(t, http.StatusCreated, a.status, "%q: %s", tt.first, a)
		assert.Equal(t, idempotency.StatusStored, a.header.Get("Idempotency-Status"))
		b := s.post(t, "/v1/payments", tt.again, payment, "X-Effect", tt.effect)
		assert.Equal(t, idempotency.StatusReplayed, b.header.Get("Idempotency-Status"), "%q then %q are one key", tt.first, tt.again)
		assert.Equal(t, a.body, b.body)
		assert.Equal(t, 1, env.Count(tt.effect), tt.first)
	}
}

func malformedKey(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	tests := []struct {
		name   string
		header []string
	}{
		{"too long", []string{"Idempotency-Key", strings.Repeat("k", idempotency.MaxKeyLength+1)}},
		{"too long quoted", []string{"Idempotency-Key", `"` + strings.Repeat("k", idempotency.MaxKeyLength+1) + `"`}},
		{"empty", []string{"Idempotency-Key", ""}},
		{"empty quoted", []string{"Idempotency-Key", `""`}},
		{"non-ASCII", []string{"Idempotency-Key", "clé"}},
		{"unterminated", []string{"Idempotency-Key", `"abc`}},
		{"data after", []string{"Idempotency-Key", `"abc";x`}},
		{"bad escape", []string{"Idempotency-Key", `"a\b"`}},
		{"repeated", []string{"Idempotency-Key", "one", "Idempotency-Key", "two"}},
		{"repeated same", []string{"Idempotency-Key", "one", "Idempotency-Key", "one"}},
	}
	for _, tt := range tests {
		a := s.post(t, "/v1/payments", "", payment, append([]string{"X-Effect", "bad"}, tt.header...)...)
		assertProblem(t, a, http.StatusBadRequest, "invalid-key")
	}
	assert.Equal(t, 0, env.Count("bad"), "nothing runs on a malformed key")
}

func missingKey(t *testing.T, env Env) {
	required := newServer(t, env, idempotency.Config{RequireKey: true})
	a := required.post(t, "/v1/payments", "", payment, "X-Effect", "nokey-required")
	assertProblem(t, a, http.StatusBadRequest, "missing-key")
	assert.Equal(t, 0, env.Count("nokey-required"))

	optional := newServer(t, env, idempotency.Config{})
	for range 2 {
		a := optional.post(t, "/v1/payments", "", payment, "X-Effect", "nokey-optional")
		assert.Equal(t, http.StatusCreated, a.status)
		assert.Empty(t, a.header.Values("Idempotency-Status"), "a request without a key is neither stored nor marked")
	}
	assert.Equal(t, 2, env.Count("nokey-optional"), "without a key every request runs, as without the middleware")
}

func mismatch(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	first := s.post(t, "/v1/payments", "m1", `{"amount": 1000, "currency": "eur"}`)
	require.Equal(t, http.StatusCreated, first.status)
	same := s.post(t, "/v1/payments", "m1", "{\"currency\":\"eur\",\n \"amount\": 1000.0}")
	assert.Equal(t, idempotency.StatusReplayed, same.header.Get("Idempotency-Status"), "the same JSON, reordered and reformatted, is the same payload")
	other := s.post(t, "/v1/payments", "m1", `{"amount": 1001, "currency": "eur"}`)
	assertProblem(t, other, http.StatusUnprocessableEntity, "payload-mismatch")
	assert.Equal(t, 1, env.Count("m1"))

	// One route template, two paths: the path is part of the payload.
	c1 := s.post(t, "/v1/payments/p1/capture", "m2", `{}`)
	require.Equal(t, http.StatusCreated, c1.status)
	c2 := s.post(t, "/v1/payments/p2/capture", "m2", `{}`)
	assertProblem(t, c2, http.StatusUnprocessableEntity, "payload-mismatch")
	assert.Equal(t, int64(2), s.mw.Stats().Mismatch)
}

func nonJSONBodies(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	tests := []struct {
		name, contentType, body, other string
	}{
		{"text", "text/plain", "pay 10 EUR", "pay 10 EUR "},
		{"form", "application/x-www-form-urlencoded", "amount=10&currency=eur", "currency=eur&amount=10"},
		{"binary", "application/octet-stream", "\x00\x01\xff\xfe", "\x00\x01\xff\xff"},
		{"broken JSON", "application/json", `{"amount": 10`, `{"amount": 10 `},
		{"empty", "application/json", "", " "},
	}
	for _, tt := range tests {
		key := "body-" + strings.ReplaceAll(tt.name, " ", "-")
		a := s.post(t, "/v1/payments", key, tt.body, "Content-Type", tt.contentType)
		require.Equal(t, http.StatusCreated, a.status, "%s: %s", tt.name, a)
		b := s.post(t, "/v1/payments", key, tt.body, "Content-Type", tt.contentType)
		assert.Equal(t, idempotency.StatusReplayed, b.header.Get("Idempotency-Status"), tt.name)
		c := s.post(t, "/v1/payments", key, tt.other, "Content-Type", tt.contentType)
		assertProblem(t, c, http.StatusUnprocessableEntity, "payload-mismatch")
		assert.Equal(t, 1, env.Count(key), tt.name)
	}
}

// oneExecutionOf64: 64 goroutines send one key while its first run is
// held: one runs, the others get 409 with Retry-After; after the run, the
// replay.
func oneExecutionOf64(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	const n = 64
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			a, err := s.send(t, context.Background(), http.MethodPost, "/v1/payments", "k64", payment, "X-Behave", "block")
			if err != nil {
				t.Error(err)
				a = answer{}
			}
			answers <- a
		})
	}
	got := map[int]int{}
	timeout := time.After(2 * time.Minute)
	for range n - 1 { // all but the one that runs answer while it is held
		select {
		case a := <-answers:
			got[a.status]++
			if a.status == http.StatusConflict {
				assertProblem(t, a, http.StatusConflict, "in-progress")
				assert.NotEmpty(t, a.header.Get("Retry-After"))
			}
		case <-timeout:
			t.Fatalf("duplicates did not answer while the first ran: %v", got)
		}
	}
	select {
	case name := <-s.app.started:
		assert.Equal(t, "k64", name)
	case <-timeout:
		t.Fatal("no run started")
	}
	close(s.app.release)
	wg.Wait()
	last := <-answers
	got[last.status]++
	assert.Equal(t, map[int]int{http.StatusConflict: n - 1, http.StatusCreated: 1}, got)
	assert.Equal(t, idempotency.StatusStored, last.header.Get("Idempotency-Status"))
	assert.Equal(t, 1, env.Count("k64"), "one execution")
	again := s.post(t, "/v1/payments", "k64", payment, "X-Behave", "block")
	assert.Equal(t, idempotency.StatusReplayed, again.header.Get("Idempotency-Status"))
	assert.Equal(t, last.body, again.body)
	assert.Equal(t, int64(n-1), s.mw.Stats().InProgress)
}

func routesAreScopes(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	p := s.post(t, "/v1/payments", "route", payment, "X-Effect", "payment")
	r := s.post(t, "/v1/refunds", "route", payment, "X-Effect", "refund")
	assert.Equal(t, idempotency.StatusStored, p.header.Get("Idempotency-Status"))
	assert.Equal(t, idempotency.StatusStored, r.header.Get("Idempotency-Status"), "another route is another scope")
	assert.Equal(t, 1, env.Count("payment"))
	assert.Equal(t, 1, env.Count("refund"))
}

func expiry(t *testing.T, env Env) {
	live := newServer(t, env, idempotency.Config{})
	live.post(t, "/v1/payments", "live", payment)
	n, err := env.Store.Sweep(context.Background(), time.Now())
	require.NoError(t, err)
	assert.Equal(t, 0, n, "a live record is kept")
	again := live.post(t, "/v1/payments", "live", payment)
	assert.Equal(t, idempotency.StatusReplayed, again.header.Get("Idempotency-Status"))

	// A TTL of a microsecond: the record has expired when the next request
	// arrives, however busy the machine (a later arrival only helps).
	s := newServer(t, env, idempotency.Config{TTL: time.Microsecond})
	first := s.post(t, "/v1/payments", "exp", payment)
	assert.Equal(t, idempotency.StatusStored, first.header.Get("Idempotency-Status"))
	second := s.post(t, "/v1/payments", "exp", `{"another": "payload"}`)
	assert.Equal(t, idempotency.StatusStored, second.header.Get("Idempotency-Status"), "an expired key is a new key: %s", second)
	assert.Equal(t, 2, env.Count("exp"))
	assert.Equal(t, int64(1), s.mw.Stats().Expired)

	n, err = env.Store.Sweep(context.Background(), time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "Sweep deletes the expired record, and only it")
	third := s.post(t, "/v1/payments", "exp", payment)
	assert.Equal(t, idempotency.StatusStored, third.header.Get("Idempotency-Status"))
	assert.Equal(t, int64(1), s.mw.Stats().Expired, "a swept record is not met again")
	again = live.post(t, "/v1/payments", "live", payment)
	assert.Equal(t, idempotency.StatusReplayed, again.header.Get("Idempotency-Status"))
}

// failureRule checks a handler failure: an atomic store answers it
// unstored and undoes its effect, so a retry runs again; another store
// stores it, so a retry gets it again and nothing runs twice.
func failureRule(t *testing.T, env Env, s *server, key string, header []string, status int, slug string) {
	t.Helper()
	a := s.post(t, "/v1/payments", key, payment, header...)
	require.Equal(t, status, a.status, "%s", a)
	if slug != "" {
		assert.Equal(t, "application/problem+json", a.header.Get("Content-Type"))
		assert.Contains(t, string(a.body), idempotency.ProblemTypeBase+slug)
	}
	if env.Store.Atomic() {
		assert.Empty(t, a.header.Values("Idempotency-Status"), "an atomic store rolls the failure back")
		assert.Equal(t, 0, env.Count(key), "its effect was rolled back")
		retry := s.post(t, "/v1/payments", key, payment)
		assert.Equal(t, http.StatusCreated, retry.status, "the retry runs again")
		assert.Equal(t, idempotency.StatusStored, retry.header.Get("Idempotency-Status"))
		assert.Equal(t, 1, env.Count(key))
		return
	}
	assert.Equal(t, idempotency.StatusStored, a.header.Get("Idempotency-Status"), "the handler may have acted: stored")
	retry := s.post(t, "/v1/payments", key, payment)
	assert.Equal(t, a.status, retry.status)
	assert.Equal(t, a.body, retry.body)
	assert.Equal(t, idempotency.StatusReplayed, retry.header.Get("Idempotency-Status"))
	assert.Equal(t, 1, env.Count(key), "never a second effect")
}

func oversizedAnswer(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{MaxAnswer: 1024})
	failureRule(t, env, s, "big", []string{"X-Behave", "big"}, http.StatusInternalServerError, "failed")
}

func oversizedRequest(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{MaxBody: 16})
	a := s.post(t, "/v1/payments", "bigreq", `{"amount": 1000, "currency": "eur"}`)
	assertProblem(t, a, http.StatusRequestEntityTooLarge, "too-large")
	assert.Equal(t, 0, env.Count("bigreq"))
}

func panicking(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	failureRule(t, env, s, "panic", []string{"X-Behave", "panic"}, http.StatusInternalServerError, "failed")
}

func serverError(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	failureRule(t, env, s, "fail500", []string{"X-Behave", "500"}, http.StatusInternalServerError, "")
}

func nothingDoneNotStored(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	a := s.post(t, "/v1/payments", "later", payment, "X-Behave", "429")
	assert.Equal(t, http.StatusTooManyRequests, a.status)
	assert.Empty(t, a.header.Values("Idempotency-Status"), "a 429 is not stored, and the handler's own header is removed")
	shed := s.post(t, "/v1/payments", "later", payment, "X-Behave", "503")
	assert.Equal(t, http.StatusServiceUnavailable, shed.status)
	assert.Empty(t, shed.header.Values("Idempotency-Status"), "a 503 (a budget's refusal) is not stored")
	b := s.post(t, "/v1/payments", "later", payment)
	assert.Equal(t, idempotency.StatusStored, b.header.Get("Idempotency-Status"), "the retry runs")
	assert.Equal(t, 1, env.Count("later"))
	assert.Equal(t, int64(2), s.mw.Stats().Released)
}

// clientDisconnects: the client goes away while its request runs; the run
// completes and is stored, and the client's retry gets it.
func clientDisconnects(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.send(t, ctx, http.MethodPost, "/v1/payments", "gone", payment, "X-Behave", "block")
		done <- err
	}()
	select {
	case <-s.app.started:
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not start")
	}
	cancel()
	require.Error(t, <-done, "the client gave up")
	close(s.app.release)
	var a answer
	for i := 0; ; i++ { // bounded: the run was released and completes
		a = s.post(t, "/v1/payments", "gone", payment)
		if a.status != http.StatusConflict || i == 200 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, http.StatusCreated, a.status, "%s", a)
	assert.Equal(t, idempotency.StatusReplayed, a.header.Get("Idempotency-Status"), "the run finished without its client and was stored")
	assert.Equal(t, 1, env.Count("gone"))
}

func repeatedHeaders(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	first := s.post(t, "/v1/payments", "links", payment)
	again := s.post(t, "/v1/payments", "links", payment)
	want := []string{`</v1/payments>; rel="collection"`, `</v1/docs>; rel="help"`}
	assert.Equal(t, want, first.header.Values("Link"))
	assert.Equal(t, want, again.header.Values("Link"), "a repeated header is replayed whole, in order")
	// A request header repeated: the key is refused (MalformedKey); others pass.
	b := s.post(t, "/v1/payments", "links", payment, "X-Custom", "a", "X-Custom", "b")
	assert.Equal(t, idempotency.StatusReplayed, b.header.Get("Idempotency-Status"))
}

func streaming(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	a := s.post(t, "/v1/payments", "stream", payment, "X-Behave", "stream")
	assert.Equal(t, "flush: true; flusher false; hijacker false", string(a.body),
		"a wrapped handler cannot flush or hijack: the answer is buffered until stored")
	assert.Equal(t, idempotency.StatusStored, a.header.Get("Idempotency-Status"))
}

func safeMethods(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{RequireKey: true})
	for range 2 {
		a, err := s.send(t, context.Background(), http.MethodGet, "/v1/payments", "get", "", "X-Effect", "get")
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, a.status)
		assert.Empty(t, a.header.Values("Idempotency-Status"))
	}
	assert.Equal(t, 2, env.Count("get"), "a GET is not deduped")
}

func inboxOnce(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store, Name: "webhooks"}
	ctx := context.Background()
	runs := 0
	fn := func(ctx context.Context) ([]byte, error) {
		runs++
		if err := env.Apply(ctx, "evt"); err != nil {
			return nil, err
		}
		return []byte(fmt.Sprintf("done %d", runs)), nil
	}
	fails := func(ctx context.Context) ([]byte, error) {
		if err := env.Apply(ctx, "evt-fail"); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("transient")
	}
	_, _, err := in.Do(ctx, "evt_1", []byte("payload"), fails)
	require.EqualError(t, err, "transient")
	if env.Store.Atomic() {
		assert.Equal(t, 0, env.Count("evt-fail"), "an atomic store rolls a failed run back")
	}
	res, replayed, err := in.Do(ctx, "evt_1", []byte("payload"), fn)
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, "done 1", string(res))
	res, replayed, err = in.Do(ctx, "evt_1", []byte("payload"), fn)
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "done 1", string(res))
	_, _, err = in.Do(ctx, "evt_1", []byte("tampered"), fn)
	assert.ErrorIs(t, err, idempotency.ErrMismatch)
	assert.Equal(t, 1, runs)
	assert.Equal(t, 1, env.Count("evt"))
	other := &idempotency.Inbox{Store: env.Store, Name: "queue"}
	_, replayed, err = other.Do(ctx, "evt_1", []byte("payload"), fn)
	require.NoError(t, err)
	assert.False(t, replayed, "inboxes with different names are different scopes")
}

func inboxConcurrent(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store}
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	wg.Go(func() {
		_, _, err := in.Do(context.Background(), "msg", nil, func(ctx context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte("ok"), env.Apply(ctx, "msg")
		})
		errs <- err
	})
	<-started
	for range 63 {
		wg.Go(func() {
			_, _, err := in.Do(context.Background(), "msg", nil, func(ctx context.Context) ([]byte, error) {
				return []byte("again"), env.Apply(ctx, "msg")
			})
			errs <- err
		})
	}
	busy := 0
	for range 63 {
		if err := <-errs; assert.ErrorIs(t, err, idempotency.ErrInProgress) {
			busy++
		}
	}
	close(release)
	wg.Wait()
	require.NoError(t, <-errs)
	assert.Equal(t, 63, busy)
	res, replayed, err := in.Do(context.Background(), "msg", nil, nil)
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "ok", string(res))
	assert.Equal(t, 1, env.Count("msg"))
	assert.Equal(t, int64(63), in.Stats().InProgress)
}
