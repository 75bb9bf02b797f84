package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient/idempotency"
)

// redisMargin is how long after a record's expiry or lease Redis deletes
// it itself: a safety net that outlasts clock skew between the servers
// and Redis.
const redisMargin = time.Hour

// sweepPage is how many index entries one Sweep script examines.
const sweepPage = 1000

// ErrCorrupt is wrapped by the error a Store returns when a record it reads
// cannot be decoded.
var ErrCorrupt = errors.New("idempotency/redis: corrupt record")

// Store is an idempotency.Store in Redis; see the package documentation for
// what it promises. Create it with New. Safe for concurrent use by multiple
// goroutines; any number of Stores, in any number of processes, may share
// one Redis and prefix.
type Store struct {
	client goredis.UniversalClient
	prefix string
	idx    string
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store on client, after checking that Redis keeps what it
// acknowledges (see the package documentation): it returns an error
// wrapping ErrNotDurable if the append-only file is off, and an error if
// CONFIG GET fails, unless AllowVolatile. The Store does not own client.
func New(ctx context.Context, client goredis.UniversalClient, opts ...Option) (*Store, error) {
	o := options{prefix: DefaultPrefix}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if err := checkPersistence(ctx, client, o); err != nil {
		return nil, err
	}
	return &Store{client: client, prefix: o.prefix, idx: o.prefix + "idx"}, nil
}

// Atomic returns false: the handler's effect is elsewhere, and releasing a
// claim cannot undo it.
func (s *Store) Atomic() bool { return false }

// Begin implements idempotency.Store: one script, one round trip.
func (s *Store) Begin(ctx context.Context, sc idempotency.Scope, fp idempotency.Fingerprint, now, lease time.Time) (idempotency.Begun, error) {
	h := sc.Hash()
	member := hex.EncodeToString(h[:])
	var tok [16]byte
	_, _ = rand.Read(tok[:]) // never fails (crypto/rand)
	token := hex.EncodeToString(tok[:])
	res, err := beginScript.Run(ctx, s.client, []string{s.prefix + member, s.idx},
		hex.EncodeToString(fp[:]), now.UnixMicro(), lease.UnixMicro(), token,
		lease.Add(redisMargin).UnixMilli(), member, redisMargin.Microseconds()).Slice()
	if err != nil {
		return idempotency.Begun{}, wrap(ctx, "begin", err)
	}
	state, _ := res[0].(string)
	switch {
	case state == "busy":
		return idempotency.Begun{State: idempotency.Busy}, nil
	case state == "mismatch":
		return idempotency.Begun{State: idempotency.Mismatch}, nil
	case state == "replay" && len(res) == 4:
		resp, err := decodeResponse(res[1], res[2], res[3])
		if err != nil {
			return idempotency.Begun{}, fmt.Errorf("idempotency/redis: begin: %w", err)
		}
		return idempotency.Begun{State: idempotency.Replay, Response: resp}, nil
	case state == "claimed" && len(res) == 2:
		c := &claim{s: s, rec: s.prefix + member, member: member, token: token, sc: sc}
		return idempotency.Begun{State: idempotency.Claimed, Claim: c, Expired: res[1] == int64(1)}, nil
	}
	return idempotency.Begun{}, fmt.Errorf("idempotency/redis: begin: unexpected reply %v", res)
}

// Sweep deletes the completed records expired at now, in pages of 1000
// index entries, each atomic, and returns how many it deleted.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		res, err := sweepScript.Run(ctx, s.client, []string{s.idx}, now.UnixMicro(), sweepPage, s.prefix).Int64Slice()
		if err != nil {
			return total, wrap(ctx, "sweep", err)
		}
		if len(res) != 2 {
			return total, fmt.Errorf("idempotency/redis: sweep: unexpected reply %v", res)
		}
		total += int(res[0])
		if res[1] < sweepPage {
			return total, nil
		}
	}
}

// wrap returns err of the step named op, wrapping ctx's error too when ctx
// is done: a client built with ContextTimeoutEnabled reports a deadline as
// an i/o timeout.
func wrap(ctx context.Context, op string, err error) error {
	ctxErr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(dl) {
		ctxErr = context.DeadlineExceeded // the socket's deadline fired first
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("idempotency/redis: %s: %w: %w", op, ctxErr, err)
	}
	return fmt.Errorf("idempotency/redis: %s: %w", op, err)
}

// decodeResponse builds a stored answer from its fields status, hdr, body.
func decodeResponse(status, hdr, body any) (*idempotency.Response, error) {
	st, ok1 := status.(string)
	hs, ok2 := hdr.(string)
	bs, ok3 := body.(string)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("%w: fields %v %v %v", ErrCorrupt, status, hdr, body)
	}
	code, err := strconv.Atoi(st)
	if err != nil {
		return nil, fmt.Errorf("%w: status %q", ErrCorrupt, st)
	}
	resp := &idempotency.Response{Status: code, Body: []byte(bs)}
	if err := json.Unmarshal([]byte(hs), &resp.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	return resp, nil
}

// claim is a Store claim: the record holds its token while it lasts.
type claim struct {
	s      *Store
	rec    string
	member string
	token  string
	sc     idempotency.Scope // for dead letters (deadletter.go)
}

func (c *claim) Context(ctx context.Context) context.Context { return ctx }

func (c *claim) Complete(ctx context.Context, resp *idempotency.Response, expires time.Time) error {
	header := resp.Header
	if header == nil {
		header = http.Header{}
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("idempotency/redis: store: %w", err)
	}
	n, err := completeScript.Run(ctx, c.s.client, []string{c.rec, c.s.idx}, c.token, resp.Status, hb, resp.Body,
		expires.UnixMicro(), expires.Add(redisMargin).UnixMilli(), c.member).Int64()
	if err != nil {
		return wrap(ctx, "store", err)
	}
	if n == 0 {
		return idempotency.ErrClaimEnded
	}
	return nil
}

var _ idempotency.Renewer = (*claim)(nil)

// Renew moves the claim's lease to lease: one script, one round trip.
func (c *claim) Renew(ctx context.Context, lease time.Time) error {
	n, err := renewScript.Run(ctx, c.s.client, []string{c.rec}, c.token, lease.UnixMicro(),
		lease.Add(redisMargin).UnixMilli()).Int64()
	if err != nil {
		return wrap(ctx, "renew", err)
	}
	if n == 0 {
		return idempotency.ErrClaimEnded
	}
	return nil
}

func (c *claim) Release(ctx context.Context) error {
	n, err := releaseScript.Run(context.WithoutCancel(ctx), c.s.client, []string{c.rec}, c.token).Int64()
	if err != nil {
		return fmt.Errorf("idempotency/redis: release: %w", err)
	}
	if n == 0 {
		return idempotency.ErrClaimEnded
	}
	return nil
}
