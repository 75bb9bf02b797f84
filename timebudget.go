package resilient

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
