package resilient

import (
	"net/http"
	"strings"

	"github.com/resilienthttp/resilient/internal/reason"
)

// The policy this file carries out (when an unsafe request may be re-sent,
// and what counts as evidence that a server dedupes) is in doc.go, under
// "Unsafe requests".

// ErrUnsafeRetry: the request was not re-sent. It is not idempotent and may
// have been applied. Nothing shows that the server dedupes it by its key. A
// bare client would not have re-sent it either. Use WithDedupingServer for
// a server known to honour keys.
var ErrUnsafeRetry = reason.ErrUnsafeRetry

// showsDedupe reports whether a response with header h (and replay headers
// rh) shows that the server dedupes by its key. It does if it echoes the
// key, says how its idempotency store answered, or says the key is in use.
func showsDedupe(h http.Header, rh replayHeaders, keyHeader, key string, d Decision) bool {
	if rh.present() {
		return true
	}
	if d.Category == CategoryInProgress || d.Category == CategoryPayloadMismatch {
		return true
	}
	if v := headerValue(h, keyHeader); v != "" {
		return v == key || strings.Trim(v, `"`) == key
	}
	return false
}

// dedupingServer is one WithDedupingServer entry.
type dedupingServer struct {
	host, pathPrefix string
}

// WithDedupingServer declares servers known to dedupe unsafe requests by
// their idempotency key. The Transport may then re-send a POST or PATCH
// that may have been applied. Each entry is a host ("api.example.com",
// with its port if the URL has one). A path prefix may follow it
// ("api.example.com/v1/payments"). A leading "https://" or "http://" is
// ignored, and an empty entry declares nothing. Without it, an unsafe
// request that may have been applied is re-sent only in two cases. The
// server has shown, on that route, that it dedupes (see ErrUnsafeRetry).
// Or the key is the application's own.
func WithDedupingServer(entries ...string) Option {
	return func(c *config) {
		for _, e := range entries {
			e = strings.TrimPrefix(strings.TrimPrefix(e, "https://"), "http://")
			host, path, _ := strings.Cut(e, "/")
			if host == "" {
				continue // an empty entry, or a bare path: no host to declare
			}
			c.dedupers = append(c.dedupers, dedupingServer{host: host, pathPrefix: "/" + path})
		}
	}
}

// declaredDeduping reports whether the application declared req's server
// as one that dedupes.
func (c *config) declaredDeduping(req *http.Request) bool {
	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	for _, d := range c.dedupers {
		host := d.host == req.URL.Host || strings.Trim(d.host, "[]") == req.URL.Hostname()
		if host && strings.HasPrefix(path, d.pathPrefix) {
			return true
		}
	}
	return false
}
