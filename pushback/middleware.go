package pushback

import (
	"bufio"
	"net"
	"net/http"
)

// Middleware returns a handler that serves requests with next under b:
//
//   - a retry is admitted while the budget allows it; otherwise it gets a
//     pushback answer and next never sees it;
//   - with MaxInFlight set, a retry is refused once RetryInFlightShare of
//     MaxInFlight are in service, a first attempt once MaxInFlight are;
//   - next's answer is counted (healthy or failure) and, if it is a failure
//     (status 500 or above, or 429) while the budget is exhausted, it
//     carries X-Should-Retry: false and a Retry-After (unless next set
//     one), so that clients do not send the retry the budget would refuse.
//
// next sees a ResponseWriter that wraps the server's to read the status; its
// Unwrap method returns the server's, so http.ResponseController works
// (Flush, Hijack, deadlines), and it implements http.Flusher. Type
// assertions for other interfaces (http.Hijacker, io.ReaderFrom) on it
// fail: use http.ResponseController. A request that next answers by
// panicking (http.ErrAbortHandler) counts as a failure sent without
// pushback: its client may retry.
func (b *Budget) Middleware(next http.Handler) http.Handler {
	return &handler{b: b, next: next}
}

// handler is what Middleware returns.
type handler struct {
	b    *Budget
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b := h.b
	now := b.now()
	inFlight := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	if b.isRetry(r, now) {
		if ok, reason := b.admitRetry(now, inFlight); !ok {
			b.ans.refuse(w, reason, r, now)
			return
		}
	} else if !b.admitFirst(inFlight) {
		b.ans.refuse(w, reasonOverload, r, now)
		return
	}

	rec := b.pool.Get().(*recorder)
	*rec = recorder{ResponseWriter: w, b: b, req: r}
	defer b.finish(rec)
	h.next.ServeHTTP(rec, r)
	rec.returned = true
}

// finish counts the outcome of rec's request and returns rec to the pool
// if the handler returned normally. After a panic the handler's goroutines
// may still hold rec, so it is left to the garbage collector.
func (b *Budget) finish(rec *recorder) {
	if !rec.returned {
		b.settle(b.now(), 0, rec.hinted)
		return
	}
	if rec.hijacked {
		// A connection taken over (a WebSocket upgrade) is no answer:
		// neither healthy nor a failure.
		*rec = recorder{}
		b.pool.Put(rec)
		return
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK // net/http answers 200 for a handler that wrote nothing
	}
	b.settle(b.now(), status, rec.hinted)
	*rec = recorder{}
	b.pool.Put(rec)
}

// recorder is the ResponseWriter next sees: it notes the final status and
// adds the pushback headers to a failure answer while the budget is
// exhausted.
type recorder struct {
	http.ResponseWriter
	b        *Budget
	req      *http.Request // the request answered
	status   int           // the final status written, 0 before
	hinted   bool          // the answer carries pushback
	returned bool          // the handler returned (did not panic)
	hijacked bool          // the handler took the connection over (an upgrade)
}

// WriteHeader notes the first final status (1xx answers are passed through)
// and, for a failure while the budget is exhausted, adds the pushback
// headers before the header is sent.
func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
		if !healthy(code) {
			if now := rec.b.now(); rec.b.exhausted(now) {
				rec.b.ans.hint(rec.ResponseWriter.Header(), rec.req, now)
				rec.hinted = true
			}
		}
	}
	rec.ResponseWriter.WriteHeader(code)
}

// Write writes p, after an implicit 200 if no status was written.
func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.ResponseWriter.Write(p)
}

// Flush sends what was written so far, if the server's ResponseWriter can.
func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// Hijack takes the connection over, if the server's ResponseWriter can
// (http.Hijacker, directly or through http.ResponseController); such a
// request counts neither as a healthy answer nor as a failure.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(rec.ResponseWriter).Hijack()
	if err == nil {
		rec.hijacked = true
	}
	return c, rw, err
}

// Unwrap returns the server's ResponseWriter, for http.ResponseController.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }
