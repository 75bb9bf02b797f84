package resilient

import "golang.org/x/time/rate"

// RetryControl is a policy that decides, per destination host, whether a
// retry may be sent at all and how attempts are paced: RetryTokens (the
// default), RetryBudget, SharedBudget, CircuitBreaker and RateLimit. Give
// them to WithRetryControl. Each is a plain value whose zero fields mean
// the documented defaults.
type RetryControl interface {
	// retryControl seals the interface: only the types of this package
	// are retry controls.
	retryControl()
}

func (RetryTokens) retryControl()    {}
func (RetryBudget) retryControl()    {}
func (SharedBudget) retryControl()   {}
func (CircuitBreaker) retryControl() {}
func (RateLimit) retryControl()      {}

// WithRetryControl sets the retry controls of the Transport, replacing the
// default (RetryTokens{}) and any earlier WithRetryControl. Each control is
// kept per destination host; each refusal has its own error
// (ErrTokensExhausted, ErrBudgetExhausted, ErrCircuitOpen, ErrRateLimited),
// and a refused retry returns the last answer, as a bare client would have.
// The tokens and a budget never hold back a first attempt; a CircuitBreaker
// (unless RetriesOnly) and a RateLimit may.
//
//	WithRetryControl()                                    // none: only WithMaxAttempts limits retries
//	WithRetryControl(RetryBudget{Ratio: 0.1})             // a budget instead of the tokens
//	WithRetryControl(RetryTokens{}, CircuitBreaker{})     // the default tokens and a breaker
//	WithRetryControl(RetryTokens{}, RetryBudget{})        // both: a retry needs a token and the budget's leave
//	WithRetryControl(SharedBudget(fleet.For))             // a budget shared by a fleet (redisbudget)
//	WithRetryControl(RetryTokens{}, RateLimit{Rate: 100, Burst: 10})
//
// With no argument the Transport has no retry control: retries are limited
// only by WithMaxAttempts, the deadline and the server's directions. A
// Transport holds at most one control of each kind, and at most one budget
// (RetryBudget or SharedBudget): when the arguments name two, the later
// wins. A nil SharedBudget adds no budget: WithRetryControl(SharedBudget(nil))
// has no control at all, as WithRetryControl() has none.
func WithRetryControl(controls ...RetryControl) Option {
	return func(c *config) {
		c.tokensOff, c.tokens = true, RetryTokens{}
		c.budgetConfig, c.budgetFunc, c.breaker = nil, nil, nil
		c.rateLimit, c.rateBurst = rate.Inf, 0
		for _, rc := range controls {
			switch rc := rc.(type) {
			case RetryTokens:
				c.tokensOff, c.tokens = false, rc
			case RetryBudget:
				c.budgetConfig, c.budgetFunc = &rc, nil
			case SharedBudget:
				if rc != nil {
					c.budgetConfig, c.budgetFunc = nil, rc
				}
			case CircuitBreaker:
				r := rc.resolved() // a copy per Transport: an Option may build many
				c.breaker = &r
			case RateLimit:
				c.rateLimit, c.rateBurst = rc.resolved()
			}
		}
	}
}
