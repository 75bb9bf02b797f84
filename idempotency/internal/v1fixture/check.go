package v1fixture

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/idempotency"
)

// Check runs the current middleware and Inbox with the default Config over
// store, which holds the fixture's records (their expiry moved into the
// future), and checks that they are honoured: the request that wrote a
// record gets it replayed, and nothing that does not match it gets it or
// runs under its key.
func Check(t *testing.T, store idempotency.Store) {
	mw, err := idempotency.New(store, idempotency.Config{})
	require.NoError(t, err)
	var runs atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"new"}`))
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(path, key, body string, header ...string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, string(b)
	}
	bearer, anon, query := Requests[0], Requests[1], Requests[2]
	alice := []string{"Authorization", bearer.Authorization}
	replayed := func(name string, status int, h http.Header, body, key string) {
		t.Helper()
		assert.Equal(t, http.StatusCreated, status, "%s: %s", name, body)
		assert.Equal(t, idempotency.StatusReplayed, h.Get("Idempotency-Status"), name)
		assert.Contains(t, body, fmt.Sprintf(`"key":%q`, key), "%s: the stored answer", name)
		assert.Empty(t, h.Values("Idempotency-Principal"), name)
	}
	refused := func(name string, status int, body, slug string) {
		t.Helper()
		assert.Equal(t, http.StatusUnprocessableEntity, status, "%s: %s", name, body)
		assert.Contains(t, body, idempotency.ProblemTypeBase+slug, name)
		assert.NotContains(t, body, `"key":`, "%s: nothing of the stored answer", name)
	}

	// A record of a principal (its scope version 1 held the principal).
	status, h, body := send(bearer.Path, bearer.Key, bearer.Body, alice...)
	replayed("bearer, the same request", status, h, body, bearer.Key)
	reordered := `{"meta":{"a":true,"z":null},"items":[1.0,2.5,0,100],"amount":1e3,"note":"café \"x\" 😀","currency":"eur"}`
	status, h, body = send(bearer.Path, bearer.Key, reordered, alice...)
	replayed("bearer, the same JSON reformatted", status, h, body, bearer.Key)
	status, _, body = send(bearer.Path, bearer.Key, `{"amount": 1}`, alice...)
	refused("bearer, another payload", status, body, "payload-mismatch")
	status, _, body = send(bearer.Path, bearer.Key, bearer.Body, "Authorization", "Bearer tok_bob")
	assert.NotContains(t, body, `"key":`, "another principal never gets the answer: %d %s", status, body)

	// A record without a principal: its scope is version 2's.
	status, h, body = send(anon.Path, anon.Key, anon.Body)
	replayed("no principal, the same request", status, h, body, anon.Key)
	status, _, body = send(anon.Path, anon.Key, `{"amount": 8}`)
	refused("no principal, another payload", status, body, "payload-mismatch")
	status, _, body = send(anon.Path, anon.Key, anon.Body, "Authorization", "Bearer tok_bob")
	refused("no principal, then a bearer", status, body, "principal-mismatch")
	status, _, body = send(anon.Path, anon.Key, anon.Body, "Cookie", "sid=s_bob")
	refused("no principal, then a session cookie", status, body, "principal-mismatch")

	// Version 1 did not fingerprint the query: a request with one cannot
	// be matched to its record, and is refused rather than replayed or run.
	status, _, body = send(query.Path, query.Key, query.Body, alice...)
	refused("a query", status, body, "payload-mismatch")

	in := &idempotency.Inbox{Store: store, Name: Inbox.Name}
	ctx := context.Background()
	fn := func(context.Context) ([]byte, error) { runs.Add(1); return []byte("again"), nil }
	res, again, err := in.Do(ctx, Inbox.Key, []byte(Inbox.Payload), fn)
	require.NoError(t, err)
	assert.True(t, again)
	assert.Equal(t, Inbox.Result, string(res))
	// Version 1 kept the payload's bytes: its records compare them.
	_, _, err = in.Do(ctx, Inbox.Key, []byte(`{"amount":10,"id":"evt_fx","type":"paid"}`), fn)
	assert.ErrorIs(t, err, idempotency.ErrMismatch, "a record of version 1 compares bytes")
	_, _, err = in.Do(ctx, Inbox.Key, []byte(`{"type": "paid", "id": "evt_fx", "amount": 11}`), fn)
	assert.ErrorIs(t, err, idempotency.ErrMismatch)

	assert.Equal(t, int64(1), runs.Load(), "only bob's request, a scope of its own in version 1, ran")
}
