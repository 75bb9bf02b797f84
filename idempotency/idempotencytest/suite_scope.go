package idempotencytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// runScope runs the rules of who may get a stored answer (principals,
// credentials, cookies) and of what the fingerprint covers (the query),
// each on a new Env from f.
func runScope(t *testing.T, f Factory) {
	rules := []struct {
		name string
		run  func(*testing.T, Env)
	}{
		{"TwoPrincipalsOneKey", twoPrincipals},
		{"AnotherCallersCredentials", anotherCallersCredentials},
		{"RotatedCredentialNeverRunsTwice", rotatedCredential},
		{"IncidentalCookiesReplay", incidentalCookies},
		{"UnknownCookiesWarnAndRefuse", unknownCookies},
		{"QueryIsFingerprinted", queryIsFingerprinted},
		{"InboxComparesCanonicalJSON", inboxCanonicalJSON},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) { r.run(t, f(t)) })
	}
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// assertRefused checks that a is the principal-mismatch problem and
// carries nothing of the stored answer first.
func assertRefused(t *testing.T, a, first answer) {
	t.Helper()
	assertProblem(t, a, http.StatusUnprocessableEntity, "principal-mismatch")
	assert.NotContains(t, string(a.body), `"id"`, "nothing of the stored answer")
	assert.NotEqual(t, first.body, a.body)
	assert.Empty(t, a.header.Get("Location"))
	assert.Empty(t, a.header.Values("Idempotency-Principal"), "the record's principal is never sent")
}

// twoPrincipals: a key is scoped by route, not by principal: bob re-using
// alice's key is refused, never given her answer and never run.
func twoPrincipals(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	alice := s.post(t, "/v1/payments", "shared", payment, "Authorization", "Bearer alice", "X-Effect", "alice")
	assert.Equal(t, idempotency.StatusStored, alice.header.Get("Idempotency-Status"))
	assert.Empty(t, alice.header.Values("Idempotency-Principal"), "the record's principal is never sent")
	bob := s.post(t, "/v1/payments", "shared", payment, "Authorization", "Bearer bob", "X-Effect", "bob")
	assertRefused(t, bob, alice)
	again := s.post(t, "/v1/payments", "shared", payment, "Authorization", "Bearer alice", "X-Effect", "alice")
	assert.Equal(t, idempotency.StatusReplayed, again.header.Get("Idempotency-Status"))
	assert.Equal(t, alice.body, again.body, "the principal that stored the answer gets it")
	assert.Empty(t, again.header.Values("Idempotency-Principal"), "the record's principal is never sent")
	assert.Equal(t, 1, env.Count("alice"))
	assert.Equal(t, 0, env.Count("bob"))
	assert.Equal(t, int64(1), s.mw.Stats().Mismatch)
}

// anotherCallersCredentials: with the default Config, a request with
// another caller's bearer token, basic credentials or session cookie never
// gets the stored answer, and the caller's own retry does.
func anotherCallersCredentials(t *testing.T, env Env) {
	tests := []struct {
		name       string
		alice, bob []string
	}{
		{"bearer", []string{"Authorization", "Bearer tok_alice"}, []string{"Authorization", "Bearer tok_bob"}},
		{"basic", []string{"Authorization", basic("alice", "pw")}, []string{"Authorization", basic("bob", "pw")}},
		{"session cookie", []string{"Cookie", "sid=s_alice"}, []string{"Cookie", "sid=s_bob"}},
		{"session cookie among incidental ones", []string{"Cookie", "AWSALB=lb1; sid=s_alice; _ga=GA1.1"},
			[]string{"Cookie", "AWSALB=lb1; sid=s_bob; _ga=GA1.1"}},
		{"no credentials then a session cookie", nil, []string{"Cookie", "sid=s_bob"}},
		{"a session cookie then none", []string{"Cookie", "sid=s_alice"}, nil},
	}
	s := newServer(t, env, idempotency.Config{})
	for _, tt := range tests {
		key := "cred-" + strings.ReplaceAll(tt.name, " ", "-")
		first := s.post(t, "/v1/payments", key, payment, append([]string{"X-Effect", key}, tt.alice...)...)
		require.Equal(t, http.StatusCreated, first.status, "%s: %s", tt.name, first)
		other := s.post(t, "/v1/payments", key, payment, append([]string{"X-Effect", key}, tt.bob...)...)
		assertRefused(t, other, first)
		own := s.post(t, "/v1/payments", key, payment, append([]string{"X-Effect", key}, tt.alice...)...)
		assert.Equal(t, idempotency.StatusReplayed, own.header.Get("Idempotency-Status"), tt.name)
		assert.Equal(t, first.body, own.body, tt.name)
		assert.Equal(t, 1, env.Count(key), "%s: one run", tt.name)
	}
}

// rotatedCredential: the same caller retries with a refreshed token: the
// retry finds the record and is refused; the handler never runs twice.
func rotatedCredential(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	first := s.post(t, "/v1/payments", "rot", payment, "Authorization", "Bearer tok_v1")
	require.Equal(t, http.StatusCreated, first.status)
	retry := s.post(t, "/v1/payments", "rot", payment, "Authorization", "Bearer tok_v2")
	assertRefused(t, retry, first)
	cookie := s.post(t, "/v1/payments", "rot-cookie", payment, "Cookie", "session=v1")
	require.Equal(t, http.StatusCreated, cookie.status)
	retry = s.post(t, "/v1/payments", "rot-cookie", payment, "Cookie", "session=v2")
	assertRefused(t, retry, cookie)
	assert.Equal(t, 1, env.Count("rot"), "never a second run")
	assert.Equal(t, 1, env.Count("rot-cookie"), "never a second run")
}

// incidentalCookies: a retry whose only change is a load balancer's,
// CSRF or analytics cookie gets the replay, not a second run.
func incidentalCookies(t *testing.T, env Env) {
	tests := []struct {
		name        string
		cfg         idempotency.Config
		first, then []string
	}{
		{"bearer and a rotating stickiness cookie", idempotency.Config{},
			[]string{"Authorization", "Bearer tok", "Cookie", "AWSALB=a1; sid=x"},
			[]string{"Authorization", "Bearer tok", "Cookie", "AWSALB=a2; sid=y; extra=1"}},
		{"session cookie and rotating incidental cookies", idempotency.Config{},
			[]string{"Cookie", "sid=s1; AWSALB=a1; csrftoken=c1; _ga=g1; BIGipServerpool=b1"},
			[]string{"Cookie", "_ga=g2; sid=s1; AWSALB=a2; csrftoken=c2; BIGipServerpool=b2; _gid=new"}},
		{"named session cookie and an unknown rotating cookie",
			idempotency.Config{Principal: idempotency.CookiePrincipal("sid")},
			[]string{"Cookie", "sid=s1; tracking=t1"},
			[]string{"Cookie", "tracking=t2; sid=s1"}},
	}
	for i, tt := range tests {
		s := newServer(t, env, tt.cfg)
		key := "incidental-" + string(rune('a'+i))
		first := s.post(t, "/v1/payments", key, payment, tt.first...)
		require.Equal(t, http.StatusCreated, first.status, "%s: %s", tt.name, first)
		retry := s.post(t, "/v1/payments", key, payment, tt.then...)
		assert.Equal(t, idempotency.StatusReplayed, retry.header.Get("Idempotency-Status"), "%s: %s", tt.name, retry)
		assert.Equal(t, first.body, retry.body, tt.name)
		assert.Equal(t, 1, env.Count(key), "%s: one run", tt.name)
	}
	named := newServer(t, env, idempotency.Config{Principal: idempotency.CookiePrincipal("sid")})
	first := named.post(t, "/v1/payments", "named-sid", payment, "Cookie", "sid=alice; tracking=t1")
	bob := named.post(t, "/v1/payments", "named-sid", payment, "Cookie", "sid=bob; tracking=t1")
	assertRefused(t, bob, first)
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// unknownCookies: with the default Config, cookies the middleware does
// not know make the principal: a retry whose unknown cookie changed is
// refused (never run twice), and a warning naming the cookies, never
// their values, is logged once.
func unknownCookies(t *testing.T, env Env) {
	var log syncBuffer
	s := newServer(t, env, idempotency.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	first := s.post(t, "/v1/payments", "unknown", payment, "Cookie", "sessionid=secret_alice; tracking=trk_value_1")
	require.Equal(t, http.StatusCreated, first.status)
	retry := s.post(t, "/v1/payments", "unknown", payment, "Cookie", "sessionid=secret_alice; tracking=trk_value_2")
	assertRefused(t, retry, first)
	s.post(t, "/v1/payments", "unknown-2", payment, "Cookie", "sessionid=secret_alice")
	assert.Equal(t, 1, env.Count("unknown"), "never a second run")
	out := log.String()
	assert.Equal(t, 1, strings.Count(out, "CookiePrincipal"), "one warning: %s", out)
	assert.Contains(t, out, "sessionid")
	assert.NotContains(t, out, "secret_alice", "never a cookie's value")
	assert.NotContains(t, out, "trk_value")
}

// queryIsFingerprinted: the query is part of the payload: a key reused
// with another query is refused, never replayed; the same parameters in
// another order or encoding are the same payload.
func queryIsFingerprinted(t *testing.T, env Env) {
	s := newServer(t, env, idempotency.Config{})
	first := s.post(t, "/v1/payments?amount=100&destination=acct_1", "q", payment)
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	for _, q := range []string{"?amount=999999&destination=acct_2", "?amount=999999&destination=acct_1",
		"?amount=100", "", "?amount=100&destination=acct_1&amount=100", "?amount=100&destination=acct_1&x"} {
		other := s.post(t, "/v1/payments"+q, "q", payment)
		assertProblem(t, other, http.StatusUnprocessableEntity, "payload-mismatch")
		assert.NotEqual(t, first.body, other.body, q)
	}
	for _, q := range []string{"?destination=acct_1&amount=100", "?amount=%31%30%30&destination=acct%5F1", "?amount=100&&destination=acct_1"} {
		same := s.post(t, "/v1/payments"+q, "q", payment)
		assert.Equal(t, idempotency.StatusReplayed, same.header.Get("Idempotency-Status"), "%s: %s", q, same)
	}
	assert.Equal(t, 1, env.Count("q"), "one run")

	// Repeated parameters keep their order: a list is not a set.
	s.post(t, "/v1/payments?item=a&item=b", "q-list", payment)
	swapped := s.post(t, "/v1/payments?item=b&item=a", "q-list", payment)
	assertProblem(t, swapped, http.StatusUnprocessableEntity, "payload-mismatch")
}

// inboxCanonicalJSON: the Inbox compares payloads as the middleware
// compares JSON bodies: a JSON payload by its canonical form, any other
// byte for byte.
func inboxCanonicalJSON(t *testing.T, env Env) {
	in := &idempotency.Inbox{Store: env.Store, Name: "canonical"}
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("ok"), nil }
	tests := []struct {
		key, first, same, other string
	}{
		{"json", `{"id": "evt_1", "amount": 10}`, "{\"amount\":10.0,\n\"id\":\"evt_1\"}", `{"id": "evt_1", "amount": 11}`},
		{"text", "id=evt_1 amount=10", "id=evt_1 amount=10", "id=evt_1  amount=10"},
		{"broken json", `{"id": "evt_1"`, `{"id": "evt_1"`, `{"id":"evt_1"`},
	}
	for _, tt := range tests {
		_, replayed, err := in.Do(ctx, tt.key, []byte(tt.first), fn)
		require.NoError(t, err, tt.key)
		assert.False(t, replayed)
		res, replayed, err := in.Do(ctx, tt.key, []byte(tt.same), fn)
		require.NoError(t, err, tt.key)
		assert.True(t, replayed, tt.key)
		assert.Equal(t, "ok", string(res))
		_, _, err = in.Do(ctx, tt.key, []byte(tt.other), fn)
		assert.ErrorIs(t, err, idempotency.ErrMismatch, tt.key)
	}
	assert.Equal(t, len(tests), runs)
}
