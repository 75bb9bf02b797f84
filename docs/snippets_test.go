// Package docs_test runs the Go blocks of README.md and docs/*.md: each
// block is the code of a test or an Example with its output, somewhere in
// the repository, and TestGoBlocksRun checks that it is.
package docs_test

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist/bolt"
	"github.com/resilienthttp/resilient/pushback"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, from this package's directory.
const root = ".."

// pages are the Markdown files whose Go blocks must run: README.md,
// idempotency/README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	return append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "idempotency", "README.md")}, docs...)
}

// goBlocks returns the ```go blocks of a Markdown file, each with the line
// of its opening fence.
func goBlocks(md string) (blocks []string, lines []int) {
	var cur []string
	in := false
	start := 0
	for i, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in, cur, start = true, nil, i+1
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks, lines = append(blocks, strings.Join(cur, "\n")), append(lines, start)
		case in:
			cur = append(cur, l)
		}
	}
	return blocks, lines
}

// codeLines is src's non-blank lines, trimmed, with their 1-based numbers:
// a block matches a file whatever its indentation.
func codeLines(src string) (text []string, num []int) {
	for i, l := range strings.Split(src, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			text, num = append(text, l), append(num, i+1)
		}
	}
	return text, num
}

// find returns the first and last line of block in src, or 0, 0.
func find(src, block string) (first, last int) {
	f, fn := codeLines(src)
	b, _ := codeLines(block)
	if len(b) == 0 {
		return 0, 0
	}
outer:
	for i := 0; i+len(b) <= len(f); i++ {
		for j := range b {
			if f[i+j] != b[j] {
				continue outer
			}
		}
		return fn[i], fn[i+len(b)-1]
	}
	return 0, 0
}

// runs says whether lines first..last of a test file are run by go test:
// inside a Test function, inside an Example with an output comment, or a
// whole function that a Test of the same file calls.
func runs(path string, src []byte, first, last int) (string, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return err.Error(), false
	}
	called := map[string]bool{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fd.Name.Name, "Test") {
			ast.Inspect(fd, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok {
						called[id.Name] = true
					}
				}
				return true
			})
		}
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		from, to := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		if first < from || last > to {
			continue
		}
		name := fd.Name.Name
		switch {
		case strings.HasPrefix(name, "Test"):
			return name, true
		case strings.HasPrefix(name, "Example"):
			for _, cg := range f.Comments {
				if cg.Pos() > fd.Body.Lbrace && cg.End() < fd.Body.Rbrace && strings.Contains(cg.Text(), "Output:") {
					return name, true
				}
			}
			return name + " (an Example without an output comment, which go test compiles but does not run)", false
		case first == from && last == to && called[name]:
			return name + " (called by a Test)", true
		}
		return name + " (neither a Test nor an Example)", false
	}
	return "no function", false
}

// TestGoBlocksRun: every Go block of README.md and docs/*.md is, indentation
// and blank lines aside, a run of lines of a _test.go file of the repository
// that go test runs (see runs), so the documents show code that compiles and
// runs in the test command (./scripts/test runs every module's tests).
func TestGoBlocksRun(t *testing.T) {
	tests := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			tests[p] = b
			return err
		}
		return nil
	}))
	total := 0
	for _, page := range pages(t) {
		md, err := os.ReadFile(page)
		require.NoError(t, err)
		blocks, lines := goBlocks(string(md))
		for i, block := range blocks {
			total++
			var where []string
			found := false
			for path, src := range tests {
				first, last := find(string(src), block)
				if first == 0 {
					continue
				}
				fn, ok := runs(path, src, first, last)
				where = append(where, path+": "+fn)
				found = found || ok
			}
			assert.True(t, found, "%s:%d: a Go block that no test runs (found in: %v)", page, lines[i], where)
		}
	}
	assert.GreaterOrEqual(t, total, 8, "the Go blocks of README.md and docs/")
}

// TestReportSnippet is README.md's "The outcome of a call": a POST answered
// 500 by a server not known to dedupe is returned as a bare client gets it,
// after one attempt, and the Report says why.
func TestReportSnippet(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	client := resilient.NewClient()
	ctx, url, body := context.Background(), srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`)

	var rep resilient.Report
	req, _ := http.NewRequestWithContext(resilient.ContextWithReport(ctx, &rep), http.MethodPost, url, body)
	resp, err := client.Do(req) // resp: the 500, as a bare client gets it
	// len(rep.Attempts) == 1, errors.Is(rep.Stopped, resilient.ErrUnsafeRetry)

	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Len(t, rep.Attempts, 1)
	assert.True(t, errors.Is(rep.Stopped, resilient.ErrUnsafeRetry), "Report.Stopped: %v", rep.Stopped)
	assert.Equal(t, int32(1), attempts.Load())
}

// TestPushbackSnippet is docs/fleets.md's pushback snippet: first attempts
// reach the API; a burst of retries that no healthy answers pay for is
// refused before the API sees it, with X-Should-Retry: false.
func TestPushbackSnippet(t *testing.T) {
	var reached atomic.Int32
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()

	budget := pushback.New(pushback.Config{})
	mux.Handle("/v1/", budget.Middleware(api))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(attempt string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{}`))
		require.NoError(t, err)
		if attempt != "" {
			req.Header.Set("Retry-Attempt", attempt)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusCreated, send("").StatusCode, "a first attempt")
	// The rule allows retries < 0.5 × healthy answers + 1/s over 10 s: with
	// each allowed retry answered 201, fewer than 40 retries pass in any
	// run shorter than 10 s, so 100 retries meet a refusal.
	refused := 0
	for range 100 {
		if send("1").Header.Get("X-Should-Retry") == "false" {
			refused++
		}
	}
	assert.Positive(t, refused, "retries refused with X-Should-Retry: false")
	assert.Equal(t, int32(101-refused), reached.Load(), "a refused retry never reaches the API")
}

// TestHedgingSnippet is docs/hedging.md's snippet: the first copy of a GET
// never answers (until the call cancels it), so the call completes only
// because the Transport hedged, and the hedge wins.
func TestHedgingSnippet(t *testing.T) {
	done := make(chan struct{})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		_, _ = io.WriteString(w, "fast")
	}))
	defer srv.Close()
	defer close(done)

	client := resilient.NewClient(resilient.WithHedging(resilient.HedgingConfig{
		Quantile: 0.95,                  // hedge after the host's recent p95 (the default)…
		Delay:    20 * time.Millisecond, // …and after 20 ms until 100 latencies are known
	}))

	var rep resilient.Report
	ctx, cancel := context.WithTimeout(resilient.ContextWithReport(context.Background(), &rep), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "fast", string(body))
	assert.Equal(t, 1, rep.Hedges)
	assert.True(t, rep.HedgeWon)
}

// TestPersistenceSnippet is docs/persistence.md's snippet: the operation's
// key is claimed from a bolt file before the attempt, sent, and marked done
// by the definitive answer, so nothing is left pending.
func TestPersistenceSnippet(t *testing.T) {
	keys := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("Idempotency-Key")
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	dataDir := t.TempDir()
	ctx := context.Background()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/refunds", bytes.NewReader([]byte(`{"charge":"ch_123"}`)))
	require.NoError(t, err)

	store, err := bolt.Open(filepath.Join(dataDir, "pending.db")) // persist/bolt: one fsync'd file, group-committed claims
	if err != nil {
		log.Fatal(err)
	}
	client := resilient.NewClient(resilient.WithStore(store))

	ctx = resilient.ContextWithOperation(ctx, "refund:ch_123") // the application's name for the operation
	resp, err := client.Do(req.WithContext(ctx))

	require.NoError(t, err)
	defer store.Close()
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, keys, 1, "one attempt")
	assert.NotEmpty(t, <-keys, "the operation's key, sent")
	pending, err := store.Pending(context.Background())
	require.NoError(t, err)
	assert.Empty(t, pending, "a definitive answer marks the operation done")
}
