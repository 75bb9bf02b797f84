package fakeserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

func TestReplayIsIdenticalByteForByte(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			s, c, base := cn.start(t)
			first := mustDo(t, c, base, req{key: "k1", body: `{"amount":100,"currency":"usd"}`})
			second := mustDo(t, c, base, req{key: "k1", body: `{"currency":"usd","amount":100.0}`})

			require.Equal(t, http.StatusCreated, first.status)
			assert.Equal(t, "stored", first.header.Get("Idempotency-Status"))
			assert.Empty(t, first.header.Get("Idempotent-Replayed"))
			assert.Equal(t, first.status, second.status)
			assert.Equal(t, first.body, second.body, "replayed body must be byte-identical")
			for _, h := range []string{"Content-Type", "Location", "Content-Length"} {
				assert.Equal(t, first.header.Get(h), second.header.Get(h), h)
			}
			assert.Equal(t, "replayed", second.header.Get("Idempotency-Status"))
			assert.Equal(t, "true", second.header.Get("Idempotent-Replayed"))

			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(first.body), &obj))
			assert.Equal(t, "usd", obj["currency"])
			assert.EqualValues(t, 100, obj["amount"])
			assert.True(t, strings.HasPrefix(obj["id"].(string), "ch_"), obj["id"])
			assert.Equal(t, "/v1/charges/"+obj["id"].(string), first.header.Get("Location"))
			assert.Equal(t, 1, s.Effects("k1"))
			assert.EqualValues(t, 1, s.Stats().Replays)

			got := mustDo(t, c, base, req{method: http.MethodGet, path: first.header.Get("Location")})
			assert.Equal(t, http.StatusOK, got.status)
			assert.JSONEq(t, first.body, got.body)
		})
	}
}

func TestConcurrentDuplicatesExecuteOnce(t *testing.T) {
	for _, cn := range conns() {
		t.Run(cn.name, func(t *testing.T) {
			// Every request takes 50ms after its claim, so the duplicates overlap.
			s, c, base := cn.start(t, fakeserver.WithRoute(fakeserver.Route{
				Match: "POST /v1/charges",
				Mix:   []fakeserver.Fault{{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(50 * time.Millisecond), Probability: 1}},
			}))
			const n = 100
			replies := make([]reply, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					replies[i], errs[i] = do(t, c, base, req{key: "same", body: `{"amount":5000}`})
				})
			}
			close(start)
			wg.Wait()

			var stored, replayed, conflicts int
			for i, r := range replies {
				require.NoError(t, errs[i])
				switch {
				case r.status == http.StatusCreated && r.header.Get("Idempotency-Status") == "stored":
					stored++
				case r.status == http.StatusCreated && r.header.Get("Idempotency-Status") == "replayed":
					replayed++
				case r.status == http.StatusConflict:
					conflicts++
					assert.NotEmpty(t, r.header.Get("Retry-After"))
					var p map[string]any
					require.NoError(t, json.Unmarshal([]byte(r.body), &p))
					assert.True(t, strings.HasSuffix(p["type"].(string), "/in-progress"), p["type"])
					assert.Contains(t, p["detail"], "in progress")
				default:
					t.Fatalf("unexpected reply %d %q", r.status, r.body)
				}
			}
			t.Logf("stored %d, replayed %d, conflicts %d", stored, replayed, conflicts)
			assert.Equal(t, 1, stored, "exactly one request executes")
			assert.Equal(t, n-1, replayed+conflicts)
			assert.Equal(t, 1, s.TotalEffects())
			assert.Equal(t, 1, s.Effects("same"))
			st := s.Stats()
			assert.EqualValues(t, conflicts, st.InProgressConflicts)
			assert.EqualValues(t, replayed, st.Replays)
			assert.Zero(t, st.DuplicateEffects)
		})
	}
}

func TestPayloadMismatch(t *testing.T) {
	tests := []struct {
		name   string
		opts   []fakeserver.Option
		status int
	}{
		{"default 422", nil, http.StatusUnprocessableEntity},
		{"409, as some APIs answer", []fakeserver.Option{fakeserver.WithMismatchStatus(http.StatusConflict)}, http.StatusConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c, base := conns()[1].start(t, tt.opts...)
			mustDo(t, c, base, req{key: "k", body: `{"amount":100}`})
			r := mustDo(t, c, base, req{key: "k", body: `{"amount":101}`})

			assert.Equal(t, tt.status, r.status)
			assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
			var p struct {
				Type, Title, Detail, Code string
				Status                    int
			}
			require.NoError(t, json.Unmarshal([]byte(r.body), &p))
			assert.True(t, strings.HasSuffix(p.Type, "/payload-mismatch"), p.Type)
			assert.Contains(t, p.Title, "idempotency.payload_mismatch")
			assert.Contains(t, p.Detail, "idempotency.payload_mismatch")
			assert.Equal(t, tt.status, p.Status)
			assert.Equal(t, 1, s.TotalEffects())
			assert.EqualValues(t, 1, s.Stats().Mismatches)
		})
	}
}

func TestKeyValidation(t *testing.T) {
	long := strings.Repeat("k", fakeserver.MaxKeyLength)
	tests := []struct {
		name    string
		opts    []fakeserver.Option
		path    string
		key     string
		headers map[string]string
		status  int
		problem string // type suffix
	}{
		{"no key, not required", nil, "", "", nil, http.StatusCreated, ""},
		{"no key, required everywhere", []fakeserver.Option{fakeserver.WithRequireKey(true)}, "", "", nil, http.StatusBadRequest, "/missing-key"},
		{"no key, required on the route", []fakeserver.Option{fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges", RequireKey: true})}, "", "", nil, http.StatusBadRequest, "/missing-key"},
		{"no key, other route", []fakeserver.Option{fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges", RequireKey: true})}, "/v1/refunds", "", nil, http.StatusCreated, ""},
		{"255 chars", nil, "", long, nil, http.StatusCreated, ""},
		{"256 chars", nil, "", long + "k", nil, http.StatusBadRequest, "/invalid-key"},
		{"quoted", nil, "", `"abc"`, nil, http.StatusCreated, ""},
		{"quoted with escapes", nil, "", `"a\"b\\c"`, nil, http.StatusCreated, ""},
		{"unterminated quote", nil, "", `"abc`, nil, http.StatusBadRequest, "/invalid-key"},
		{"data after quote", nil, "", `"abc"x`, nil, http.StatusBadRequest, "/invalid-key"},
		{"empty quoted", nil, "", `""`, nil, http.StatusBadRequest, "/invalid-key"},
		{"bare with a space", nil, "", "a b", nil, http.StatusCreated, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c, base := conns()[1].start(t, tt.opts...)
			r := mustDo(t, c, base, req{path: tt.path, key: tt.key, headers: tt.headers})
			assert.Equal(t, tt.status, r.status, r.body)
			if tt.problem != "" {
				assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
				var p struct{ Type string }
				require.NoError(t, json.Unmarshal([]byte(r.body), &p))
				assert.True(t, strings.HasSuffix(p.Type, tt.problem), p.Type)
				assert.Zero(t, s.TotalEffects())
			}
		})
	}
}

func TestQuotedAndBareKeyAreTheSameKey(t *testing.T) {
	s, c, base := conns()[1].start(t)
	mustDo(t, c, base, req{key: "abc"})
	r := mustDo(t, c, base, req{key: `"abc"`})
	assert.Equal(t, "replayed", r.header.Get("Idempotency-Status"))
	assert.Equal(t, 1, s.Effects("abc"))
}

func TestTwoKeyHeadersAreRejected(t *testing.T) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	hr, err := http.NewRequest(http.MethodPost, inProcessURL+"/v1/charges", strings.NewReader(`{}`))
	require.NoError(t, err)
	hr.Header.Add("Idempotency-Key", "a")
	hr.Header.Add("Idempotency-Key", "b")
	resp, err := s.Transport().RoundTrip(hr)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestInvalidBodies(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"not JSON", "", "", "amount=100", http.StatusBadRequest},
		{"JSON array", "", "", `[1,2]`, http.StatusBadRequest},
		{"trailing data", "", "", `{"a":1} {"b":2}`, http.StatusBadRequest},
		{"too large", "", "", `{"a":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge},
		{"unknown object", http.MethodGet, "/v1/charges/ch_404", "", http.StatusNotFound},
		{"unknown route", http.MethodGet, "/v2/charges", "", http.StatusNotFound},
		{"bad collection", "", "/v1/Charges", "", http.StatusNotFound},
		{"PUT", http.MethodPut, "", `{}`, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c, base := conns()[1].start(t)
			r := mustDo(t, c, base, req{method: tt.method, path: tt.path, key: "k", body: tt.body})
			assert.Equal(t, tt.status, r.status)
			assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
			var p struct {
				Type, Title string
				Status      int
			}
			require.NoError(t, json.Unmarshal([]byte(r.body), &p), r.body)
			assert.Equal(t, tt.status, p.Status)
			assert.True(t, strings.HasPrefix(p.Type, fakeserver.ProblemTypeBase), p.Type)
			assert.NotEmpty(t, p.Title)
			assert.Zero(t, s.TotalEffects())
		})
	}
}

func TestKeysAreScopedByPrincipalAndRoute(t *testing.T) {
	s, c, base := conns()[1].start(t)
	mustDo(t, c, base, req{key: "k", auth: "Bearer alice-secret"})
	r := mustDo(t, c, base, req{key: "k", auth: "Bearer bob-secret"})
	assert.Equal(t, "stored", r.header.Get("Idempotency-Status"), "another principal is another operation")
	r = mustDo(t, c, base, req{key: "k", auth: "Bearer alice-secret", path: "/v1/refunds"})
	assert.Equal(t, "stored", r.header.Get("Idempotency-Status"), "another route is another operation")
	r = mustDo(t, c, base, req{key: "k", auth: "Bearer alice-secret"})
	assert.Equal(t, "replayed", r.header.Get("Idempotency-Status"))

	assert.Equal(t, 3, s.Effects("k"))
	assert.Zero(t, s.Stats().DuplicateEffects)
	for _, e := range s.Ledger() {
		assert.NotContains(t, e.Principal, "secret")
		assert.Len(t, e.Principal, 16)
	}
	led := s.Ledger()
	assert.True(t, strings.HasPrefix(led[2].ID, "rf_"), led[2].ID)
}

func TestRecordsExpireAfterTTL(t *testing.T) {
	clk := newClock()
	s, c, base := conns()[1].start(t, fakeserver.WithClock(clk.Now), fakeserver.WithTTL(time.Hour))
	first := mustDo(t, c, base, req{key: "k"})
	clk.Advance(59 * time.Minute)
	r := mustDo(t, c, base, req{key: "k"})
	assert.Equal(t, "replayed", r.header.Get("Idempotency-Status"))
	assert.Equal(t, first.body, r.body)

	clk.Advance(time.Minute)
	r = mustDo(t, c, base, req{key: "k"})
	assert.Equal(t, "stored", r.header.Get("Idempotency-Status"), "an expired key is a new operation")
	assert.NotEqual(t, first.body, r.body)
	assert.Equal(t, 2, s.Effects("k"))
	assert.Equal(t, 1, s.Stats().DuplicateEffects)
}

func TestStoreIsBounded(t *testing.T) {
	s, c, base := conns()[1].start(t, fakeserver.WithMaxRecords(2))
	for _, k := range []string{"a", "b", "c"} {
		mustDo(t, c, base, req{key: k})
	}
	assert.Equal(t, 2, s.Stats().Records)
	r := mustDo(t, c, base, req{key: "c"})
	assert.Equal(t, "replayed", r.header.Get("Idempotency-Status"))
	r = mustDo(t, c, base, req{key: "a"})
	assert.Equal(t, "stored", r.header.Get("Idempotency-Status"), "the oldest record was evicted")
	assert.Equal(t, 2, s.Stats().Records)
}

func TestWhatIsStored(t *testing.T) {
	tests := []struct {
		name       string
		mode       fakeserver.Mode
		fault      fakeserver.Fault
		wantFirst  int
		wantStored bool // the retry replays the first answer
	}{
		{"ietf: 503 is not stored", fakeserver.ModeIETF, fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 503}, 503, false},
		{"ietf: 429 is not stored", fakeserver.ModeIETF, fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 429}, 429, false},
		{"ietf: 402 is final, stored", fakeserver.ModeIETF, fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 402}, 402, true},
		{"stripe: 500 is stored", fakeserver.ModeStripe, fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 500}, 500, true},
		{"stripe: 429 is not stored", fakeserver.ModeStripe, fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 429}, 429, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c, base := conns()[1].start(t, fakeserver.WithMode(tt.mode))
			require.NoError(t, s.Enqueue("POST /v1/charges", tt.fault))
			first := mustDo(t, c, base, req{key: "k"})
			retry := mustDo(t, c, base, req{key: "k"})

			assert.Equal(t, tt.wantFirst, first.status)
			if tt.wantStored {
				assert.Equal(t, "stored", first.header.Get("Idempotency-Status"))
				assert.Equal(t, tt.wantFirst, retry.status)
				assert.Equal(t, "replayed", retry.header.Get("Idempotency-Status"))
				assert.Equal(t, first.body, retry.body)
				assert.Zero(t, s.TotalEffects())
			} else {
				assert.Empty(t, first.header.Get("Idempotency-Status"))
				assert.Equal(t, http.StatusCreated, retry.status, "the retry executes")
				assert.Equal(t, "stored", retry.header.Get("Idempotency-Status"))
				assert.Equal(t, 1, s.TotalEffects())
			}
		})
	}
}

// Every answer to a keyed request echoes its key, an injected fault's too:
// the evidence a client needs that the server dedupes.
func TestEveryAnswerEchoesTheKey(t *testing.T) {
	s := fakeserver.New()
	defer s.Close()
	require.NoError(t, s.Enqueue("POST /v1/charges", fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 503}))
	for _, want := range []int{503, 201} {
		req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/charges", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode)
		assert.Equal(t, "k-1", resp.Header.Get("Idempotency-Key"))
	}
}

// A stored injected fault is replayed with every header it was answered
// with, Retry-After and the fault's own included (the records are package
// idempotency's, which store only the headers fakeserver names).
func TestStoredFaultReplaysItsHeaders(t *testing.T) {
	for _, enqueue := range []bool{false, true} {
		fault := fakeserver.Fault{Kind: fakeserver.FaultStatus, Status: 500,
			RetryAfter: fakeserver.Duration(2 * time.Second), Headers: map[string]string{"X-Should-Retry": "false"}}
		opts := []fakeserver.Option{fakeserver.WithMode(fakeserver.ModeStripe)}
		if !enqueue {
			opts = append(opts, fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/charges", Script: []fakeserver.Fault{fault}}))
		}
		s, c, base := conns()[1].start(t, opts...)
		if enqueue {
			require.NoError(t, s.Enqueue("POST /v1/charges", fault))
		}
		first := mustDo(t, c, base, req{key: "k"})
		retry := mustDo(t, c, base, req{key: "k"})
		require.Equal(t, 500, first.status)
		assert.Equal(t, "stored", first.header.Get("Idempotency-Status"))
		assert.Equal(t, "replayed", retry.header.Get("Idempotency-Status"))
		for _, h := range []string{"X-Should-Retry", "Retry-After", "Content-Type"} {
			assert.Equal(t, first.header.Get(h), retry.header.Get(h), "%s, enqueued %v", h, enqueue)
			assert.NotEmpty(t, retry.header.Get(h), h)
		}
		assert.Equal(t, first.body, retry.body)
	}
}
