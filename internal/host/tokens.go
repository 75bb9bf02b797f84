package host

import "github.com/resilienthttp/resilient/internal/retrycontrol"

// retryTokens is a host's bucket: the Transport records first attempts,
// takes a token before each retry, earns after each healthy answer and
// refunds a retry that took a token and was then not sent.
type retryTokens struct{ retrycontrol.Tokens }

// NewRetryTokens returns a host's bucket, configured by c.
func NewRetryTokens(c retrycontrol.TokensConfig) *retryTokens {
	rt := new(retryTokens)
	rt.Init(c)
	return rt
}

// TokenUnit is one token in millitokens, the unit of capacity and of a
// route's share (routeshare.go).
const TokenUnit = retrycontrol.TokenUnit

// Capacity is the bucket's size at now, in millitokens.
func (rt *retryTokens) Capacity(now int64) int64 { return rt.CapacityNanos(now) }

// Params returns the resolved configuration the gate reads.
func (rt *retryTokens) Params() tokenParams { return tokenParams{Refill: rt.RefillMilli()} }

// tokenParams: refill is the millitokens a healthy answer earns.
type tokenParams struct{ Refill int64 }
