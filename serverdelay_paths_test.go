package resilient_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdTry is one way a client retries: tries of one logical call, each
// built by the loop and sent through c, with the loop's own backoff.
type sdTry func(req *http.Request, try int)

// A server's delay holds on every path: whatever retries the operation —
// the Transport, an SDK's marked loop, a hand-written loop without marks —
// no retry leaves before the time the server named, and none waits past
// that time plus the loop's own backoff. Virtual time (a synctest bubble).
func TestServerDelayHoldsOnEveryPath(t *testing.T) {
	const backoff = 10 * time.Millisecond // the loop's own wait between tries
	loops := []struct {
		name  string
		tries int // 1: the Transport retries alone
		fails int // the server's failures before it succeeds
		// own: the Transport's own retries' backoff, at most 2 s by
		// default: it waits the longer of it and the server's delay.
		own  time.Duration
		mark sdTry
	}{
		{"plain call", 1, 2, 2 * time.Second, func(*http.Request, int) {}},
		{"aws marked loop", 3, 2, 0, func(req *http.Request, try int) {
			req.Header.Set("Amz-Sdk-Invocation-Id", "6f2a3b9c-0d1e-4f5a-8b7c-9d0e1f2a3b4c")
			req.Header.Set("Amz-Sdk-Request", "attempt="+strconv.Itoa(try+1)+"; max=3")
		}},
		{"stainless marked loop", 3, 2, 0, func(req *http.Request, try int) {
			req.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(try))
		}},
		// Five failures: the Transport's own four attempts fail, then the
		// loop's re-send, recognised, is one attempt.
		{"unmarked loop", 3, 5, 2 * time.Second, func(*http.Request, int) {}},
	}
	delays := []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
	}{
		{"429 Retry-After-Ms", 429, http.Header{"Retry-After-Ms": {"300"}}, 300 * time.Millisecond},
		{"429 Retry-After", 429, http.Header{"Retry-After": {"1"}}, time.Second},
		{"503 Retry-After", 503, http.Header{"Retry-After": {"1"}}, time.Second},
		{"503 x-ms-retry-after-ms", 503, http.Header{"X-Ms-Retry-After-Ms": {"700"}}, 700 * time.Millisecond},
		{"429 X-Amz-Retry-After", 429, http.Header{"X-Amz-Retry-After": {"400"}}, 400 * time.Millisecond},
		{"429 RateLimit", 429, http.Header{"Ratelimit": {`"default";r=0;t=2`}}, 2 * time.Second},
	}
	for _, lp := range loops {
		for _, dl := range delays {
			for _, warmed := range []bool{false, true} {
				name := lp.name + "/" + dl.name
				if warmed {
					name += "/warmed"
				}
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						var (
							mu    sync.Mutex
							times = map[string][]time.Time{}
						)
						n := newPipeNet(func(w http.ResponseWriter, r *http.Request) {
							io.Copy(io.Discard, r.Body)
							call := r.Header.Get("X-Call")
							mu.Lock()
							times[call] = append(times[call], time.Now())
							i := len(times[call])
							mu.Unlock()
							if call == "warm" || i > lp.fails {
								w.WriteHeader(http.StatusOK)
								return
							}
							for k, v := range dl.header {
								w.Header()[k] = v
							}
							w.WriteHeader(dl.status)
						})
						defer n.close()
						c := resilient.Wrap(&http.Client{Transport: n.tr})
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						do := func(call string, tries int) string {
							var outcome string
							for try := range tries {
								req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/items", strings.NewReader(`{"id":1}`))
								require.NoError(t, err)
								req.Header.Set("X-Call", call)
								lp.mark(req, try)
								resp, err := c.Do(req)
								outcome = pnOutcome(resp, err)
								if outcome == "200" {
									break
								}
								time.Sleep(backoff)
							}
							return outcome
						}
						if warmed {
							require.Equal(t, "200", do("warm", 1))
						}
						bare := strconv.Itoa(dl.status) // the loop alone: a success only if it tries past the failures
						if lp.tries > lp.fails {
							bare = "200"
						}
						got := do("op", lp.tries)
						assert.GreaterOrEqual(t, pbRank(got), pbRank(bare), "wrapped %s, the loop alone %s", got, bare)
						at := times["op"]
						assert.LessOrEqual(t, len(at), lp.fails+1, "no request after the success")
						for i := 1; i < len(at); i++ {
							gap := at[i].Sub(at[i-1])
							assert.GreaterOrEqual(t, gap, dl.want, "try %d left %v after the one the server delayed", i, gap)
							assert.LessOrEqual(t, gap, dl.want+max(backoff, lp.own), "try %d waited %v", i, gap)
						}
					})
				})
			}
		}
	}
}
