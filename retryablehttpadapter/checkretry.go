package retryablehttpadapter

import (
	"context"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/resilienthttp/resilient"
)

// retryAfterMax is the Transport's default WithRetryAfterMax.
const retryAfterMax = 30 * time.Second

// CheckRetry returns a retryablehttp.CheckRetry that retries exactly when c
// (resilient.DefaultClassifier if nil) decides resilient.Retry, with the
// resilient.Transport's limits on server-directed delays:
//
//   - when ctx is done it returns false and ctx.Err(), like
//     retryablehttp.DefaultRetryPolicy;
//   - a request is keyed when it carries an Idempotency-Key header
//     (resilient.DefaultKeyHeader): an outcome that may have reached the
//     server (reset, timeout, 500, 502, 504) is retried only for a keyed
//     request or an idempotent method;
//   - a server-directed delay (Retry-After, RateLimit) longer than
//     the Transport's default Retry-After maximum (30 s), or one that would end after
//     ctx's deadline, stops the retries: the response is returned at once
//     instead of waiting into a deadline;
//   - an error that comes with a response (the http.Client's CheckRedirect
//     refused a redirect) is never retried, nor is an error for a URL whose
//     scheme is not http or https (net/http refused to send it).
//
// Apart from ctx's error it never returns an error, so go-retryablehttp
// returns the last response (or its own "giving up" error wrapping the last
// cause). When an attempt fails without a response, see Transport for how the
// request reaches the classifier.
func CheckRetry(c resilient.Classifier) retryablehttp.CheckRetry {
	if c == nil {
		c = resilient.DefaultClassifier
	}
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if resp != nil && err != nil {
			return false, nil
		}
		o := outcome(resp, err, time.Now())
		if err != nil && o.Request.URL != nil && o.Request.URL.Scheme != "" &&
			o.Request.URL.Scheme != "http" && o.Request.URL.Scheme != "https" {
			return false, nil
		}
		d := c(o)
		if d.Action != resilient.Retry || d.Delay > retryAfterMax {
			return false, nil
		}
		if dl, ok := ctx.Deadline(); ok && !o.Now.Add(d.Delay).Before(dl) {
			return false, nil
		}
		return true, nil
	}
}
