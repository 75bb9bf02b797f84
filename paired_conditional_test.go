package resilient_test

// Paired tests of conditional requests (see "Conditional requests" in the
// package documentation): a PATCH or POST under a strong precondition,
// bare and wrapped with default options, against a server that evaluates
// If-Match and If-None-Match as RFC 9110 has it, over an in-memory
// network in a synctest bubble (pnPipeNet). The server's resource has an
// ETag that changes whenever a request is applied; the connection of a
// chosen request is reset before or after the server applies it.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// etagResource is one resource behind a server that evaluates
// preconditions: its version is its strong ETag ("v1", "v2"…), and every
// request applied adds one to its version and to effects.
type etagResource struct {
	mu       sync.Mutex
	exists   bool
	version  int
	effects  int
	requests int
	// fault is what the server does to its n-th request (1 for the
	// first): "" answers, "before" resets the connection before applying
	// it, "after" resets it after applying it.
	fault func(n int) string
}

func (e *etagResource) etag() string { return fmt.Sprintf(`"v%d"`, e.version) }

// pass evaluates h's preconditions against the resource (RFC 9110,
// section 13.2.2: If-Match, then If-None-Match), with e.mu held.
func (e *etagResource) pass(h http.Header) bool {
	if im := h.Get("If-Match"); im != "" {
		if !e.exists {
			return false
		}
		if strings.TrimSpace(im) != "*" && !strongMatch(im, e.etag()) {
			return false
		}
	}
	if inm := h.Get("If-None-Match"); strings.TrimSpace(inm) == "*" && e.exists {
		return false
	}
	return true
}

// strongMatch reports whether the list of entity tags list holds tag,
// by strong comparison: a weak tag matches nothing.
func strongMatch(list, tag string) bool {
	for _, t := range strings.Split(list, ",") {
		if strings.TrimSpace(t) == tag {
			return true
		}
	}
	return false
}

func (e *etagResource) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	e.mu.Lock()
	e.requests++
	fault := e.fault(e.requests)
	if fault == "before" {
		e.mu.Unlock()
		pnHijackClose(w, r, nil)
		return
	}
	if !e.pass(r.Header) {
		etag := e.etag()
		e.mu.Unlock()
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusPreconditionFailed)
		io.WriteString(w, preconditionFailed)
		return
	}
	e.exists = true
	e.version++
	e.effects++
	etag := e.etag()
	e.mu.Unlock()
	if fault == "after" {
		pnHijackClose(w, r, nil)
		return
	}
	w.Header().Set("ETag", etag)
	io.WriteString(w, "applied")
}

// preconditionFailed is the test server's 412 body: more than one read of
// the client's.
var preconditionFailed = "precondition failed: " + strings.Repeat("x", 40<<10)

// faultOn returns a fault that hits request n only.
func faultOn(n int, what string) func(int) string {
	return func(i int) string {
		if i == n {
			return what
		}
		return ""
	}
}

// condObs is what one side of a paired conditional call observed.
type condObs struct {
	status   int    // the response's status, 0 if an error
	err      error  // the call's error
	body     string // the response's body, or the 412 in the *Error
	effects  int    // requests the server applied
	requests int    // requests the server got
	unknown  bool   // Report.Unknown, when the call had a Report
}

// condPair runs one conditional request on each side, in a bubble of its
// own, against a fresh resource: version 1 (it exists) unless missing.
// header sets the request's preconditions. report attaches a Report (which
// a bare client ignores): the wrapped call is then not a plain one.
// timeout is the client's Timeout (0: none).
func condPair(t *testing.T, method string, missing bool, header http.Header, fault func(int) string, report bool, timeout ...time.Duration) (bare, wrapped condObs) {
	t.Helper()
	for _, side := range compatSides {
		t.Run(side.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				res := &etagResource{exists: !missing, version: 1, fault: fault}
				n := newPipeNet(res.serve)
				defer n.close()
				c := &http.Client{Transport: n.tr}
				if len(timeout) > 0 {
					c.Timeout = timeout[0]
				}
				if side.wrap {
					c = resilient.Wrap(c)
				}
				ctx, rep := t.Context(), new(resilient.Report)
				if report {
					ctx = resilient.ContextWithReport(ctx, rep)
				}
				req, err := http.NewRequestWithContext(ctx, method, "http://api.test/v1/things/1", strings.NewReader(`{"name":"x"}`))
				require.NoError(t, err)
				for k, vs := range header {
					req.Header[k] = vs
				}
				var obs condObs
				resp, err := c.Do(req)
				obs.err = err
				if err == nil {
					obs.status = resp.StatusCode
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					obs.body = string(b)
				} else if re, ok := errors.AsType[*resilient.Error](err); ok && re.Response != nil {
					b, _ := io.ReadAll(re.Response.Body)
					re.Response.Body.Close()
					obs.body = string(b)
				}
				res.mu.Lock()
				obs.effects, obs.requests = res.effects, res.requests
				res.mu.Unlock()
				obs.unknown = rep.Unknown
				if side.wrap {
					wrapped = obs
				} else {
					bare = obs
				}
			})
		})
	}
	return bare, wrapped
}

// ifMatch is a request header with a strong If-Match on version 1.
var ifMatch = http.Header{"If-Match": {`"v1"`}}

// A PATCH or POST under a strong precondition whose first attempt is reset
// before the server applies it: a bare client fails, the wrapped one
// re-sends it and it is applied once. So is a create-only request
// (If-None-Match: *) to a resource that does not exist yet.
func TestPairedConditionalResetBeforeApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		missing bool
		header  http.Header
	}{
		{"PATCH If-Match", http.MethodPatch, false, ifMatch},
		{"POST If-Match", http.MethodPost, false, ifMatch},
		{"PATCH If-Match list", http.MethodPatch, false, http.Header{"If-Match": {`"v0", "v1"`}}},
		{"POST If-None-Match star", http.MethodPost, true, http.Header{"If-None-Match": {"*"}}},
		{"PROPPATCH If-Match, unkeyed", "PROPPATCH", false, ifMatch},
	} {
		for _, report := range []bool{false, true} {
			t.Run(fmt.Sprint(tc.name, " report=", report), func(t *testing.T) {
				bare, wrapped := condPair(t, tc.method, tc.missing, tc.header, faultOn(1, "before"), report)
				require.Error(t, bare.err, "bare: the reset is the caller's")
				assert.Equal(t, 0, bare.effects)
				require.NoError(t, wrapped.err)
				assert.Equal(t, http.StatusOK, wrapped.status)
				assert.Equal(t, "applied", wrapped.body)
				assert.Equal(t, 1, wrapped.effects, "applied once")
				assert.Equal(t, 2, wrapped.requests)
				assert.False(t, wrapped.unknown, "the success answers for the reset attempt: its precondition held")
			})
		}
	}
}

// A PATCH or POST under a strong precondition whose first attempt is reset
// after the server applied it: the wrapped re-send fails its precondition
// (412), and the caller gets an *Error with Unknown set, the 412 in it.
// One effect, never two, as from a bare client.
func TestPairedConditionalResetAfterApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		missing bool
		header  http.Header
	}{
		{"PATCH If-Match", http.MethodPatch, false, ifMatch},
		{"POST If-Match", http.MethodPost, false, ifMatch},
		{"POST If-None-Match star", http.MethodPost, true, http.Header{"If-None-Match": {"*"}}},
		{"PUT If-None-Match star", http.MethodPut, true, http.Header{"If-None-Match": {"*"}}},
		{"PROPPATCH If-Match, unkeyed", "PROPPATCH", false, ifMatch},
	} {
		for _, timeout := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprint(tc.name, " client timeout ", timeout), func(t *testing.T) {
				condAfterApply(t, tc.method, tc.missing, tc.header, timeout)
			})
		}
	}
}

// condAfterApply is one case of TestPairedConditionalResetAfterApply.
// http.Client cancels the request of a RoundTrip that failed when it has
// a Timeout: the 412 in the *Error is read before that, whole (40 KiB).
func condAfterApply(t *testing.T, method string, missing bool, header http.Header, timeout time.Duration) {
	bare, wrapped := condPair(t, method, missing, header, faultOn(1, "after"), true, timeout)
	require.Error(t, bare.err)
	assert.Equal(t, 1, bare.effects)
	assert.Equal(t, 1, wrapped.effects, "never two effects")
	assert.Equal(t, 2, wrapped.requests, "re-sent once")
	re, ok := errors.AsType[*resilient.Error](wrapped.err)
	require.True(t, ok, "an *Error, not a bare 412: %v", wrapped.err)
	assert.True(t, re.Unknown, "the first attempt may have applied it")
	assert.Equal(t, http.StatusPreconditionFailed, re.StatusCode)
	assert.Equal(t, resilient.CategoryPrecondition, re.Category)
	require.NotNil(t, re.Response)
	assert.Equal(t, http.StatusPreconditionFailed, re.Response.StatusCode)
	assert.Equal(t, `"v2"`, re.Response.Header.Get("ETag"))
	assert.Equal(t, len(preconditionFailed), len(wrapped.body), "the 412's body can be read whole")
	assert.Contains(t, re.Error(), "outcome unknown")
	assert.True(t, wrapped.unknown, "Report.Unknown")
}

// A 412 on a first attempt is the server's plain answer: returned as a
// bare client gets it, once sent.
func TestPairedConditionalFirst412(t *testing.T) {
	stale := http.Header{"If-Match": {`"v0"`}}
	for _, method := range []string{http.MethodPatch, http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			bare, wrapped := condPair(t, method, false, stale, faultOn(0, ""), false)
			require.NoError(t, bare.err)
			require.NoError(t, wrapped.err)
			assert.Equal(t, bare, wrapped)
			assert.Equal(t, http.StatusPreconditionFailed, wrapped.status)
			assert.Equal(t, 1, wrapped.requests)
			assert.Equal(t, 0, wrapped.effects)
		})
	}
}

// Preconditions that a request applied once passes again are no evidence:
// If-Match: * (the resource still exists), a weak tag,
// If-Unmodified-Since, a tag in If-None-Match. A PATCH under one of them,
// reset after it was applied, is sent once, as from a bare client.
func TestPairedConditionalNoEvidence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"If-Match star", http.Header{"If-Match": {"*"}}},
		{"If-Match weak", http.Header{"If-Match": {`W/"v1"`}}},
		{"If-Unmodified-Since", http.Header{"If-Unmodified-Since": {"Sun, 29 Nov 2026 05:00:00 GMT"}}},
		{"If-None-Match tag", http.Header{"If-None-Match": {`"v0"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bare, wrapped := condPair(t, http.MethodPatch, false, tc.header, faultOn(1, "after"), false)
			assert.Equal(t, bare.requests, wrapped.requests, "requests the server got")
			assert.Equal(t, 1, wrapped.requests)
			assert.Equal(t, bare.effects, wrapped.effects)
			if bare.err == nil { // a weak tag fails a strong comparison: 412 at once
				assert.Equal(t, bare.status, wrapped.status)
				return
			}
			assert.ErrorIs(t, wrapped.err, resilient.ErrUnsafeRetry)
		})
	}
}
