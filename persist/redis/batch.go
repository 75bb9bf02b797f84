package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Claims from concurrent callers share round trips: a Claim queues its
// candidate, and a sender claims every queued candidate with one script
// (claimManyScript), which runs each claim as claimScript would, in queue
// order. At most maxSenders scripts are in flight per Store; a sender takes
// at most maxBatch claims at once and ends when the queue is empty, so no
// goroutine of the batcher outlives the last Claim's answer from Redis.
//
// Durability is unchanged: Redis writes a script's effects to the
// append-only file, and with appendfsync always fsyncs it, before it sends
// the reply, so a Claim that returns a new record returns after its write is
// durable.
const (
	maxSenders = 4
	maxBatch   = 128
)

// claimCall is one Claim's script call, queued in a batcher.
type claimCall struct {
	ctx  context.Context
	rec  string        // the record's Redis key
	args [5]any        // op, key, fp, created, attempts
	done chan struct{} // closed once res and err are set
	res  []any
	err  error

	// Guarded by the batcher's mu.
	gaveUp bool   // the caller left before the call was sent: skip it
	sent   *batch // the batch that sent it, nil while queued
}

// batch is one pipeline of calls. live counts the callers still waiting; when
// the last gives up, cancel ends the pipeline's context.
type batch struct {
	live   int
	cancel context.CancelFunc
}

// batcher queues claim calls and sends them in batches.
type batcher struct {
	client  goredis.UniversalClient
	indexes []string // pending, all, exp
	ttl     int64    // ms, 0 for none
	prefix  string   // recPrefix
	mu      sync.Mutex
	queue   []*claimCall
	senders int // goroutines sending, at most maxSenders
}

// do queues c, starts a sender if fewer than maxSenders are running, and waits
// for c's reply or for c.ctx to end, whichever comes first. A caller that
// leaves before its call is sent sends nothing; one that leaves after
// abandons the reply, and its script may still run (as an abandoned single
// command would).
func (b *batcher) do(c *claimCall) ([]any, error) {
	c.done = make(chan struct{})
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := b.senders < maxSenders
	if start {
		b.senders++
	}
	b.mu.Unlock()
	if start {
		go b.send()
	}
	select {
	case <-c.done:
		if c.err != nil {
			if ctxErr := ctxErr(c.ctx); ctxErr != nil && !errors.Is(c.err, ctxErr) {
				return nil, fmt.Errorf("%w: %w", ctxErr, c.err)
			}
		}
		return c.res, c.err
	case <-c.ctx.Done():
		b.giveUp(c)
		return nil, c.ctx.Err()
	}
}

// ctxErr returns ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed: the pipeline's socket deadline (the latest of its calls') may
// fire a moment before the context's own timer.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// giveUp removes c from the queue if it is still there, or else lets its
// batch's pipeline end once no caller of the batch waits for it.
func (b *batcher) giveUp(c *claimCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.sent == nil {
		c.gaveUp = true
		return
	}
	c.sent.live--
	if c.sent.live == 0 {
		c.sent.cancel()
	}
}

// send sends batches of queued calls until the queue is empty.
func (b *batcher) send() {
	for {
		calls, ctx, cancel := b.take()
		if calls == nil {
			return
		}
		b.run(ctx, calls)
		cancel()
		for _, c := range calls {
			close(c.done)
		}
	}
}

// take removes up to maxBatch live calls from the queue and returns them with
// the context of their pipeline, or nil (and retires this sender) when the
// queue holds none. The context carries the first call's values, ends at the
// latest deadline of the calls (none if any has none), and is canceled when
// every caller of the batch has given up.
func (b *batcher) take() ([]*claimCall, context.Context, context.CancelFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var calls []*claimCall
	n := 0
	for _, c := range b.queue {
		n++
		if c.gaveUp {
			continue
		}
		calls = append(calls, c)
		if len(calls) == maxBatch {
			break
		}
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(calls) == 0 {
		b.senders--
		b.queue = nil
		return nil, nil, nil
	}
	ctx := context.WithoutCancel(calls[0].ctx)
	var cancel context.CancelFunc
	if last, ok := latestDeadline(calls); ok {
		ctx, cancel = context.WithDeadline(ctx, last)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	bt := &batch{live: len(calls), cancel: cancel}
	for _, c := range calls {
		c.sent = bt
	}
	return calls, ctx, cancel
}

// latestDeadline returns the latest deadline of the calls' contexts, or false
// if one has none.
func latestDeadline(calls []*claimCall) (time.Time, bool) {
	var last time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return time.Time{}, false
		}
		if d.After(last) {
			last = d
		}
	}
	return last, true
}

// run claims the calls' candidates with one script and sets each call's res
// and err. A script Redis does not have cached (NOSCRIPT: nothing ran) is
// loaded and sent again, once.
func (b *batcher) run(ctx context.Context, calls []*claimCall) {
	keys := make([]string, 0, len(b.indexes)+len(calls))
	keys = append(keys, b.indexes...)
	args := make([]any, 0, 2+5*len(calls))
	args = append(args, b.ttl, b.prefix)
	for _, c := range calls {
		keys = append(keys, c.rec)
		args = append(args, c.args[:]...)
	}
	res, err := claimManyScript.EvalSha(ctx, b.client, keys, args...).Slice()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		res, err = claimManyScript.Eval(ctx, b.client, keys, args...).Slice()
	}
	if err == nil && len(res) != len(calls) {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	for i, c := range calls {
		if err != nil {
			c.err = err
			continue
		}
		r, ok := res[i].([]any)
		c.res = r
		if !ok {
			c.err = fmt.Errorf("unexpected reply %v", res[i])
		}
	}
}
