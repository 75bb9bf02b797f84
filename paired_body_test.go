package resilient_test

// Paired tests of "what the server receives is what the request carries":
// every kind of body programs and SDKs hand net/http, over a bare client and
// a wrapped one, on each script: success at once; a retryable failure, then
// success; a call after an earlier failed call from the same site; an SDK's
// own loop, marked and unmarked. Every attempt either side sends must carry
// the caller's body and Content-Length byte for byte, and the wrapped
// outcome is never worse than the bare one. Each case runs in a synctest
// bubble over an in-memory network (pnPipeNet).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pbPayload is the body of call n: 59 bytes for a small body (the length
// of the azblob upload the class was found with), else size bytes.
func pbPayload(n, size int) []byte {
	if size == 0 {
		return []byte(fmt.Sprintf(`{"blob":"call %02d","data":"abcdefghijklmnopqrstuvwxyz0123"}`, n))
	}
	b := bytes.Repeat([]byte{'x'}, size)
	copy(b, strconv.Itoa(n))
	return b
}

// pbSeeker is azcore's policy.Request body: one io.ReadSeeker, which
// GetBody seeks back to its start and returns.
type pbSeeker struct{ *bytes.Reader }

func (pbSeeker) Close() error { return nil }

// pbKind is a kind of request body: it builds call n's request.
type pbKind struct {
	name string
	size int // 0: a small body (pbPayload)
	// build makes the request; dir is a temporary directory for files.
	build func(t *testing.T, ctx context.Context, url, dir string, body []byte) *http.Request
	// rewind: an SDK re-sends the same request after rewinding it
	// itself (azcore), rather than building a new one each try.
	rewind bool
}

// pbMethodKey is the context key of the method pbNew uses.
type pbMethodKey struct{}

func pbNew(t *testing.T, ctx context.Context, url string, body io.Reader) *http.Request {
	req, err := http.NewRequestWithContext(ctx, ctx.Value(pbMethodKey{}).(string), url, body)
	require.NoError(t, err)
	return req
}

func pbFile(t *testing.T, dir string, body []byte) *os.File {
	name := filepath.Join(dir, fmt.Sprintf("body-%d", time.Now().UnixNano()))
	require.NoError(t, os.WriteFile(name, body, 0o600))
	f, err := os.Open(name)
	require.NoError(t, err)
	return f
}

// pbKinds are the bodies under test.
func pbKinds() []pbKind {
	return []pbKind{
		{name: "bytes.Reader", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			return pbNew(t, ctx, url, bytes.NewReader(b))
		}},
		{name: "strings.Reader", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			return pbNew(t, ctx, url, strings.NewReader(string(b)))
		}},
		{name: "file with length", build: func(t *testing.T, ctx context.Context, url, dir string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, pbFile(t, dir, b))
			req.ContentLength = int64(len(b))
			return req
		}},
		{name: "file without length", build: func(t *testing.T, ctx context.Context, url, dir string, b []byte) *http.Request {
			return pbNew(t, ctx, url, pbFile(t, dir, b))
		}},
		{name: "io.Pipe", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			pr, pw := io.Pipe()
			go func() { _, err := pw.Write(b); pw.CloseWithError(err) }()
			return pbNew(t, ctx, url, pr)
		}},
		{name: "ReadSeeker rewound by GetBody", rewind: true, build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			body := pbSeeker{bytes.NewReader(b)}
			req := pbNew(t, ctx, url, body)
			req.ContentLength = int64(len(b))
			req.GetBody = func() (io.ReadCloser, error) {
				_, err := body.Seek(0, io.SeekStart)
				return body, err
			}
			return req
		}},
		{name: "GetBody fails", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, bytes.NewReader(b))
			req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("no rewind") }
			return req
		}},
		{name: "GetBody of another length", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, bytes.NewReader(b))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("short")), nil }
			return req
		}},
		{name: "longer than its ContentLength", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, io.NopCloser(bytes.NewReader(b)))
			req.ContentLength = 10 // net/http refuses it, sending nothing of it
			return req
		}},
		{name: "longer than its ContentLength, GetBody", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, bytes.NewReader(b))
			req.ContentLength = 10
			return req
		}},
		{name: "shorter than its ContentLength", build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, io.NopCloser(bytes.NewReader(b)))
			req.ContentLength = int64(len(b)) + 10
			return req
		}},
		{name: "over the replay buffer, GetBody", size: 1<<20 + 1, build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			return pbNew(t, ctx, url, bytes.NewReader(b))
		}},
		{name: "over the replay buffer, streamed", size: 1<<20 + 1, build: func(t *testing.T, ctx context.Context, url, _ string, b []byte) *http.Request {
			req := pbNew(t, ctx, url, io.NopCloser(bytes.NewReader(b)))
			req.ContentLength = int64(len(b))
			return req
		}},
	}
}

// pbScript is what the server answers the i-th request (from 1) of call n,
// and how the client makes its calls.
type pbScript struct {
	name  string
	calls int
	fail  func(n, i int) bool // true: a 503
	// loop: each call is an SDK's retry loop of up to 3 tries; marked:
	// it marks its tries (X-Stainless-Retry-Count).
	loop, marked bool
}

var pbScripts = []pbScript{
	{name: "success at once", calls: 1, fail: func(n, i int) bool { return false }},
	{name: "retryable failure then success", calls: 1, fail: func(n, i int) bool { return i == 1 }},
	{name: "a call after a failed call from the same site", calls: 2, fail: func(n, i int) bool { return n == 0 }},
	{name: "marked SDK loop", calls: 2, loop: true, marked: true, fail: pbLoopFails},
	{name: "unmarked loop", calls: 2, loop: true, fail: pbLoopFails},
}

// pbLoopFails fails the first call's first five requests (more than the
// Transport's own attempts: the loop re-sends) and the second call's
// first: the second call comes from a site whose call failed.
func pbLoopFails(n, i int) bool { return i <= 5-4*n }

// pbSent is what the server received in one request.
type pbSent struct {
	call   string
	body   []byte
	length int64
	err    error
}

// pbObs is one side's observation.
type pbObs struct {
	sent     []pbSent
	outcomes []string
}

// pbRank orders outcomes: an error, a failure status, a success.
func pbRank(outcome string) int {
	switch {
	case strings.HasPrefix(outcome, "2"):
		return 2
	case outcome != "" && outcome[0] >= '1' && outcome[0] <= '5' && len(outcome) == 3:
		return 1
	}
	return 0
}

// pbDo makes call n: once, or as an SDK's loop that rewinds the request
// (kind.rewind) or builds it anew for each try.
func pbDo(t *testing.T, ctx context.Context, c *http.Client, k pbKind, s pbScript, n int, dir string) string {
	url := "http://blob.test/container/blob"
	body := pbPayload(n, k.size)
	req := k.build(t, ctx, url, dir, body)
	req.Header.Set("X-Call", strconv.Itoa(n))
	tries := 1
	if s.loop {
		tries = 3
	}
	var outcome string
	for i := range tries {
		if s.marked {
			req.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(i))
		}
		resp, err := c.Do(req)
		outcome = pnOutcome(resp, err)
		if pbRank(outcome) == 2 || i == tries-1 {
			break
		}
		time.Sleep(100 * time.Millisecond << i) // the loop's backoff
		if k.rewind {
			// azcore: RewindBody seeks the body back, and the same request goes again.
			rs := req.Body.(io.ReadSeeker)
			_, err := rs.Seek(0, io.SeekStart)
			require.NoError(t, err)
			req = req.Clone(ctx)
			continue
		}
		h := req.Header
		req = k.build(t, ctx, url, dir, body)
		req.Header = h
	}
	return outcome
}

// pbRun runs s over kind k on one side, in a bubble.
func pbRun(t *testing.T, method string, k pbKind, s pbScript, wrap bool) pbObs {
	var obs pbObs
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		net := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			call := r.Header.Get("X-Call")
			mu.Lock()
			obs.sent = append(obs.sent, pbSent{call: call, body: b, length: r.ContentLength, err: err})
			seen[call]++
			i := seen[call]
			mu.Unlock()
			n, _ := strconv.Atoi(call)
			if s.fail(n, i) {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		defer net.close()
		c := &http.Client{Transport: net.tr}
		if wrap {
			c = resilient.Wrap(c)
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), pbMethodKey{}, method), 10*time.Minute)
		defer cancel()
		for n := range s.calls {
			obs.outcomes = append(obs.outcomes, pbDo(t, ctx, c, k, s, n, dir)) // one call site
		}
	})
	return obs
}

// TestPairedBodies: every attempt carries what the caller's request does,
// and wrapping is never worse, whatever the body.
func TestPairedBodies(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodPost} {
		for _, k := range pbKinds() {
			for _, s := range pbScripts {
				t.Run(method+"/"+k.name+"/"+s.name, func(t *testing.T) {
					pbCheck(t, k, pbRun(t, method, k, s, false), pbRun(t, method, k, s, true))
				})
			}
		}
	}
}

// pbCheck asserts that every request either side sent carried the caller's
// body and length, and that wrapped did no worse than bare.
func pbCheck(t *testing.T, k pbKind, bare, wrapped pbObs) {
	for side, obs := range map[string]pbObs{"bare": bare, "wrapped": wrapped} {
		for i, sent := range obs.sent {
			n, _ := strconv.Atoi(sent.call)
			want := pbPayload(n, k.size)
			wantLen := int64(len(want))
			if k.name == "file without length" || k.name == "io.Pipe" {
				wantLen = -1 // net/http sends it chunked
			}
			assert.NoError(t, sent.err, "%s: request %d (call %s)", side, i, sent.call)
			assert.True(t, bytes.Equal(want, sent.body), "%s: request %d (call %s) carries %d bytes, not the caller's %d", side, i, sent.call, len(sent.body), len(want))
			assert.Equal(t, wantLen, sent.length, "%s: request %d (call %s): Content-Length", side, i, sent.call)
		}
	}
	require.Len(t, wrapped.outcomes, len(bare.outcomes))
	for i := range bare.outcomes {
		assert.GreaterOrEqual(t, pbRank(wrapped.outcomes[i]), pbRank(bare.outcomes[i]),
			"call %d: wrapped %q is worse than bare %q", i, wrapped.outcomes[i], bare.outcomes[i])
	}
}

// TestStoreClaimBodies: a named operation's Store fingerprints the body
// before the first attempt; the attempt still carries the whole body, for
// a ReadSeeker that GetBody rewinds and returns (azcore's), within the
// replay buffer and over it.
func TestStoreClaimBodies(t *testing.T) {
	for _, size := range []int{0, 1<<20 + 1} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got [][]byte
				var mu sync.Mutex
				net := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					mu.Lock()
					got = append(got, b)
					mu.Unlock()
					w.WriteHeader(http.StatusCreated)
				})
				defer net.close()
				c := resilient.Wrap(&http.Client{Transport: net.tr}, resilient.WithStore(persist.NewMemory()))
				ctx := context.WithValue(resilient.ContextWithOperation(context.Background(), "upload-1"), pbMethodKey{}, http.MethodPut)
				want := pbPayload(0, size)
				k := pbKinds()[5] // ReadSeeker rewound by GetBody
				require.Equal(t, "ReadSeeker rewound by GetBody", k.name)
				resp, err := c.Do(k.build(t, ctx, "http://blob.test/c/b", "", want))
				if !assert.NoError(t, err) {
					return
				}
				resp.Body.Close()
				assert.Equal(t, http.StatusCreated, resp.StatusCode)
				require.Len(t, got, 1)
				assert.True(t, bytes.Equal(want, got[0]), "the server got %d bytes of %d", len(got[0]), len(want))
			})
		})
	}
}

// TestPairedBodiesReused: a hand-written loop gives the same *http.Request
// to Client.Do again without resetting its Body, which the earlier call
// consumed. A bare client re-sends it: net/http fails to write the spent
// body on the kept-alive connection, having written nothing, and sends a
// body from GetBody instead. Wrapped, the re-send must reach the server
// with the whole body too, whatever the method and the failure, and the
// call must do no worse.
func TestPairedBodiesReused(t *testing.T) {
	type loop struct {
		name  string
		twice bool // two calls whatever the answers; else until a success, up to 3
	}
	kinds := pbKinds()[:2] // bytes.Reader, strings.Reader: net/http sets GetBody
	for _, method := range []string{http.MethodPost, http.MethodPatch, http.MethodPut} {
		for _, status := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests} {
			for _, opts := range []struct {
				name string
				opts []resilient.Option
			}{{"default", nil}, {"one attempt", []resilient.Option{resilient.WithMaxAttempts(1)}}} {
				for _, l := range []loop{{"twice", true}, {"until success", false}} {
					for _, k := range kinds {
						t.Run(fmt.Sprintf("%s/%d/%s/%s/%s", method, status, opts.name, l.name, k.name), func(t *testing.T) {
							run := func(wrap bool) pbObs {
								return pbRunReused(t, method, status, k, l.twice, wrap, opts.opts)
							}
							pbCheck(t, k, run(false), run(true))
						})
					}
				}
			}
		}
	}
}

// pbRunReused runs TestPairedBodiesReused's loop on one side: the server
// answers its first request with status, and every other with 201.
func pbRunReused(t *testing.T, method string, status int, k pbKind, twice, wrap bool, opts []resilient.Option) pbObs {
	var obs pbObs
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		net := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			mu.Lock()
			obs.sent = append(obs.sent, pbSent{call: "0", body: b, length: r.ContentLength, err: err})
			first := len(obs.sent) == 1
			mu.Unlock()
			if first {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(status)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		defer net.close()
		c := &http.Client{Transport: net.tr}
		if wrap {
			c = resilient.Wrap(c, opts...)
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), pbMethodKey{}, method), 10*time.Minute)
		defer cancel()
		req := k.build(t, ctx, "http://api.test/v1/charges", "", pbPayload(0, k.size))
		for i := range 3 {
			obs.outcomes = append(obs.outcomes, pnOutcome(c.Do(req))) // the same request, its Body as the last call left it
			if (twice && i == 1) || (!twice && pbRank(obs.outcomes[i]) == 2) {
				break
			}
			time.Sleep(time.Second)
		}
		if !twice {
			obs.outcomes = obs.outcomes[len(obs.outcomes)-1:] // the loop's result
		}
	})
	return obs
}
