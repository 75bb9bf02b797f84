package resilient

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient/internal/clock"
	"github.com/resilienthttp/resilient/internal/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// updateDocs rewrites the docs' decision table from decisionRows:
// go test -run TestDecisionTable -update .
var updateDocs = flag.Bool("update", false, "rewrite docs/classification.md's decision table from decisionRows")

// fixedBackoff is a backoff without jitter, so that a row's delay is exact.
type fixedBackoff time.Duration

func (b fixedBackoff) Delay(int, time.Duration) time.Duration { return time.Duration(b) }

// decisionRow is a row of the decision table: an attempt's answer, as the
// classifier decided it (step 1), what is known of the request (step 2)
// and of the call (step 3), and what follows. The docs' table is made of
// these rows (docs/classification.md, "The decision, in order").
type decisionRow struct {
	answer  string // the answer, as the docs name it
	request string // the request, and what is known of its server
	call    string // the call's state, "" for a call with attempts left
	failed  bool   // the answer is an error, not a response
	status  int    // the answer's status code, when it is a response
	d       Decision
	// safe: the request is safe to re-send (an idempotent method, or a key
	// on an idempotent one): the guard is not asked. Else g is what it
	// reads, g.d being d.
	safe bool
	g    guardFacts
	f    facts // step 3; attempts, max and the rest default below
	// what follows: a retry after delay (if the host's gate admits it),
	// or the call ends with stop (nil: the answer is final).
	retry bool
	delay time.Duration
	stop  error
}

var (
	ok200      = Decision{Action: Success}
	notFound   = Decision{Action: Terminal, Category: CategoryNotFound}
	r503       = Decision{Action: Retry, Category: CategoryUnavailable}
	r503ra     = Decision{Action: Retry, Category: CategoryUnavailable, Delay: time.Second}
	r503long   = Decision{Action: Retry, Category: CategoryUnavailable, Delay: time.Minute}
	reset      = Decision{Action: Retry, Category: CategoryTransient}
	r429       = Decision{Action: Retry, Category: CategoryRateLimit, Delay: time.Second}
	busy409    = Decision{Action: Retry, Category: CategoryInProgress, Delay: 2 * time.Second}
	pushedBack = Decision{Action: Terminal, Category: CategoryUnavailable, Delay: time.Second, Pushback: true}
)

// decisionRows is the decision table, in the order of decide.go's steps.
var decisionRows = []decisionRow{
	{answer: "2xx", status: 200, request: "any", d: ok200, safe: true},
	{answer: "404, other terminal answers", status: 404, request: "any", d: notFound, safe: true},
	{answer: "pushback (`X-Should-Retry: false`)", status: 503, request: "any", d: pushedBack, safe: true},
	{answer: "503", status: 503, request: "GET, PUT, DELETE; any keyed idempotent request", d: r503, safe: true,
		retry: true, delay: 100 * time.Millisecond},
	{answer: "503 + `Retry-After: 1`", status: 503, request: "GET", d: r503ra, safe: true, retry: true, delay: time.Second},
	{answer: "503 + `Retry-After: 60`", status: 503, request: "GET", d: r503long, safe: true, stop: ErrDelayTooLong},
	{answer: "503", status: 503, request: "GET", call: "4 attempts sent of 4", d: r503, safe: true,
		f: facts{attempts: 4}, stop: ErrRetriesExhausted},
	{answer: "503", status: 503, request: "GET", call: "an outer loop sends the retries", d: r503, safe: true,
		f: facts{outer: true}, stop: ErrRetriesExhausted},
	{answer: "503", status: 503, request: "PUT", call: "the body cannot be sent again", d: r503, safe: true,
		f: facts{replayable: false}, stop: ErrBodyNotReplayable},
	{answer: "503", status: 503, request: "POST, the key from a Store", call: "the key too old when the retry would go",
		d: r503, safe: true, f: facts{key: keyAge{key: "k"}}, stop: ErrKeyExpired},
	{answer: "409 in progress + `Retry-After: 2`", status: 409, request: "keyed POST", d: busy409,
		g: guardFacts{unsafe: true, shown: true}, retry: true, delay: 2 * time.Second},
	{answer: "503", status: 503, request: "POST, minted key, nothing shows the server dedupes", d: r503,
		g: guardFacts{unsafe: true, ambiguous: true}, stop: ErrUnsafeRetry},
	{answer: "503 + `Retry-After: 1`", status: 503, request: "POST, minted key, nothing shows the server dedupes", d: r503ra,
		g: guardFacts{unsafe: true, ambiguous: true}, stop: ErrUnsafeRetry},
	{answer: "reset after the request was written", request: "POST without a key", failed: true, d: reset,
		g: guardFacts{ambiguous: true}, stop: ErrUnsafeRetry},
	{answer: "503 echoing the key", status: 503, request: "POST, minted key", d: r503,
		g: guardFacts{unsafe: true, shown: true, ambiguous: true}, retry: true, delay: 100 * time.Millisecond},
	{answer: "503", status: 503, request: "POST, minted key; an earlier answer on the route showed dedupe", d: r503,
		g: guardFacts{unsafe: true, evidence: true, ambiguous: true}, retry: true, delay: 100 * time.Millisecond},
	{answer: "503 + `Retry-After: 1`", status: 503, request: "POST to a declared deduping server (`WithDedupingServer`)", d: r503ra,
		g: guardFacts{unsafe: true, vouched: true, ambiguous: true}, retry: true, delay: time.Second},
	{answer: "503", status: 503, request: "POST with the application's own key", d: r503,
		g: guardFacts{unsafe: true, vouched: true, ambiguous: true}, retry: true, delay: 100 * time.Millisecond},
	{answer: "dial error (nothing sent)", request: "POST, with a key or without", failed: true, d: reset,
		g: guardFacts{notApplied: true, ambiguous: true}, retry: true, delay: 100 * time.Millisecond},
	{answer: "429 + `Retry-After: 1`", status: 429, request: "POST, with a key or without", d: r429,
		g: guardFacts{notApplied: true}, retry: true, delay: time.Second},
	{answer: "503", status: 503, request: "PATCH with `If-Match: \"v7\"`, no key", d: r503,
		g: guardFacts{guarded: true, ambiguous: true}, retry: true, delay: 100 * time.Millisecond},
}

// outcome runs row r through the decision: the guard (step 2) unless the
// request is safe, then decide (steps 3 and 4).
func (r decisionRow) outcome() (Decision, next) {
	d := r.d
	var stop error
	if !r.safe {
		g := r.g
		g.d = r.d
		d, stop = guard(&g)
	}
	f := r.f
	f.v = verdict{d: d, stop: stop}
	if f.max == 0 {
		f.max = 4
	}
	if f.delayMax == 0 {
		f.delayMax = 30 * time.Second
	}
	if !strings.Contains(r.call, "body") {
		f.replayable = true
	}
	f.backoff = fixedBackoff(100 * time.Millisecond)
	f.key.cfg = &config{clock: clock.New()} // no retention: no key is too old
	if f.key.key != "" {                    // the key's record was made a day ago, retention 24 h
		f.key = keyAge{key: "k", born: time.Now().Add(-24 * time.Hour), cfg: &config{keyRetention: 24 * time.Hour, clock: clock.New()}}
	}
	return d, decide(&f, nil)
}

// TestDecisionTable: each row of the decision table decides as it says,
// and docs/classification.md shows the table as the rows make it.
func TestDecisionTable(t *testing.T) {
	for _, r := range decisionRows {
		t.Run(r.answer+"/"+r.request+"/"+r.call, func(t *testing.T) {
			d, nx := r.outcome()
			assert.Equal(t, r.retry, nx.retry, "retried")
			assert.Equal(t, r.delay, nx.delay, "delay")
			assert.Equal(t, r.stop, nx.stop, "why the call ends")
			if r.stop == ErrUnsafeRetry {
				assert.Equal(t, Terminal, d.Action, "the guard makes the answer final")
				assert.Equal(t, r.g.ambiguous, d.Unknown, "an answer that may have been applied is unknown")
			}
			assert.Equal(t, r.d.Category == CategoryInProgress && r.retry, nx.polling, "a retry polling an operation in progress")
		})
	}
	const docs = "docs/classification.md"
	b, err := os.ReadFile(docs)
	require.NoError(t, err)
	got, err := spliceTable(string(b), renderDecisionTable())
	require.NoError(t, err)
	if *updateDocs {
		require.NoError(t, os.WriteFile(docs, []byte(got), 0o644))
		return
	}
	assert.Equal(t, string(b), got, "docs/classification.md's decision table is not decisionRows': go test -run TestDecisionTable -update .")
}

// The markers around the generated table in docs/classification.md.
const (
	tableStart = "<!-- the decision table: made by TestDecisionTable (decide_test.go) from decisionRows; go test -run TestDecisionTable -update . -->\n"
	tableEnd   = "<!-- end of the decision table -->\n"
)

// spliceTable returns doc with the text between the table's markers
// replaced by table.
func spliceTable(doc, table string) (string, error) {
	i := strings.Index(doc, tableStart)
	j := strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("the decision table's markers are missing")
	}
	return doc[:i+len(tableStart)] + table + doc[j:], nil
}

// renderDecisionTable renders decisionRows as the docs show them.
func renderDecisionTable() string {
	var b strings.Builder
	b.WriteString("| the answer (step 1) | the request (step 2) | the call (step 3) | what follows | the host hears |\n|---|---|---|---|---|\n")
	for _, r := range decisionRows {
		call := r.call
		if call == "" {
			call = "attempts left"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.answer, r.request, call, r.follows(), r.hears())
	}
	return b.String()
}

// follows says what follows row r's answer, from what the decision
// returned for it.
func (r decisionRow) follows() string {
	d, nx := r.outcome()
	switch {
	case nx.retry && nx.polling:
		return fmt.Sprintf("retried after %v, without a retry token (step 4)", nx.delay)
	case nx.retry && nx.delay == 100*time.Millisecond:
		return "retried after the backoff, if the host's gate admits it (step 4)"
	case nx.retry:
		return fmt.Sprintf("retried after %v (the server's delay), if the host's gate admits it (step 4)", nx.delay)
	case nx.stop == nil:
		return "the answer"
	case r.failed && d.Unknown:
		return fmt.Sprintf("an `*Error` with `Unknown`, its `Reason` `%s`", errName(nx.stop))
	case r.failed:
		return fmt.Sprintf("an `*Error`, its `Reason` `%s`", errName(nx.stop))
	}
	return fmt.Sprintf("the answer; `Report.Stopped` is `%s`", errName(nx.stop))
}

// errName is the root's name of a reason.
func errName(err error) string {
	for name, e := range map[string]error{"ErrDelayTooLong": ErrDelayTooLong, "ErrRetriesExhausted": ErrRetriesExhausted,
		"ErrBodyNotReplayable": ErrBodyNotReplayable, "ErrKeyExpired": ErrKeyExpired, "ErrUnsafeRetry": ErrUnsafeRetry} {
		if e == err {
			return name
		}
	}
	return err.Error()
}

// hears says what row r's answer tells its host (healthOf): what counts
// against it, for the retry tokens and the breaker.
func (r decisionRow) hears() string {
	var (
		resp *http.Response
		err  error
	)
	if r.failed {
		err = errors.New("connection reset by peer")
	} else {
		resp = &http.Response{StatusCode: r.status, Header: http.Header{}}
		if r.d.Delay > 0 {
			resp.Header.Set("Retry-After", strconv.Itoa(int(r.d.Delay/time.Second)))
		}
	}
	switch healthOf(resp, err, r.d) {
	case host.HealthOK:
		return "healthy"
	case host.HealthFailure:
		return "unhealthy"
	}
	return "nothing"
}
