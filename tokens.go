package resilient

import (
	"time"
)

// RetryTokens is a retry control (see WithRetryControl), and the default
// one. Each destination host gets a token bucket for retries, on the model
// of the AWS SDKs' retry quota. The bucket starts full. A retry takes a
// token and is not sent when none is left. The last answer is returned
// (Report.Stopped is ErrTokensExhausted), or an *Error with that Reason. A
// healthy answer earns Refill tokens back. So retries fade as the failure
// rate p grows, to about Refill × (1 − p) retries per operation. When every
// answer fails, only what the bucket holds is spent, then none. First
// attempts are never refused. They only size the bucket: CapRatio × the
// first attempts of the last Window, at least MinTokens.
//
// The zero value is the default control: every zero field means its
// default (Refill 0.5, CapRatio 0.02, MinTokens 3, Window 10 s). The storm
// benchmark (bench/cmd/storm) chose the defaults. With them, retries help
// when failures are rare, fade as they grow, and stop when everything fails
// (see the README). Most callers should keep it, the default.
type RetryTokens struct {
	// Refill is the number of tokens each healthy answer earns: a success,
	// or an answer that is the request's fault rather than the host's (a
	// 4xx). A retry costs one token, so Refill bounds the retries per
	// healthy answer. 0 means the default, 0.5; a negative or NaN value
	// means none (retries then spend only what the bucket holds and never
	// earn it back); +Inf refills the bucket at every healthy answer.
	Refill float64

	// CapRatio scales the bucket with the host's traffic: the bucket holds
	// at most CapRatio × the first attempts sent to the host in the last
	// Window, and never less than MinTokens. It bounds the retries a sudden
	// outage can trigger before the bucket is empty. 0 means the default,
	// 0.02 (about 0.2 s of traffic with the default Window); negative or
	// NaN means none (the bucket holds MinTokens).
	CapRatio float64

	// MinTokens is the least the bucket holds, whatever the traffic, so
	// that a client with little traffic can still retry. 0 means the
	// default, 3; negative or NaN means none.
	MinTokens float64

	// Window is the period over which first attempts are counted to size
	// the bucket, in 10 buckets. 0 or negative means the default, 10 s.
	Window time.Duration
}
