package resilient_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func outcome(method string, keyed bool, resp *http.Response, err error) resilient.Outcome {
	req, _ := http.NewRequest(method, target, nil)
	if resp != nil {
		resp.Request = req
	}
	return resilient.Outcome{Request: req, Response: resp, Err: err, Keyed: keyed, Now: time.Unix(1_700_000_000, 0)}
}

func response(code int, body string, headers ...string) *http.Response {
	resp, _ := stubtest.ReplyBody(code, body, headers...)(nil)
	return resp
}

func TestDefaultClassifierStatuses(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		body     string
		headers  []string
		keyed    bool
		action   resilient.Action
		category resilient.Category
		delay    time.Duration
		replayed bool
	}{
		{"201", 201, "", nil, true, resilient.Success, "", 0, false},
		{"replayed IETF", 201, "", []string{"Idempotency-Status: replayed"}, true, resilient.Success, "", 0, true},
		{"replayed Stripe", 200, "", []string{"Idempotent-Replayed: true"}, true, resilient.Success, "", 0, true},
		{"400", 400, "", nil, true, resilient.Terminal, resilient.CategoryValidation, 0, false},
		{"401", 401, "", nil, true, resilient.Terminal, resilient.CategoryAuth, 0, false},
		{"403", 403, "", nil, true, resilient.Terminal, resilient.CategoryAuth, 0, false},
		{"404", 404, "", nil, true, resilient.Terminal, resilient.CategoryNotFound, 0, false},
		{"422 validation", 422, `{"title":"amount must be positive"}`, nil, true, resilient.Terminal, resilient.CategoryValidation, 0, false},
		{"412", 412, "", nil, true, resilient.Terminal, resilient.CategoryPrecondition, 0, false},
		{"412 unkeyed", 412, "", nil, false, resilient.Terminal, resilient.CategoryPrecondition, 0, false},
		{"408", 408, "", nil, true, resilient.Retry, resilient.CategoryTimeout, 0, false},
		{"429 Retry-After", 429, "", []string{"Retry-After: 7"}, true, resilient.Retry, resilient.CategoryRateLimit, 7 * time.Second, false},
		{"429 RateLimit r=0", 429, "", []string{`RateLimit: "default";r=0;t=12`}, true, resilient.Retry, resilient.CategoryRateLimit, 12 * time.Second, false},
		{"429 Retry-After wins over RateLimit", 429, "", []string{"Retry-After: 2", `RateLimit: "default";r=0;t=12`}, true, resilient.Retry, resilient.CategoryRateLimit, 2 * time.Second, false},
		{"429 RateLimit r>0 ignored", 429, "", []string{`RateLimit: "default";r=5;t=12`}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"429 RateLimit r=0 without t: backoff", 429, "", []string{`RateLimit: "default";r=0`}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"429 RateLimit-Remaining 0 without reset: backoff", 429, "", []string{"RateLimit-Remaining: 0"}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"503 RateLimit r=0 without t: backoff", 503, "", []string{`RateLimit: "default";r=0`}, true, resilient.Retry, resilient.CategoryUnavailable, 0, false},
		{"429 garbage Retry-After", 429, "", []string{"Retry-After: tomorrow-ish"}, true, resilient.Retry, resilient.CategoryRateLimit, 0, false},
		{"500", 500, "", nil, true, resilient.Retry, resilient.CategoryTransient, 0, false},
		{"500 unkeyed POST", 500, "", nil, false, resilient.Terminal, resilient.CategoryTransient, 0, false},
		{"502", 502, "", nil, true, resilient.Retry, resilient.CategoryUnavailable, 0, false},
		{"503 unkeyed POST", 503, "", nil, false, resilient.Retry, resilient.CategoryUnavailable, 0, false},
		{"504", 504, "", nil, true, resilient.Retry, resilient.CategoryTimeout, 0, false},
		{"501", 501, "", nil, true, resilient.Terminal, resilient.CategoryTerminal, 0, false},
		{"hint false wins over 503", 503, "", []string{"X-Should-Retry: false"}, true, resilient.Terminal, resilient.CategoryUnavailable, 0, false},
		{"hint true wins over 400", 400, "", []string{"Stripe-Should-Retry: true"}, true, resilient.Retry, resilient.CategoryValidation, 0, false},
		{"malformed hint ignored", 503, "", []string{"X-Should-Retry: maybe"}, true, resilient.Retry, resilient.CategoryUnavailable, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := response(tc.code, tc.body, tc.headers...)
			d := resilient.DefaultClassifier(outcome(http.MethodPost, tc.keyed, resp, nil))
			assert.Equal(t, tc.action, d.Action)
			assert.Equal(t, tc.category, d.Category)
			assert.Equal(t, tc.delay, d.Delay)
			assert.Equal(t, tc.replayed, d.Replayed)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b), "the classifier leaves the body intact")
		})
	}
}

// An unkeyed unsafe request under a strong precondition is re-sent after
// a failure that may have been applied, as an idempotent one is: applied
// once, it fails its precondition when sent again. Other preconditions
// leave it terminal.
func TestDefaultClassifierConditional(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		resp   *http.Response
		err    error
		action resilient.Action
	}{
		{"If-Match strong, reset", http.Header{"If-Match": {`"v1"`}}, nil, readErr(), resilient.Retry},
		{"If-None-Match star, reset", http.Header{"If-None-Match": {"*"}}, nil, readErr(), resilient.Retry},
		{"If-Match strong, 502", http.Header{"If-Match": {`"v1"`}}, response(502, ""), nil, resilient.Retry},
		{"If-Match strong, 500", http.Header{"If-Match": {`"v1"`}}, response(500, ""), nil, resilient.Retry},
		{"If-Match star, reset", http.Header{"If-Match": {"*"}}, nil, readErr(), resilient.Terminal},
		{"If-Match weak, reset", http.Header{"If-Match": {`W/"v1"`}}, nil, readErr(), resilient.Terminal},
		{"If-Unmodified-Since, reset", http.Header{"If-Unmodified-Since": {"Sun, 29 Nov 2026 05:00:00 GMT"}}, nil, readErr(), resilient.Terminal},
		{"If-Match star, 500", http.Header{"If-Match": {"*"}}, response(500, ""), nil, resilient.Terminal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := outcome(http.MethodPatch, false, tc.resp, tc.err)
			o.Request.Header = tc.header
			d := resilient.DefaultClassifier(o)
			assert.Equal(t, tc.action, d.Action)
			assert.True(t, d.Unknown)
		})
	}
}

func TestDefaultClassifierErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		method    string
		keyed     bool
		action    resilient.Action
		ambiguous bool
	}{
		{"dial refused, unkeyed POST", dialErr(), http.MethodPost, false, resilient.Retry, false},
		{"reset, keyed POST", readErr(), http.MethodPost, true, resilient.Retry, true},
		{"reset, unkeyed POST", readErr(), http.MethodPost, false, resilient.Terminal, true},
		{"reset, GET", readErr(), http.MethodGet, false, resilient.Retry, true},
		{"attempt deadline, keyed", context.DeadlineExceeded, http.MethodPost, true, resilient.Retry, true},
		{"canceled", context.Canceled, http.MethodGet, false, resilient.Terminal, false},
		{"unknown authority", x509.UnknownAuthorityError{}, http.MethodGet, false, resilient.Terminal, false},
		{"wrapped EOF", errors.Join(errors.New("read"), io.EOF), http.MethodPost, true, resilient.Retry, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := resilient.DefaultClassifier(outcome(tc.method, tc.keyed, nil, tc.err))
			assert.Equal(t, tc.action, d.Action)
			assert.Equal(t, tc.ambiguous, d.Unknown)
		})
	}
}

func TestValidateKey(t *testing.T) {
	k, err := resilient.NewKey()
	require.NoError(t, err)
	assert.NoError(t, resilient.ValidateKey(k))
	for _, bad := range []string{"", " lead", "trail ", "tab\t", "é", strings.Repeat("a", 256)} {
		assert.ErrorIs(t, resilient.ValidateKey(bad), resilient.ErrInvalidKey, "%q", bad)
	}
}

func FuzzDefaultClassifier(f *testing.F) {
	f.Add(409, "Retry-After: 1\nContent-Type: application/problem+json", []byte(`{"type":"/in-progress"}`), true)
	f.Add(429, `RateLimit: "default";r=0;t=30`, []byte{}, false)
	f.Add(503, "Retry-After: Sun, 22 Nov 2026 12:00:30 GMT", []byte("busy"), true)
	f.Add(422, "X-Should-Retry: true", bytes.Repeat([]byte("mismatch"), 1000), true)
	f.Add(-1, "Stripe-Should-Retry: false", []byte(nil), false)
	f.Add(409, problemJSON, []byte(draftInProgress), true)
	f.Add(422, problemJSON, []byte(draftMismatch), false)
	f.Add(409, appJSON, []byte(stripeInUse), true)
	f.Add(400, appJSON, []byte(stripeMismatch), true)
	f.Add(409, problemJSON+"\nRetry-After: 1", []byte(ourMismatch), false)
	f.Add(409, problemJSON, []byte(`{"error":{"type":"idempotency_error","code":7}}`), true)
	f.Fuzz(func(t *testing.T, code int, headers string, body []byte, keyed bool) {
		var hs []string
		for _, line := range strings.Split(headers, "\n") {
			if strings.Contains(line, ":") {
				hs = append(hs, line)
			}
		}
		resp := response(code, string(body), hs...)
		d := resilient.DefaultClassifier(outcome(http.MethodPost, keyed, resp, nil))
		if d.Delay < 0 {
			t.Fatalf("negative delay %v", d.Delay)
		}
		if d.Action > resilient.Terminal {
			t.Fatalf("unknown action %v", d.Action)
		}
		if !keyed && (d.Category == resilient.CategoryInProgress || d.Category == resilient.CategoryPayloadMismatch) {
			t.Fatalf("unkeyed %d classified %s", code, d.Category)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("body changed by the classifier: %q, %v", got, err)
		}
	})
}

// Bodies of the idempotency answers, as the IETF draft, Stripe and the
// fakeserver send them.
const (
	problemJSON = "Content-Type: application/problem+json"
	appJSON     = "Content-Type: application/json; charset=utf-8"

	// draft-ietf-httpapi-idempotency-key-header §2.7: one placeholder type, told apart by title.
	draftInProgress = `{"type":"https://developer.example.com/idempotency","title":"A request is outstanding for this Idempotency-Key","detail":"A request with the same Idempotency-Key for the same operation is being processed or is outstanding."}`
	draftMismatch   = `{"type":"https://developer.example.com/idempotency","title":"Idempotency-Key is already used","detail":"This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation."}`
	draftMissing    = `{"type":"https://developer.example.com/idempotency","title":"Idempotency-Key is missing","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`

	stripeInUse    = `{"error":{"code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): k. Please try again later.","type":"invalid_request_error"}}`
	stripeMismatch = `{"error":{"message":"Keys for idempotent requests can only be used with the same parameters they were first used with.","type":"idempotency_error"}}`

	ourInProgress = `{"type":"https://github.com/resilienthttp/resilient/problems/in-progress","title":"A request is outstanding for this Idempotency-Key","status":409}`
	ourMismatch   = `{"type":"https://github.com/resilienthttp/resilient/problems/payload-mismatch","title":"Idempotency-Key is already used","status":422}`
)

// TestDefaultClassifierIdempotencyAnswers: the idempotency answers are
// recognised by status, key and the structured members of a JSON body (the
// problem's type or title, Stripe's error type and code), never by words in
// prose; an unkeyed request never gets one.
func TestDefaultClassifierIdempotencyAnswers(t *testing.T) {
	const (
		retry    = resilient.Retry
		terminal = resilient.Terminal
		progress = resilient.CategoryInProgress
		mismatch = resilient.CategoryPayloadMismatch
		conflict = resilient.CategoryConflict
		invalid  = resilient.CategoryValidation
	)
	tests := []struct {
		name     string
		code     int
		body     string
		headers  []string
		keyed    bool
		action   resilient.Action
		category resilient.Category
		delay    time.Duration
	}{
		// In progress.
		{"draft 409 in progress", 409, draftInProgress, []string{problemJSON}, true, retry, progress, 0},
		{"draft 409 in progress, title in other case and spaces", 409, `{"type":"about:blank","title":"  a request is OUTSTANDING for this idempotency-key "}`, []string{problemJSON}, true, retry, progress, 0},
		{"draft 409 in progress with Retry-After", 409, draftInProgress, []string{problemJSON, "Retry-After: 3"}, true, retry, progress, 3 * time.Second},
		{"our type 409 in progress", 409, ourInProgress, []string{problemJSON + "; charset=utf-8"}, true, retry, progress, 0},
		{"Stripe 409 idempotency_key_in_use", 409, stripeInUse, []string{appJSON}, true, retry, progress, 0},
		{"Stripe code under type idempotency_error", 409, `{"error":{"type":"idempotency_error","code":"idempotency_key_in_use"}}`, []string{appJSON}, true, retry, progress, 0},
		{"keyed 409 with Retry-After and no body", 409, "", []string{"Retry-After: 2"}, true, retry, progress, 2 * time.Second},
		{"keyed 409 with Retry-After and a prose body", 409, "try later", []string{"Retry-After: 2", "Content-Type: text/plain"}, true, retry, progress, 2 * time.Second},

		// Payload mismatch.
		{"draft 422 already used", 422, draftMismatch, []string{problemJSON}, true, terminal, mismatch, 0},
		{"draft title on a 409 (the server's choice of status)", 409, draftMismatch, []string{problemJSON, "Retry-After: 1"}, true, terminal, mismatch, 0},
		{"our type 422", 422, ourMismatch, []string{problemJSON}, true, terminal, mismatch, 0},
		{"our type 409", 409, `{"type":"https://github.com/resilienthttp/resilient/problems/payload-mismatch"}`, []string{problemJSON}, true, terminal, mismatch, 0},
		{"Stripe 400 idempotency_error", 400, stripeMismatch, []string{appJSON}, true, terminal, mismatch, 0},
		{"Stripe idempotency_error on a 409", 409, stripeMismatch, []string{appJSON}, true, terminal, mismatch, 0},

		// Unkeyed: never an idempotency answer.
		{"unkeyed draft 409 in progress", 409, draftInProgress, []string{problemJSON}, false, terminal, conflict, 0},
		{"unkeyed Stripe in use", 409, stripeInUse, []string{appJSON}, false, terminal, conflict, 0},
		{"unkeyed 409 with Retry-After", 409, "", []string{"Retry-After: 1"}, false, terminal, conflict, 0},
		{"unkeyed draft 422 already used", 422, draftMismatch, []string{problemJSON}, false, terminal, invalid, 0},
		{"unkeyed Stripe 400 idempotency_error", 400, stripeMismatch, []string{appJSON}, false, terminal, invalid, 0},
		{"unkeyed 409 containing 'mismatch' is CategoryConflict, not payload mismatch", 409,
			`{"title":"payload mismatch","code":"CONFLICT.idempotency.payload_mismatch"}`, []string{problemJSON}, false, terminal, conflict, 0},

		// Words in prose are not answers.
		{"keyed 409 with 'concurrent' in prose is not retried", 409, `{"title":"Conflict","detail":"concurrent modification of the order"}`, []string{problemJSON}, true, terminal, conflict, 0},
		{"keyed 409 'in progress' in a title that is not the draft's", 409, `{"title":"request in progress"}`, []string{problemJSON}, true, terminal, conflict, 0},
		{"keyed 409 'mismatch' in prose", 409, `{"title":"Conflict","detail":"version mismatch"}`, []string{problemJSON}, true, terminal, conflict, 0},
		{"keyed 422 'mismatch' in prose", 422, `{"title":"currency mismatch"}`, []string{problemJSON}, true, terminal, invalid, 0},
		{"keyed 409 mismatch code without a recognised type", 409, `{"code":"CONFLICT.idempotency.payload_mismatch"}`, []string{problemJSON}, true, terminal, conflict, 0},
		{"type that merely ends like ours", 409, `{"type":"https://x/in-progress"}`, []string{problemJSON}, true, terminal, conflict, 0},
		{"draft title in a text/plain body", 409, draftInProgress, []string{"Content-Type: text/plain"}, true, terminal, conflict, 0},
		{"draft title without a Content-Type", 422, draftMismatch, nil, true, terminal, invalid, 0},
		{"draft title in application/json, not a problem", 422, draftMismatch, []string{appJSON}, true, terminal, invalid, 0},
		{"Stripe shape with error as a string", 409, `{"error":"idempotency_error"}`, []string{appJSON}, true, terminal, conflict, 0},
		{"Stripe shape with another type", 400, `{"error":{"type":"invalid_request_error","code":"parameter_missing"}}`, []string{appJSON}, true, terminal, invalid, 0},

		// Malformed, truncated or odd bodies are no answer.
		{"malformed JSON", 409, `{"type":"https://github.com/resilienthttp/resilient/problems/in-progress`, []string{problemJSON}, true, terminal, conflict, 0},
		{"two objects", 422, ourMismatch + ourMismatch, []string{problemJSON}, true, terminal, invalid, 0},
		{"answer past the first 4 KiB", 422, `{"detail":"` + strings.Repeat("x", 5000) + `","type":"https://github.com/resilienthttp/resilient/problems/payload-mismatch"}`, []string{problemJSON}, true, terminal, invalid, 0},
		{"JSON array", 409, `[1,2]`, []string{problemJSON}, true, terminal, conflict, 0},
		{"keyed 409 with an empty body", 409, "", []string{problemJSON}, true, terminal, conflict, 0},
		{"malformed Retry-After is ignored", 409, "", []string{"Retry-After: soon"}, true, terminal, conflict, 0},

		// The draft's 400 for a missing key is a validation error.
		{"draft 400 missing key", 400, draftMissing, []string{problemJSON}, true, terminal, invalid, 0},
		{"suffix +json is JSON", 409, stripeInUse, []string{"Content-Type: application/vnd.api+json"}, true, retry, progress, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := response(tc.code, tc.body, tc.headers...)
			d := resilient.DefaultClassifier(outcome(http.MethodPost, tc.keyed, resp, nil))
			assert.Equal(t, tc.action, d.Action)
			assert.Equal(t, tc.category, d.Category)
			assert.Equal(t, tc.delay, d.Delay)
			assert.Equal(t, tc.category == progress, d.Unknown, "an operation in progress may commit")
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b), "the classifier leaves the body intact")
		})
	}
}

// TestDefaultClassifierReadsNoProse: the body of an answer whose
// Content-Type is not JSON is never read.
func TestDefaultClassifierReadsNoProse(t *testing.T) {
	for _, ct := range []string{"", "text/plain", "text/html", "application/jsonx", "application/xml"} {
		resp := response(409, draftInProgress, "Content-Type: "+ct)
		body := resp.Body
		d := resilient.DefaultClassifier(outcome(http.MethodPost, true, resp, nil))
		assert.Equal(t, resilient.CategoryConflict, d.Category, "%q", ct)
		assert.Equal(t, body, resp.Body, "%q: body not peeked", ct)
	}
}

// TestDefaultClassifierAllocs: classifying the common outcomes allocates
// nothing.
func TestDefaultClassifierAllocs(t *testing.T) {
	for _, tc := range benchOutcomes() {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.outcome
			allocs := testing.AllocsPerRun(100, func() { _ = resilient.DefaultClassifier(o) })
			assert.Zero(t, allocs)
		})
	}
}

type namedOutcome struct {
	name    string
	outcome resilient.Outcome
}

// benchOutcomes are the outcomes TestDefaultClassifierAllocs and
// BenchmarkDefaultClassifier classify. Their bodies are never read, so they
// can be classified any number of times.
func benchOutcomes() []namedOutcome {
	return []namedOutcome{
		{"200", outcome(http.MethodPost, true, response(200, "", "Content-Type: application/json"), nil)},
		{"unkeyed GET 200", outcome(http.MethodGet, false, response(200, "", "Content-Type: application/json"), nil)},
		{"503 Retry-After", outcome(http.MethodPost, true, response(503, "", "Retry-After: 2"), nil)},
		{"429 RateLimit", outcome(http.MethodPost, true, response(429, "", `RateLimit: "default";r=0;t=3`), nil)},
		{"keyed 409 without body", outcome(http.MethodPost, true, response(409, ""), nil)},
		{"network error", outcome(http.MethodPost, true, nil, readErr())},
		{"dial error", outcome(http.MethodPost, false, nil, dialErr())},
	}
}

func BenchmarkDefaultClassifier(b *testing.B) {
	for _, tc := range benchOutcomes() {
		b.Run(tc.name, func(b *testing.B) {
			o := tc.outcome
			b.ReportAllocs()
			for b.Loop() {
				_ = resilient.DefaultClassifier(o)
			}
		})
	}
	// A keyed 409 with a problem body: peeks and decodes it each time.
	b.Run("keyed 409 problem body", func(b *testing.B) {
		resp := response(409, draftInProgress, problemJSON)
		o := outcome(http.MethodPost, true, resp, nil)
		rd := strings.NewReader(draftInProgress)
		body := io.NopCloser(rd)
		b.ReportAllocs()
		for b.Loop() {
			rd.Reset(draftInProgress)
			resp.Body = body
			_ = resilient.DefaultClassifier(o)
		}
	})
}

// Regression: X-Should-Retry: false on a 2xx turns a success into Terminal: the earlier
// ambiguous attempt is never cleared, store stays Pending, outcome "terminal".
func TestShouldRetryHintLeavesSuccessAlone(t *testing.T) {
	store := persist.NewMemory()
	s := stubtest.New(stubtest.Fail(readErr()), stubtest.Reply(201, "Idempotency-Status: replayed", "Stripe-Should-Retry: false"))
	rep := new(resilient.Report)
	ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), "op"), rep)
	resp, err := do(t, resilient.NewTransport(s, fast(resilient.WithStore(store))...), stubtest.Post(ctx, "{}"))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, resilient.Success, rep.Attempts[1].Action)
	assert.False(t, rep.Unknown, "a replayed 201 answers for attempt 0")
	p, _ := store.Pending(context.Background())
	assert.Empty(t, p)
}
