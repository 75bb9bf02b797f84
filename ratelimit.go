package resilient

import "golang.org/x/time/rate"

// RateLimit is a retry control (see WithRetryControl) that paces the
// requests to each destination host. It uses a token bucket of Rate
// requests per second and the given Burst (golang.org/x/time/rate). Every
// attempt, first or retry, waits for a token, honouring the request's
// context. An attempt whose wait would end after the context's deadline is
// not sent. The request then stops with ErrRateLimited as its reason. The
// last answer is returned when there is one. A Transport has no rate limit
// by default.
//
// Zero values: a Rate of 0 (or negative, or rate.Inf) limits nothing, so
// RateLimit{} is no limit; a Burst of 0 (or negative) means 1.
type RateLimit struct {
	// Rate is the sustained number of requests per second to each host.
	Rate rate.Limit
	// Burst is the number of requests that may go out at once after a
	// quiet period.
	Burst int
}

// resolved returns the limiter's parameters: rate.Inf when l limits
// nothing.
func (l RateLimit) resolved() (rate.Limit, int) {
	if !(l.Rate > 0) {
		return rate.Inf, 0
	}
	return l.Rate, max(l.Burst, 1)
}
