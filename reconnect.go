package resilient

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/resilienthttp/resilient/internal/wire"
)

// reconnecting is what a resumed body (resume.go) and a reconnected event
// stream (eventstream.go) share: the body read now, and the caller's
// Close against a resume in flight. Read is the caller's, from one
// goroutine; Close may come from another: mu guards rc's replacement,
// closed and cancel against it.
type reconnecting struct {
	rc     io.ReadCloser // the body read now
	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc // the resume in flight's, nil if none
}

// Close closes the body, and ends a resume in flight.
func (c *reconnecting) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cancel != nil {
		c.cancel()
	}
	return c.rc.Close()
}

// isClosed reports whether the caller closed the body.
func (c *reconnecting) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// send sends req, a copy of the caller's request, over base. Its context
// ends at req's or at the caller's Close.
func (c *reconnecting) send(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return nil, errResumeClosed
	}
	c.cancel = cancel
	c.mu.Unlock()
	resp, err := base.RoundTrip(req.WithContext(ctx))
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &wire.CancelBody{ReadCloser: resp.Body, Cancel: cancel}
	return resp, nil
}

// take makes rc the body read now, unless the caller closed it meanwhile:
// then rc is closed and take returns errResumeClosed.
func (c *reconnecting) take(rc io.ReadCloser) error {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.rc = rc
	}
	c.mu.Unlock()
	if closed {
		rc.Close()
		return errResumeClosed
	}
	return nil
}

// admitResume admits, for g, the next resume (or reconnect) to h whose
// count is n, after at least floor, and waits for it. The first since
// the last progress is free: no backoff, no retry token (a Budget, set
// by the application, still pays for it). Later ones are retries: they
// back off and stop at MaxAttempts, and none is sent under an outer retry
// loop (looped).
func admitResume(r *host.Reservation, cfg *config, g *host.Applicant, h *host.State, n *resumeCount, floor time.Duration, now int64) error {
	free := n.tries == 0
	backoff := floor
	if !free {
		if n.tries+1 >= cfg.maxAttempts || looped(cfg, g.Req) {
			return ErrRetriesExhausted
		}
		if cfg.backoff != nil {
			backoff = max(backoff, cfg.backoff.Delay(n.tries, 0))
		}
	}
	if err := h.Reserve(r, g, 1, 1, backoff, free, now); err != nil {
		return err
	}
	return r.Wait(g)
}
