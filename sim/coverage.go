package sim

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/resilienthttp/resilient"
)

// Coverage counts what a run of schedules exercised, so that a sweep that
// passes can be told from one that tested nothing. Safe for concurrent use.
type Coverage struct {
	mu sync.Mutex
	n  map[string]int64
}

// Add counts what r exercised.
func (c *Coverage) Add(r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n["schedules"]++
	c.n["server requests"] += r.Server.Requests
	c.n["server retries"] += r.Server.Retries
	c.n["server replays"] += r.Server.Replays
	c.n["server 409 in progress"] += r.Server.InProgressConflicts
	c.n["effects"] += int64(r.Server.Effects)
	for k, v := range r.Server.Faults {
		c.n["server fault "+k] += v
	}
	if r.Plan.Store != "" {
		c.n["store "+r.Plan.Store]++
	}
	if r.Plan.IgnoreKeys {
		c.n["server ignoring keys"]++
	}
	if !r.Crashed.IsZero() {
		c.n["crashes"]++
	}
	for _, op := range r.Plan.Ops {
		if op.Method == "GET" {
			c.n["GET requests"] += int64(r.Arrivals[op.Name])
			if r.Plan.Hedge > 0 {
				c.n["GET requests, hedging on"] += int64(r.Arrivals[op.Name])
				c.n["GET calls, hedging on"] += int64(op.Callers)
			}
		}
	}
	for _, call := range r.Calls {
		c.n["calls"]++
		switch {
		case call.Caller < 0:
			c.n["calls by the resumer"]++
		}
		switch {
		case call.Status/100 == 2:
			c.n["calls 2xx"]++
		case call.Status != 0:
			c.n[fmt.Sprintf("calls final %d", call.Status)]++
		case call.ResErr == nil:
			c.n["calls other error"]++
		case errors.Is(call.ResErr, resilient.ErrUnsafeRetry):
			c.n["calls ErrUnsafeRetry"]++
		case errors.Is(call.ResErr, resilient.ErrKeyExpired):
			c.n["calls ErrKeyExpired"]++
		case errors.Is(call.ResErr, resilient.ErrStore):
			c.n["calls ErrStore"]++
		case call.ResErr.Unknown:
			c.n["calls unknown outcome"]++
		default:
			c.n["calls error, not applied"]++
		}
	}
}

// String lists the counts, one "name=count" per line.
func (c *Coverage) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	for k, v := range c.n {
		lines = append(lines, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
