package fakeserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/resilienthttp/resilient/idempotency"
)

// MaxKeyLength is the longest Idempotency-Key accepted, in bytes after
// unquoting; a longer key is answered with 400.
const MaxKeyLength = idempotency.MaxKeyLength

// noLease is the lease of a claim: none. A claim lasts until its request
// settles it (stored, or released when it fails or its client goes away).
const noLease = 100 * 365 * 24 * time.Hour

// scope identifies an idempotency record, for the ledger's count of effects
// per record: the principal (SHA-256 of the Authorization header, never the
// header itself), the method and route, and the key.
type scope struct {
	principal [sha256.Size]byte
	route     string // e.g. "POST /v1/charges"
	key       string
}

// principalOf hashes the Authorization header; no header is the zero principal.
func principalOf(r *http.Request) [sha256.Size]byte {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256([]byte(auth))
}

// tenantRoute is the middleware's route: the path, after the principal's
// id when there is one, so that two principals' keys are two operations.
func tenantRoute(r *http.Request) string {
	if id := principalID(principalOf(r)); id != "" {
		return id + " " + r.URL.Path
	}
	return r.URL.Path
}

// response is a complete answer: what an idempotency record stores and replays.
// It is never modified once built.
type response struct {
	status int
	header http.Header
	body   []byte
}

// newStore returns the store of the idempotency records: package
// idempotency's MemoryStore, bounded, checking the payload before the run in
// progress (a key reused with another payload is told so at once).
func newStore(maxRecords int) *idempotency.MemoryStore {
	return idempotency.NewMemoryStore(idempotency.MaxRecords(maxRecords), idempotency.MismatchFirst())
}

// mount builds cfg's middleware over store: package idempotency in the
// configuration of the scenario. The records keep every header an answer of
// fakeserver's may carry: the package's defaults, Retry-After, and those of
// the scenario's faults and of the faults enqueued.
func (s *Server) mount(cfg *config, store *idempotency.MemoryStore, enqueued ...Fault) {
	headers := append(slices.Clone(idempotency.DefaultHeaders), "Retry-After")
	if cfg.idem != nil {
		headers = cfg.headers
	}
	for _, r := range cfg.sc.Routes {
		headers = faultHeaders(headers, r.Script)
		headers = faultHeaders(headers, r.Mix)
	}
	cfg.headers = faultHeaders(headers, enqueued)
	storage := idempotency.StorageIETF
	if cfg.stripe {
		storage = idempotency.StorageStripe
	}
	mw, err := idempotency.New(store, idempotency.Config{
		Route:          tenantRoute, // a key is scoped by principal, as Stripe scopes it by account
		Fingerprint:    idempotency.JSONBody,
		TTL:            cfg.ttl,
		Lease:          noLease,
		MaxBody:        maxBodyBytes,
		MaxAnswer:      4 * maxBodyBytes,
		Headers:        cfg.headers,
		RetryAfter:     cfg.inProgressRetryAfter,
		Storage:        storage,
		MismatchStatus: cfg.mismatchStatus,
		Now:            s.now,
	})
	if err != nil { // cannot happen: the scenario was validated
		panic("fakeserver: " + err.Error())
	}
	cfg.store, cfg.idem = store, mw.Handler(http.HandlerFunc(s.serveClaimed))
}

// faultHeaders adds to headers the names of the headers of faults, once.
func faultHeaders(headers []string, faults []Fault) []string {
	for _, f := range faults {
		for k := range f.Headers {
			if k = http.CanonicalHeaderKey(k); !slices.Contains(headers, k) {
				headers = append(slices.Clip(headers), k)
			}
		}
	}
	return headers
}

// post is a keyed POST on its way through the middleware: what the handler
// needs, and what it did.
type post struct {
	ctx        context.Context // the request's own: the handler's context is detached from it
	f          Fault
	sc         scope
	collection string
	obj        map[string]any
	body       []byte
	ran        bool      // the handler ran: the key was claimed
	abort      abortKind // how to drop the connection, when drop is set
	drop       bool
}

type postKey struct{}

// serveKeyed serves a keyed POST through package idempotency. Its faults stay
// fakeserver's: the part before the effect runs in the handler when the key
// is claimed, else before the replay, the 409 or the mismatch is sent; the
// part on the transmission acts on whatever is sent.
func (s *Server) serveKeyed(w http.ResponseWriter, r *http.Request, cfg *config, f Fault, p *post) {
	p.ctx, p.f = r.Context(), f
	mr := r.Clone(context.WithValue(context.WithoutCancel(r.Context()), postKey{}, p))
	mr.URL.Path = "/v1/" + p.collection
	mr.Body, mr.ContentLength = io.NopCloser(bytes.NewReader(p.body)), int64(len(p.body))
	rec := &capture{header: http.Header{}}
	cfg.idem.ServeHTTP(rec, mr)
	if p.drop {
		abortConn(w, p.abort) // the claim is released
	}
	resp, mark := rec.response()
	if p.ran {
		s.send(w, r, resp, mark, f)
		return
	}
	if fr := s.pre(w, r, f); fr != nil {
		s.send(w, r, fr, "", f)
		return
	}
	switch {
	case mark == statusReplayed:
		s.stats.replays.Add(1)
		s.send(w, r, resp, statusReplayed, f)
	case resp.status == http.StatusConflict && bytes.Contains(resp.body, []byte(ProblemTypeBase+"in-progress")):
		s.stats.conflicts.Add(1)
		s.send(w, r, problemInProgress(cfg.inProgressRetryAfter), "", f)
	default: // mismatch
		s.stats.mismatches.Add(1)
		s.send(w, r, problemMismatch(cfg.mismatchStatus), "", f)
	}
}

// serveClaimed is the handler behind the middleware, run once the key is
// claimed: the fault before the effect, then the effect. A dropped connection
// answers 429, which every storage policy releases, and is dropped once the
// middleware has released the claim.
func (s *Server) serveClaimed(w http.ResponseWriter, r *http.Request) {
	p := r.Context().Value(postKey{}).(*post)
	p.ran = true
	resp, abort, ok := s.preFault(p.ctx, p.f)
	if !ok {
		p.drop, p.abort = true, abort
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if resp == nil {
		resp = s.create(p.collection, p.obj, p.sc, true)
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

// capture records the middleware's answer, for fakeserver to send it with
// its faults.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(b)
}

// response returns the captured answer without the headers send sets, and
// its Idempotency-Status.
func (c *capture) response() (*response, string) {
	mark := c.header.Get("Idempotency-Status")
	h := c.header.Clone()
	for k := range h {
		if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Idempotency-Status") {
			delete(h, k)
		}
	}
	return &response{status: c.status, header: h, body: c.body.Bytes()}, mark
}
