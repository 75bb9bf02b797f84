package resilient

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// timeBudgetHeader is the header that carries the caller's remaining time
// (WithTimeBudgetHeader), in milliseconds.
const timeBudgetHeader = "X-Request-Timeout"

// WithTimeBudgetHeader sends the caller's remaining time with every
// attempt, in milliseconds: X-Request-Timeout: 300. A server can then stop
// working on a request that nobody waits for any more. The time is taken
// when the attempt is sent. It is what is
// left of the request context's deadline, or of the attempt timeout
// (WithAttemptTimeout) when that ends first. http.Client.Timeout sets such
// a deadline too. An attempt without a deadline goes without the header.
// A header the caller set is sent as it is. Default: off.
func WithTimeBudgetHeader() Option {
	return func(c *config) { c.timeBudget = true }
}

// budgetField adds the time budget header to areq, attempt p's copy of
// the caller's request, if timeBudget has a value for it. own says that
// areq's header is its own already (attemptHeader); otherwise it is given
// one first.
func (s *sender) budgetField(areq *http.Request, p *plan, own bool) {
	v := timeBudget(areq, s.req.Header)
	if v == nil {
		return
	}
	if !own {
		areq.Header = attemptHeader(s.req.Header, 1, p.i == 0 && s.clipped)
	}
	areq.Header[timeBudgetHeader] = v
}

// timeBudget returns the value of the time budget header for areq, an
// attempt about to be sent: the milliseconds left before its context's
// deadline, rounded down, at least 0. It returns nil when the attempt has
// no deadline, or when the caller's header, h, has the field under any
// spelling.
func timeBudget(areq *http.Request, h http.Header) []string {
	dl, ok := areq.Context().Deadline()
	if !ok || callerSet(h, timeBudgetHeader) {
		return nil
	}
	ms := max(time.Until(dl).Milliseconds(), 0)
	return []string{strconv.FormatInt(ms, 10)}
}

// callerSet reports whether header h has the field name, canonical, under
// its own spelling or another.
func callerSet(h http.Header, name string) bool {
	if _, ok := h[name]; ok {
		return true
	}
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
