package resilient

import (
	"net/http"
	"time"

	"github.com/resilienthttp/resilient/internal/retryafter"
)

// ServerDelay returns the delay a response's headers direct before the
// next request, as DefaultClassifier reads it into Decision.Delay. It reads
// the first present and valid of:
//
//   - Retry-After-Ms (Stainless APIs);
//   - x-ms-retry-after-ms (Azure);
//   - Retry-After: delay-seconds, or an HTTP-date measured against the
//     response's Date;
//   - the IETF RateLimit fields when a quota is spent;
//   - X-Amz-Retry-After (at most 5 s).
//
// It returns 0 when none directs a delay. Malformed values are ignored;
// huge ones are clamped to a year. The result is not capped by
// WithRetryAfterMax.
//
// It is public for a Classifier that does not wrap DefaultClassifier, so
// that its Decision.Delay honours the server as the default does, and for
// retry libraries that compute their own waits (retryablehttpadapter).
func ServerDelay(h http.Header, now time.Time) time.Duration { return retryafter.Delay(h, now) }
