package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoreKeys returns a middleware that turns the fake server into an API
// that knows nothing of idempotency keys (GitHub's, say): the handler behind
// it never sees the Idempotency-Key header, so every POST that reaches it
// creates a resource (one effect in the ledger). The fake server's faults,
// outages and capacity model are unchanged, so every row of the fault
// matrices applies to it as it is. Each answer that would show a client that
// the server dedupes (Idempotency-Status, Idempotent-Replayed, or the key
// echoed) adds one to shown, which must stay 0.
func ignoreKeys(shown *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Idempotency-Key")
			next.ServeHTTP(&evidenceWatch{ResponseWriter: w, shown: shown}, r)
		})
	}
}

// evidenceWatch counts the answers whose headers show dedupe by key.
type evidenceWatch struct {
	http.ResponseWriter
	shown   *atomic.Int64
	checked bool
}

func (e *evidenceWatch) WriteHeader(code int) {
	if !e.checked {
		e.checked = true
		h := e.Header()
		if h.Get("Idempotency-Status") != "" || h.Get("Idempotent-Replayed") != "" || h.Get("Idempotency-Key") != "" {
			e.shown.Add(1)
		}
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *evidenceWatch) Write(b []byte) (int, error) {
	if !e.checked {
		e.WriteHeader(http.StatusOK)
	}
	return e.ResponseWriter.Write(b)
}

// Flush and Hijack keep the fake server's slow bodies and dropped
// connections working through the watch.
func (e *evidenceWatch) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *evidenceWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(e.ResponseWriter).Hijack()
}

func (e *evidenceWatch) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// matrixRow is a row of one of the fault matrices and how to stand up its
// API: the fake server (its handler wrapped by wrap) behind the row's
// intermediary, if any.
type matrixRow struct {
	matrix string
	c      faultCase
	start  func(t *testing.T, c *faultCase, wrap func(http.Handler) http.Handler) (*fakeserver.Server, string)
}

// allRows returns every row of the three fault matrices (TestFaultMatrix,
// TestToxiproxyMatrix, TestNginxMatrix). tp starts the toxiproxy server
// the first time a toxiproxy row needs it.
func allRows(tp func() *toxiproxy.Client) []matrixRow {
	var rows []matrixRow
	for _, c := range faultRows() {
		rows = append(rows, matrixRow{"fake server", c, func(t *testing.T, c *faultCase, wrap func(http.Handler) http.Handler) (*fakeserver.Server, string) {
			return startAPI(t, c.scenario, chain(wrap, c.wrap))
		}})
	}
	cases, toxics := toxiproxyRows()
	for _, c := range cases {
		rows = append(rows, matrixRow{"toxiproxy", c, func(t *testing.T, c *faultCase, wrap func(http.Handler) http.Handler) (*fakeserver.Server, string) {
			return startThroughToxiproxy(t, tp(), c, toxics[c.name], wrap)
		}})
	}
	for _, c := range nginxRows() {
		rows = append(rows, matrixRow{"nginx", c, startThroughNginx})
	}
	return rows
}

// defaultsLoad is the workload of row c for the comparison with a bare
// client: at most 300 operations, as many workers, no options (the SDK's
// defaults), and the caller's deadline per operation: c.deadline, which
// turns the delays of the rows that retry past an attempt timeout into
// failures for both clients alike, else 2 s.
func defaultsLoad(c faultCase) load {
	l := load{
		ops:         min(scaled(c.load.ops), 300),
		concurrency: c.load.concurrency, // the capacity storm needs its 96 workers to hit the capacity
		pace:        c.load.pace,
		fresh:       c.load.fresh,
		opTimeout:   2 * time.Second,
		maxTime:     5 * time.Second,
	}
	if c.deadline > 0 {
		l.opTimeout = c.deadline
	}
	return l
}

// effectsByOp returns the fake server's effects per operation number (the
// "op" of chargeBody).
func effectsByOp(t *testing.T, srv *fakeserver.Server) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, e := range srv.Ledger() {
		var obj struct {
			Op *int `json:"op"`
		}
		require.NoError(t, json.Unmarshal(e.Object, &obj))
		require.NotNil(t, obj.Op, "effect %s has no operation number", e.ID)
		out[*obj.Op]++
	}
	return out
}

// comparison is one row of the table of TestNeverWorseThanBareClient.
type comparison struct {
	name                            string
	bareOps, bareSuccess, bareEff   int
	wrapOps, wrapSuccess, wrapEff   int
	wrapUnknown, refused, wrapExtra int // extra: attempts beyond the first
	violations                      int
}

// TestNeverWorseThanBareClient holds the SDK to its first principle
// (DESIGN.md, "never worse than a bare client") under every fault of the
// three fault matrices. For each row, the same workload of POSTs is sent
// with its defaults by resilient.Wrap(client) and by the bare client, each
// to its own API that ignores idempotency keys (ignoreKeys), and:
//
//   - per operation, effects(wrapped) ≤ max(1, effects(bare)): the SDK
//     causes no effect the bare client would not have (a bare client never
//     sends a POST twice, so this is at most one effect);
//   - in total, effects(wrapped) ≤ operations;
//   - an operation the SDK reports success has exactly one effect, and one
//     it reports failed (a *resilient.Error with Unknown false, or a final
//     4xx) has none.
//
// Success counts of both clients are logged side by side.
//
// Then the same workload, again with the SDK's defaults (nothing declares
// the fake server as deduping: it shows it by answering
// Idempotency-Status), runs against the fake server itself, which dedupes,
// and is held to the oracle of the package doc: exactly one effect per
// operation told success, at most one per key, none for one told failed.
func TestNeverWorseThanBareClient(t *testing.T) {
	var (
		once sync.Once
		tp   *toxiproxy.Client
	)
	startTP := func() *toxiproxy.Client {
		once.Do(func() { tp = startToxiproxy(t) })
		return tp
	}
	var rows []comparison
	var deduping []tally
	for _, row := range allRows(startTP) {
		name := row.matrix + ": " + row.c.name
		t.Run(name, func(t *testing.T) {
			run := func(wrap func(http.Handler) http.Handler, bare bool) ([]result, *fakeserver.Server, time.Duration) {
				c := row.c
				srv, url := row.start(t, &c, wrap)
				l := defaultsLoad(c)
				l.url, l.bare, l.during = url, bare, c.load.during
				results, elapsed := l.run(t)
				return results, srv, elapsed
			}
			var shown atomic.Int64
			bareRes, bareSrv, _ := run(ignoreKeys(&shown), true)
			wrapRes, wrapSrv, _ := run(ignoreKeys(&shown), false)
			rows = append(rows, compare(t, name, bareRes, effectsByOp(t, bareSrv), wrapRes, effectsByOp(t, wrapSrv)))
			assert.Zero(t, shown.Load(), "answers of the API that ignores keys showed dedupe by key")

			c := row.c
			if c.hits != nil {
				c.hits.Store(0)
			}
			srv, url := row.start(t, &c, nil)
			l := defaultsLoad(c)
			l.url, l.twins, l.during = url, c.load.twins, c.load.during
			results, elapsed := l.run(t)
			tl := check(t, name, results, srv, elapsed)
			if c.hits != nil {
				tl.injected += c.hits.Load()
			}
			deduping = append(deduping, tl)
		})
	}
	t.Log(comparisonTable(rows))
	t.Log(table("the same rows, SDK defaults, against the fake server (which dedupes)", deduping))
}

// compare applies the never-worse oracle of TestNeverWorseThanBareClient to
// the results and effects of the bare and wrapped runs of one row.
func compare(t *testing.T, name string, bare []result, bareEff map[int]int, wrapped []result, wrapEff map[int]int) comparison {
	t.Helper()
	cmp := comparison{name: name, bareOps: len(bare), wrapOps: len(wrapped)}
	var violations []string
	violate := func(format string, args ...any) {
		cmp.violations++
		if len(violations) < 10 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range bare {
		if r.err == nil && r.status >= 200 && r.status < 300 {
			cmp.bareSuccess++
			if bareEff[r.op] != 1 {
				violate("bare op %d: told %d, %d effects", r.op, r.status, bareEff[r.op])
			}
		}
	}
	for op, n := range bareEff {
		cmp.bareEff += n
		if n > 1 {
			violate("bare op %d: %d effects (the harness sends each POST once)", op, n)
		}
	}
	for op, n := range wrapEff {
		cmp.wrapEff += n
		if op >= len(wrapped) {
			violate("op %d: %d effects, but the wrapped client never started it", op, n)
		}
		if n > max(1, bareEff[op]) {
			violate("op %d: %d effects with the SDK, %d without", op, n, bareEff[op])
		}
	}
	if cmp.wrapEff > len(wrapped) {
		violate("%d effects for %d operations", cmp.wrapEff, len(wrapped))
	}
	for _, r := range wrapped {
		c, typed := classOf(r)
		if !typed {
			violate("op %d: error is not a *resilient.Error: %s", r.op, describe(r))
		}
		switch c {
		case success:
			cmp.wrapSuccess++
			if wrapEff[r.op] != 1 {
				violate("op %d told success but %d effects: %s", r.op, wrapEff[r.op], describe(r))
			}
		case failed:
			if wrapEff[r.op] != 0 {
				violate("op %d told failed but %d effects: %s", r.op, wrapEff[r.op], describe(r))
			}
		case unknown:
			cmp.wrapUnknown++
		}
		if errors.Is(r.err, resilient.ErrUnsafeRetry) || errors.Is(r.report.Stopped, resilient.ErrUnsafeRetry) {
			cmp.refused++
		}
		cmp.wrapExtra += max(0, len(r.report.Attempts)-1)
	}
	if cmp.violations > 0 {
		t.Errorf("%s: %d violations of never-worse-than-bare; the first ones:\n  %s", name, cmp.violations, strings.Join(violations, "\n  "))
	}
	return cmp
}

// comparisonTable renders the rows of TestNeverWorseThanBareClient.
func comparisonTable(rows []comparison) string {
	var b strings.Builder
	b.WriteString("never worse than a bare client: API that ignores keys, SDK defaults\n")
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "fault\tbare ops\tbare success\tbare effects\twrapped ops\twrapped success\twrapped unknown\twrapped effects\tunsafe re-sends refused\tretries sent\tviolations\t")
	var tot comparison
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.name, r.bareOps, r.bareSuccess, r.bareEff,
			r.wrapOps, r.wrapSuccess, r.wrapUnknown, r.wrapEff, r.refused, r.wrapExtra, r.violations)
		tot.bareOps += r.bareOps
		tot.bareSuccess += r.bareSuccess
		tot.bareEff += r.bareEff
		tot.wrapOps += r.wrapOps
		tot.wrapSuccess += r.wrapSuccess
		tot.wrapUnknown += r.wrapUnknown
		tot.wrapEff += r.wrapEff
		tot.refused += r.refused
		tot.wrapExtra += r.wrapExtra
		tot.violations += r.violations
	}
	fmt.Fprintf(w, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", tot.bareOps, tot.bareSuccess, tot.bareEff,
		tot.wrapOps, tot.wrapSuccess, tot.wrapUnknown, tot.wrapEff, tot.refused, tot.wrapExtra, tot.violations)
	w.Flush()
	return b.String()
}
