// Package retryablehttpadapter lets a github.com/hashicorp/go-retryablehttp
// client use resilient's classification and backoff.
//
// go-retryablehttp retries every connection error and every 5xx, whatever the
// method: a POST whose connection was reset after it was sent is sent again,
// and the server may apply it twice. resilient.DefaultClassifier retries an
// outcome that may have reached the server only when the request is safe to
// repeat — an idempotent method, or an Idempotency-Key header — and reads the
// server's hints (Retry-After, RateLimit, X-Should-Retry, 409 "in progress",
// 422 payload mismatch). The adapters plug it in without leaving
// go-retryablehttp:
//
//	c := retryablehttp.NewClient()
//	c.HTTPClient.Transport = retryablehttpadapter.Transport(c.HTTPClient.Transport)
//	c.CheckRetry = retryablehttpadapter.CheckRetry(nil) // resilient.DefaultClassifier
//	c.Backoff = retryablehttpadapter.Backoff(nil)       // FullJitter(RetryWaitMin, RetryWaitMax), never below Retry-After
//
//	req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, url, body)
//	key, _ := resilient.NewKey()
//	req.Header.Set(resilient.DefaultKeyHeader, key) // the same key on every attempt
//	resp, err := c.Do(req)
//
// go-retryablehttp does not pass the request to CheckRetry when an attempt
// fails without a response, and the classifier needs its method and key to
// decide. Transport attaches the request to such errors; without it CheckRetry
// takes the method from the *url.Error and assumes no key, so a keyed POST
// whose connection was reset is not retried (the safe side). An
// http.Client.Timeout also hides the request (net/http replaces the error on
// timeout): bound requests with a context deadline instead.
//
// What go-retryablehttp cannot do and resilient.Transport does — one key per
// operation minted for you, a per-host retry budget and circuit breaker,
// persisted keys — is listed in this directory's README.
package retryablehttpadapter
