package resilient

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient/internal/loops"
	"github.com/resilienthttp/resilient/internal/wire"
	"github.com/resilienthttp/resilient/persist"
)

// operation is the logical operation a RoundTrip carries out, resolved once
// before the first attempt: its key, its name, its replayable body. It alone
// talks to the Store, always within the caller's context.
type operation struct {
	key  string
	name string // ContextWithOperation's, "" if none
	body wire.ReplayBody
	// field is the header field name the key is sent under: the caller's
	// spelling when the caller set it, else the configured name.
	field string
	// own is true when the key is the application's: its header,
	// ContextWithKey, a named operation in a Store. The application vouches
	// that the server dedupes by it.
	own bool
	// unsafe is true when the request is keyed and its method is not
	// idempotent (call.resolve).
	unsafe bool
	// hop is true when the request is a redirect hop sent by http.Client
	// (req.Response set): it continues an operation already counted.
	hop bool
	// asIs is true when the first attempt is the caller's request itself.
	// That needs no key, no attempt timeout, no time budget header and no
	// hedging: each copy of a hedged request has its own context and
	// number. It needs no attempt header of the caller's to overwrite,
	// since a first attempt has none.
	// The body must be the caller's own: none, or one it can rewind. Then
	// the attempt would differ from the request in nothing.
	asIs bool
	// clipped is true when every value slice of the caller's header has no
	// spare capacity, so that a plain copy of the map is also clipped.
	clipped bool
	// attemptSet is true when the caller's header spells the attempt
	// header: each attempt overwrites it, the first included.
	attemptSet bool
	// born is when the Store's record of the key was created (zero
	// without one); see keyAge.
	born time.Time
}

// prepare resolves the operation of req, made in ctx, before anything is
// sent. It checks the request and chooses the key: identity, then an SDK's
// marks (outerKey). It prepares the body, for a claim in a Store if claims.
// It returns the SDK's call (nil without marks), or why the operation is
// refused. On refusal nothing was sent and the caller's body is closed.
// scan is the operation's call when failures are remembered, else nil. It
// finds the loop whose re-send a request without marks is, and the key it
// continues (call.recognise).
//
// hs is what wire.CheckRequest found of req, if hs.Checked; prepare checks req
// itself otherwise.
func (op *operation) prepare(cfg *config, ctx context.Context, req *http.Request, hs wire.HeaderScan, keys *wire.KeySource, pending *loops.Pending, claims bool, scan *call) (*outerCall, *refusal) {
	if !hs.Checked {
		var err error
		if hs, err = wire.CheckRequest(req, cfg.keyHeader, cfg.attemptHeader); err != nil {
			closeReqBody(req)
			return nil, &refusal{ErrInvalidRequest, CategoryTerminal, err}
		}
	}
	key, err := op.identity(cfg, ctx, req, keys, hs)
	if err != nil {
		closeReqBody(req)
		return nil, &refusal{ErrInvalidKey, CategoryClient, err} // never echo an invalid key
	}
	op.key = key
	// A claim fingerprints the body before anything is sent: a body
	// without GetBody is then read first; otherwise it is streamed.
	if err := op.body.Init(ctx, req, cfg.maxBodyBuffer, claims); err != nil {
		op.key = op.unsentKey(ctx)
		return nil, &refusal{ErrBodyNotReplayable, CategoryClient, err}
	}
	var o *outerCall
	switch {
	case hs.Marked:
		o, op.key = op.outerKey(cfg, req, pending) // an SDK's marks: loops.go
	case scan != nil:
		o, op.key = scan.recognise(op) // a loop without marks: loops.go
	}
	op.asIs = op.key == "" && cfg.attemptTimeout == 0 && !cfg.timeBudget && cfg.hedge == nil && !hs.AttemptSet && op.body.Callers()
	op.clipped, op.attemptSet = hs.Clipped, hs.AttemptSet
	return o, nil
}

// identity returns the operation's key. It is the caller's header, the
// context's key, or the key of the request this one is a redirect of. For
// the configured methods it may be a new one. identity notes whose it is
// (op.own, op.field). A Store claim may replace it later. hs is what
// wire.CheckRequest found: the key header field under another spelling than the
// canonical one (alt, "" if none), the method's bit. On error the key is
// not to be used.
func (op *operation) identity(cfg *config, ctx context.Context, req *http.Request, keys *wire.KeySource, hs wire.HeaderScan) (string, error) {
	if name, vs := wire.KeyField(req.Header, cfg.keyHeader, hs.Alt); len(vs) > 0 {
		op.own, op.field = true, name
		return vs[0], wire.ValidateKey(vs[0])
	}
	if k, ok := keyFromContext(ctx); ok {
		op.own = true
		return k, wire.ValidateKey(k)
	}
	op.own = op.name != "" && cfg.store != nil
	// http.Client follows a 307/308 by calling RoundTrip again with a new
	// request whose Response is the redirect; that response's Request is the
	// attempt we sent, with the key. Same method, same operation, same key.
	if prev := req.Response; prev != nil && prev.Request != nil && prev.Request.Method == req.Method {
		if k := wire.SentKey(prev.Request.Header, cfg.keyHeader, cfg.keyWire); k != "" {
			return k, nil
		}
	}
	if cfg.keyMethods.HasBit(hs.Method, req.Method) || (op.name != "" && cfg.store != nil) {
		if cfg.keyFunc == nil {
			return keys.Mint() // a UUIDv7: valid by construction
		}
		k, err := cfg.keyFunc()
		if err != nil {
			return "", err
		}
		return k, wire.ValidateKey(k)
	}
	return "", nil
}

// unsentKey returns the key of an operation whose call, in ctx, fails
// before sending it. It returns "" for a key that neither the application
// nor the Store holds. Error.Key names a key a caller can resolve an
// operation with, never one that went nowhere.
func (op *operation) unsentKey(ctx context.Context) string {
	if op.field != "" {
		return op.key // the caller's header
	}
	if _, ok := keyFromContext(ctx); ok {
		return op.key
	}
	return ""
}

// claim gets the operation's key from the Store before anything is sent.
// If the operation was claimed before, by this process or one that crashed,
// it is the stored key. Else it is the key chosen by identity, now made
// durable. claim runs within ctx, the caller's; req is the caller's
// request.
func (op *operation) claim(cfg *config, ctx context.Context, req *http.Request) *refusal {
	fp, err := op.body.Fingerprint(req)
	if err != nil {
		op.key = op.unsentKey(ctx)
		return &refusal{ErrBodyNotReplayable, CategoryClient, err}
	}
	now := cfg.now()
	// A minted key is a substring of a slab shared with 15 others (see
	// wire.KeySource.Mint): a Store keeps a copy of its own, not the slab.
	candidate := persist.Record{Operation: op.name, Key: strings.Clone(op.key), Fingerprint: fp, Created: now, State: persist.Pending}
	var (
		rec     persist.Record
		claimed bool
	)
	store := cfg.store // the closure captures no part of the call, which stays on the stack
	err = bounded(ctx, func(ctx context.Context) (err error) {
		rec, claimed, err = store.Claim(ctx, candidate)
		return err
	})
	if err != nil {
		// Nothing is sent without a durable key; the caller can repeat the
		// operation, which claims it again.
		op.key = op.unsentKey(ctx)
		return &refusal{ErrStore, CategoryClient, fmt.Errorf("claim %q: %w", op.name, err)}
	}
	if claimed {
		op.born = candidate.Created
		return nil
	}
	if err := wire.ValidateKey(rec.Key); err != nil {
		return &refusal{ErrInvalidKey, CategoryClient, fmt.Errorf("operation %q: stored key: %w", op.name, err)}
	}
	if rec.Fingerprint != fp {
		op.key = "" // neither key is this request's: the stored one is another's
		return &refusal{ErrOperationMismatch, CategoryClient, fmt.Errorf("operation %q", op.name)}
	}
	explicit := op.field != ""
	if _, ok := keyFromContext(ctx); ok {
		explicit = true
	}
	if explicit && rec.Key != op.key {
		op.key = ""
		return &refusal{ErrOperationMismatch, CategoryClient, fmt.Errorf("operation %q was claimed with another key", op.name)}
	}
	op.key, op.born = rec.Key, rec.Created
	// A pending key past retention may have been forgotten by the server; so
	// may a done one, whose re-send would then be a second effect. Its age
	// is taken now, after the Claim (which may have been slow).
	if err := op.keyAge(cfg, cfg.now()); err != nil {
		return &refusal{ErrKeyExpired, CategoryClient, err}
	}
	return nil
}

// refusal is why an operation is refused before anything is sent: the
// *Error's Reason, its Category, and the cause.
type refusal struct {
	reason error
	cat    Category
	err    error
}

// keyAge returns an error if the operation's key is, at the time at, as old
// as the key retention or older. A server that keeps keys that long forgets
// it then. Its age is from the earlier of its record's creation (a Store's)
// and its UUIDv7 timestamp. A key whose birth is unknown has no age: the
// application's own, not a UUIDv7. Every attempt is checked, retries
// included, at the time its backoff ends. A pause or a rate limit may make
// it go later.
func (op *operation) keyAge(cfg *config, at time.Time) error {
	return keyAgeAt(cfg, op.key, op.born, at)
}

// keyAgeAt is operation.keyAge for a key and the time its record was
// made (born, zero if none).
func keyAgeAt(cfg *config, key string, born time.Time, at time.Time) error {
	if cfg.keyRetention <= 0 || key == "" {
		return nil
	}
	if t, ok := wire.KeyTime(key); ok && (born.IsZero() || t.Before(born)) {
		born = t
	}
	if born.IsZero() {
		return nil
	}
	if age := at.Sub(born); age >= cfg.keyRetention {
		return fmt.Errorf("key is %s old, retention %s", age.Round(time.Second), cfg.keyRetention)
	}
	return nil
}

// record tells the Store how the operation ended, after attempts
// attempts: definitive answers are Done, everything else stays Pending. It
// runs within the caller's context ctx: if that is done, the record stays
// Pending, which is safe (a resumed operation re-sends the same key). It
// returns the Store's error, which observers hear of but which does not
// change the response: the request already happened.
func (op *operation) record(cfg *config, ctx context.Context, definitive bool, attempts int) error {
	s := cfg.store
	if s == nil || op.name == "" || ctx.Err() != nil {
		return nil
	}
	state := persist.Pending
	if definitive {
		state = persist.Done
	}
	name := op.name // the closure captures no part of the call
	if err := bounded(ctx, func(ctx context.Context) error { return s.Finish(ctx, name, state, attempts) }); err != nil {
		return fmt.Errorf("%w: finish: %w", ErrStore, err)
	}
	return nil
}

// bounded runs a Store call within ctx. If ctx ends first, it returns ctx's
// error without waiting for a Store that does not honour ctx: a frozen
// Redis, a stalled disk. The call finishes in the background.
func bounded(ctx context.Context, f func(context.Context) error) error {
	if ctx.Done() == nil {
		return f(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func closeReqBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// plan fills p, a new plan, with what attempt n, the i-th of op's call,
// admitted at start, is sent with: op hands over its body for it. p is
// filled in place: a returned plan would be copied.
func (op *operation) plan(p *wire.Plan, ctx context.Context, i, n int, start int64, held *http.Response) {
	// Field by field: p is zero (a new plan), and a composite literal
	// would be built aside and copied.
	p.Body, p.BodyErr = op.body.Body(i)
	p.Ctx, p.I, p.N, p.Start, p.Held = ctx, i, n, start, held
	p.Rewind = op.body.Rewind()
}

// sender returns the sender of op, resolved, for the caller's request
// req to t.
func (op *operation) sender(t *Transport, req *http.Request) wire.Sender {
	return wire.Sender{Cfg: &t.wire, Req: req, Key: op.key, Field: op.field, Clipped: op.clipped, AttemptSet: op.attemptSet}
}

// NewKey returns a new UUIDv7 (RFC 9562) as a 36-character string. It holds
// 48 bits of Unix milliseconds, then random bits from crypto/rand. So keys
// minted in sequence sort in time order, and their age can be read back. A
// Transport mints such keys by default, from a buffer of crypto/rand bytes
// of its own (see WithKeyFunc).
func NewKey() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("resilient: minting key: %w", err)
	}
	return u.String(), nil
}

// ValidateKey reports whether key can be sent as an idempotency key: non-empty,
// at most 255 bytes, printable ASCII (0x20–0x7E, no leading or trailing
// space). The error wraps ErrInvalidKey and never echoes the key.
func ValidateKey(key string) error { return wire.ValidateKey(key) }

// send sends attempt n, the i-th of op's call, admitted at start: the
// send step of every attempt, the plain call's included. A first attempt
// with nothing to add to the caller's request req goes as it is
// (op.asIs, wire.SendAsIs); any other is a copy carrying the key and
// attempt headers (wire.Sender). held is the answer the attempt replaces.
// It returns the attempt. (The plain call, whose first attempt is the
// common request, calls the halves itself, which fill its attempt in
// place: a returned attempt is copied.)
func (op *operation) send(t *Transport, ctx context.Context, req *http.Request, i, n int, start int64, held *http.Response) (a wire.Attempt) {
	if i == 0 && op.asIs {
		op.sendAsIs(t, req, &a, n, start)
	} else {
		op.sendCopy(t, ctx, req, i, n, start, held, &a)
	}
	return a
}

// sendAsIs is send for a first attempt with nothing to add: op hands its
// body over to the base transport, which owns it from then on.
func (op *operation) sendAsIs(t *Transport, req *http.Request, a *wire.Attempt, n int, start int64) {
	wire.SendAsIs(&t.wire, &op.body, req, a, n, start)
}

// sendCopy is send for any other attempt: a copy of req with the key and
// attempt headers, sent with op's body.
func (op *operation) sendCopy(t *Transport, ctx context.Context, req *http.Request, i, n int, start int64, held *http.Response, a *wire.Attempt) {
	var p wire.Plan
	op.plan(&p, ctx, i, n, start, held)
	s := op.sender(t, req)
	s.Send(a, &p)
}
