package fakeserver

import (
	"context"
	"sync/atomic"
	"time"
)

// capacity is the run-time state of a Capacity: a semaphore of MaxConcurrent
// slots and a count of the requests waiting for one.
type capacity struct {
	slots        chan struct{}
	queue        int64
	waiting      atomic.Int64
	serviceTime  time.Duration
	queueTimeout time.Duration
	retryAfter   time.Duration
	shedCost     time.Duration // ShedCost × ServiceTime
	maxDebt      time.Duration // bound of debt: one second of every slot
	debt         atomic.Int64  // shed work not yet paid, in nanoseconds
}

func newCapacity(c Capacity) *capacity {
	return &capacity{
		slots:        make(chan struct{}, c.MaxConcurrent),
		queue:        int64(c.Queue),
		serviceTime:  time.Duration(c.ServiceTime),
		queueTimeout: time.Duration(c.QueueTimeout),
		retryAfter:   time.Duration(c.RetryAfter),
		shedCost:     time.Duration(c.ShedCost * float64(c.ServiceTime)),
		maxDebt:      time.Duration(c.MaxConcurrent) * time.Second,
	}
}

// owe adds the cost of one shed request to the debt.
func (c *capacity) owe() {
	if c.shedCost <= 0 {
		return
	}
	for {
		d := c.debt.Load()
		n := min(d+int64(c.shedCost), int64(c.maxDebt))
		if c.debt.CompareAndSwap(d, n) {
			return
		}
	}
}

// hold returns how long an admitted request holds its slot: the service
// time and its share of the debt (at most 4 service times), which it pays.
func (c *capacity) hold() time.Duration {
	for {
		d := c.debt.Load()
		if d <= 0 {
			return c.serviceTime
		}
		pay := min(d, int64(4*c.serviceTime))
		if c.debt.CompareAndSwap(d, d-pay) {
			return c.serviceTime + time.Duration(pay)
		}
	}
}

// admission is the result of capacity.acquire.
type admission uint8

const (
	admitted admission = iota // a slot is held: call release
	shed                      // over capacity: answer 503
	gone                      // the client gave up or the server closed while queued
)

// acquire takes a slot, waiting in the queue if there is room in it. It never
// waits once ctx or closing is done.
func (c *capacity) acquire(ctx, closing context.Context) admission {
	select {
	case c.slots <- struct{}{}:
		return admitted
	default:
	}
	if c.waiting.Add(1) > c.queue {
		c.waiting.Add(-1)
		return shed
	}
	defer c.waiting.Add(-1)
	var timeout <-chan time.Time
	if c.queueTimeout > 0 {
		t := time.NewTimer(c.queueTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case c.slots <- struct{}{}:
		return admitted
	case <-timeout:
		return shed
	case <-ctx.Done():
		return gone
	case <-closing.Done():
		return gone
	}
}

// release frees the slot taken by a successful acquire.
func (c *capacity) release() { <-c.slots }
