package idempotency

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The request headers that carry the caller's time budget, in
// milliseconds: the resilient client's (resilient.WithTimeBudgetHeader)
// and Envoy's.
const (
	TimeBudgetHeader      = "X-Request-Timeout"
	EnvoyTimeBudgetHeader = "X-Envoy-Expected-Rq-Timeout-Ms"
)

// maxBudgetDigits bounds a budget's digits: more is longer than any
// server's bound, read as "no budget".
const maxBudgetDigits = 12

// callerBudget returns the caller's time budget that h carries: the
// smallest valid value of TimeBudgetHeader and EnvoyTimeBudgetHeader. A
// valid value is a non-negative integer of milliseconds, spaces around it
// allowed; any other value is ignored, as if it were absent. ok is false
// when there is no valid value.
func callerBudget(h http.Header) (budget time.Duration, ok bool) {
	for _, name := range [...]string{TimeBudgetHeader, EnvoyTimeBudgetHeader} {
		for _, v := range h[name] {
			if d, valid := parseBudget(v); valid && (!ok || d < budget) {
				budget, ok = d, true
			}
		}
	}
	return budget, ok
}

// parseBudget parses one value of a budget header: ASCII digits only.
func parseBudget(v string) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" || len(v) > maxBudgetDigits {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil { // cannot happen: at most 12 digits
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// budgetDue returns when the caller's time budget ends, counted from now
// (the request's arrival); zero when the request carries none.
func budgetDue(h http.Header) time.Time {
	b, ok := callerBudget(h)
	if !ok {
		return time.Time{}
	}
	return time.Now().Add(b)
}

// spent reports whether the budget due ended, at or before now.
func spent(due time.Time) bool {
	return !due.IsZero() && !time.Now().Before(due)
}

// handlerDeadline returns when the handler's context ends: the request's
// deadline, else Lease after now; earlier if the caller's budget (due)
// ends first. The budget only shortens it: Lease (or the request's own
// deadline) is the server's bound.
func (m *Middleware) handlerDeadline(r *http.Request, due time.Time) time.Time {
	deadline, ok := r.Context().Deadline()
	if !ok {
		deadline = time.Now().Add(m.cfg.Lease)
	}
	if !due.IsZero() && due.Before(deadline) {
		return due
	}
	return deadline
}

// budgetSpent answers a request whose caller's time budget ended before
// its handler could start: 408, nothing run, nothing stored.
func (m *Middleware) budgetSpent(ctx context.Context, w http.ResponseWriter, s Scope) {
	m.event(ctx, slog.LevelDebug, "budget_spent", s)
	writeResponse(w, problemBudgetSpent(), "")
}

// problemBudgetSpent answers a request whose caller had no time left.
func problemBudgetSpent() *Response {
	return problemResponse(http.StatusRequestTimeout, "budget-spent", "Request Timeout",
		"the caller's time budget ("+TimeBudgetHeader+") ended before the request was handled; nothing was done", "")
}
