package retryablehttpadapter

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/resilienthttp/resilient"
)

// unknownMethod stands for the method of a request CheckRetry cannot see. It
// is not idempotent, so the classifier treats the request as unsafe to
// repeat.
const unknownMethod = "UNKNOWN"

// outcome builds the Outcome a resilient.Classifier expects from what
// go-retryablehttp hands to CheckRetry: a response (whose Request is the
// attempt that was sent) or an error. For an error, the request comes from a
// *requestError (see Transport), else a stand-in is rebuilt from the
// *url.Error with its method and URL and no headers.
func outcome(resp *http.Response, err error, now time.Time) resilient.Outcome {
	o := resilient.Outcome{Response: resp, Err: err, Now: now}
	if err != nil {
		o.Response = nil
	}
	switch {
	case resp != nil && resp.Request != nil:
		o.Request = resp.Request
	default:
		var re *requestError
		if errors.As(err, &re) {
			o.Request = re.req
		} else {
			o.Request = standIn(err)
		}
	}
	o.Keyed = o.Request.Header.Get(resilient.DefaultKeyHeader) != ""
	return o
}

// standIn returns a request with the method and URL of the *url.Error in err
// (net/http's Op is the method in title case: "Post"), or an unknown method
// and no URL.
func standIn(err error) *http.Request {
	req := &http.Request{Method: unknownMethod, Header: http.Header{}, URL: &url.URL{}}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Op != "" {
			req.Method = strings.ToUpper(ue.Op)
		}
		if u, perr := url.Parse(ue.URL); perr == nil {
			req.URL, req.Host = u, u.Host
		}
	}
	return req
}
