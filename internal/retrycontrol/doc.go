// Package retrycontrol holds the in-memory retry controls behind
// resilient.RetryTokens and resilient.RetryBudget: a token bucket for
// retries (Tokens) and a Finagle-style rolling budget (Budget). They are
// internal so that the modules of this repository (bench, sim, redisbudget)
// can drive them with explicit times, while the public API configures them
// through resilient.WithRetryControl only.
package retrycontrol
