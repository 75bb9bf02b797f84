// Package pushback is the server half of resilient's retry contract: a
// net/http middleware that keeps a rolling-window retry budget for the whole
// server and answers with pushback when retries exceed their share, so that
// a fleet of clients too small to see a storm on their own (thousands of
// processes each retrying a little) stops adding load at the one place that
// sees the aggregate.
//
// A request is a retry if its Retry-Attempt header is an integer above 0
// (resilient sends 0 on first attempts and n on the n-th retry); a request
// without that header is a retry if its Idempotency-Key was seen within a
// short window. Retries are admitted while
//
//	retries in the window < Ratio × healthy answers in the window + MinPerSecond × window
//
// where a healthy answer is one with a status below 500 other than 429. The
// budget grows only with work that succeeds, so it vanishes when everything
// fails: at total failure the server sees its first attempts and a trickle
// of MinPerSecond retries, a load of about 1 whatever the fleet's size.
//
// Pushback is an answer that tells a client to stop retrying for a while:
// 503 (or 429) with Retry-After, X-Should-Retry: false and an
// application/problem+json body of type ProblemType. The middleware sends it
// in place of the handler's answer to a retry the budget refuses (before any
// work), and adds its headers to a failure answer of the handler while the
// budget is exhausted, so that a client does not even send the retry. With
// Config.MaxInFlight it also sheds requests when the server is full,
// retries first.
//
// Pushback does not read the caller's time budget (X-Request-Timeout):
// package idempotency ends the handler's context at the budget and
// answers 408 to a request whose budget is spent before it runs.
//
// See README.md for the contract in terms any server, in any language, can
// implement.
package pushback
