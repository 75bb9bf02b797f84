package resilient

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resilienthttp/resilient/internal/host"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/internal/stubtest"
)

// answers is a server that answers each request with the next of its
// statuses (the last one repeated); "503+" is a 503 with Retry-After: 1.
type answers struct {
	mu   sync.Mutex
	list []string
	n    int
}

func (s *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	s.mu.Lock()
	a := s.list[min(s.n, len(s.list)-1)]
	s.n++
	s.mu.Unlock()
	h := http.Header{}
	code := 200
	switch a {
	case "503":
		code = 503
	case "503+":
		code = 503
		h.Set("Retry-After", "1")
	}
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
}

func times(n int, a string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = a
	}
	return out
}

// A 503 with Retry-After pauses its operation only: the retry waits the
// delay when the deadline allows, then goes out, and the host's other
// retries are not held. So on a cold host (no first attempts, or fewer
// than firstsMin): too few to tell is no evidence of shedding. On a host
// whose first attempts show that it sheds (more than 1 in 7 failed of
// firstsMin or more) the retry is refused at once, and the caller has the
// 503 as from a bare client, never later than one attempt.
func TestRetryAfter503PausesTheOperationOnlyUnlessFirstAttemptsShowShedding(t *testing.T) {
	tests := []struct {
		name     string
		before   []string // first attempts before the operation, one each
		deadline time.Duration
		want     int           // the operation's status
		attempts int           // the operation's attempts
		took     time.Duration // the operation's time
		hostHeld bool          // other retries to the host held back after it
	}{
		{"healthy: the operation waits and retries", times(20, "200"), time.Minute, 200, 2, time.Second, false},
		{"healthy, 1 in 7 failed, this 503 included", append(times(18, "200"), "503", "503"), time.Minute, 200, 2, time.Second, false},
		{"healthy, deadline too short for the wait", times(20, "200"), 500 * time.Millisecond, 503, 1, 0, false},
		{"cold host, no first attempts: the operation waits and retries", nil, time.Minute, 200, 2, time.Second, false},
		{"too few first attempts to tell: the operation waits and retries", times(18, "200"), time.Minute, 200, 2, time.Second, false},
		{"a cold host's second call, both failed: the operation waits and retries", times(1, "503+"), time.Minute, 200, 2, time.Second, false},
		{"few first attempts, three of three failed: shedding", times(2, "503+"), time.Minute, 503, 1, 0, true},
		{"few first attempts, most failed: shedding", append(times(3, "200"), times(8, "503+")...), time.Minute, 503, 1, 0, true},
		{"cold host, deadline too short for the wait", nil, 500 * time.Millisecond, 503, 1, 0, false},
		{"2 in 5 failed: shedding", append(times(12, "200"), times(7, "503")...), time.Minute, 503, 1, 0, true},
		{"3 in 20 failed: within what a healthy host shows", append(times(17, "200"), "503", "503"), time.Minute, 200, 2, time.Second, false},
		{"most failed (overload): shedding", append(times(8, "200"), times(12, "503+")...), time.Minute, 503, 1, 0, true},
		// A full healthy bucket, then a queue that fills: the window
		// alone (212 healthy, 8 failed) would still look healthy.
		{"a fresh surge after a healthy bucket: shedding", append(times(host.FirstsPer+12, "200"), times(7, "503")...), time.Minute, 503, 1, 0, true},
		{"after a healthy bucket, 1 in 7 failed now: healthy", append(times(host.FirstsPer+18, "200"), "503", "503"), time.Minute, 200, 2, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &answers{list: append(append(tt.before, "503+"), "200")}
				tr := NewTransport(s, WithMaxAttempts(1))
				for range tt.before { // one attempt each, not retried
					resp, err := tr.RoundTrip(stubtest.Get(context.Background(), "api.test"))
					require.NoError(t, err)
					resp.Body.Close()
				}
				tr.cfg.maxAttempts = 3 // the operation may retry
				// Past the pauses the attempts before may have set (1 s),
				// still within the window.
				time.Sleep(time.Second)
				ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
				defer cancel()
				rep := new(Report)
				start := time.Now()
				resp, err := tr.RoundTrip(stubtest.Get(ContextWithReport(ctx, rep), "api.test"))
				require.NoError(t, err, "the caller has an answer")
				resp.Body.Close()
				took := time.Since(start)
				assert.Equal(t, tt.want, resp.StatusCode)
				assert.Len(t, rep.Attempts, tt.attempts)
				assert.Equal(t, tt.took, took)
				assert.Less(t, took, tt.deadline, "never past the deadline")
				if tt.attempts == 1 {
					assert.ErrorIs(t, rep.Stopped, ErrDelayTooLong, "refused before any wait")
				}
				// The 503 came at start: did it hold the host's retries?
				v, ok := tr.hosts.M.Load("api.test")
				require.True(t, ok)
				assert.Equal(t, tt.hostHeld, v.(*host.State).Pauses.Shedding(start.UnixNano()), "the host's retries held")
			})
		})
	}
}

// A cold host waits out one Retry-After at a time: of two operations
// whose first attempts get a 503 with Retry-After at once, one waits and
// retries; the other's 503 is taken as the host shedding, and its caller
// has it at once, as from a bare client. One after the other, each waits.
func TestColdHostWaitsOneRetryAfterAtATime(t *testing.T) {
	for _, together := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			s := &answers{list: []string{"503+", "503+", "200"}}
			if !together {
				s.list = []string{"503+", "200"}
			}
			tr := NewTransport(s)
			reps := []*Report{new(Report), new(Report)}
			var wg sync.WaitGroup
			for i, rep := range reps {
				run := func() {
					resp, err := tr.RoundTrip(stubtest.Get(ContextWithReport(context.Background(), rep), "api.test"))
					require.NoError(t, err)
					resp.Body.Close()
				}
				if !together {
					if i == 1 { // the first one's answers, then the second's
						s.mu.Lock()
						s.list, s.n = []string{"503+", "200"}, 0
						s.mu.Unlock()
					}
					run()
					continue
				}
				wg.Go(run)
				synctest.Wait() // the first attempt answered, in order
			}
			wg.Wait()
			if together {
				got := []int{len(reps[0].Attempts), len(reps[1].Attempts)}
				assert.ElementsMatch(t, []int{2, 1}, got, "one waits and retries, one is refused")
				one := reps[0]
				if len(one.Attempts) == 2 {
					one = reps[1]
				}
				assert.ErrorIs(t, one.Stopped, ErrDelayTooLong)
				return
			}
			assert.Len(t, reps[0].Attempts, 2, "one after the other: the first waits and retries")
			assert.Len(t, reps[1].Attempts, 2, "and so does the second")
		})
	}
}

// byPath is a server that answers a request to /a with the next of a's
// statuses (as answers does) and any other with other.
type byPath struct {
	a     answers
	other int
}

func (s *byPath) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/a" {
		return s.a.RoundTrip(req)
	}
	return &http.Response{StatusCode: s.other, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// A cold host's retry that waited out a 503's Retry-After is judged again
// when the wait ends: if the first attempts sent meanwhile show that the
// host sheds (with the first one's failure, 4 of 4 failed), the retry is
// not sent and the caller has the 503, as from a bare client. First
// attempts that show nothing (one failed, or every one healthy) leave the
// retry to go out, as the single call of a cold client does.
func TestColdHostRetryJudgedAgainAfterItsWait(t *testing.T) {
	tests := []struct {
		name          string
		others, other int
		wantAttempts  int
	}{
		{"three others fail meanwhile: the host sheds", 3, 503, 1},
		{"one other fails meanwhile: no evidence", 1, 503, 2},
		{"three others succeed meanwhile", 3, 200, 2},
		{"nothing else is sent", 0, 200, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &byPath{a: answers{list: []string{"503+", "200"}}, other: tt.other}
				tr := NewTransport(s)
				rep := new(Report)
				var wg sync.WaitGroup
				var got *http.Response
				wg.Go(func() {
					req, err := http.NewRequestWithContext(ContextWithReport(context.Background(), rep), http.MethodGet, "http://api.test/a", nil)
					require.NoError(t, err)
					got, err = tr.RoundTrip(req)
					require.NoError(t, err)
					got.Body.Close()
				})
				synctest.Wait() // /a answered 503 + Retry-After: 1 and waits
				time.Sleep(100 * time.Millisecond)
				for range tt.others { // their first attempts at once, before /a's wait ends
					wg.Go(func() {
						resp, err := tr.RoundTrip(stubtest.Get(context.Background(), "api.test"))
						require.NoError(t, err)
						resp.Body.Close()
					})
				}
				wg.Wait()
				assert.Len(t, rep.Attempts, tt.wantAttempts)
				if tt.wantAttempts == 1 {
					assert.Equal(t, http.StatusServiceUnavailable, got.StatusCode, "the 503 stands")
					assert.ErrorIs(t, rep.Stopped, ErrDelayTooLong)
					return
				}
				assert.Equal(t, http.StatusOK, got.StatusCode)
			})
		})
	}
}

// A host that keeps shedding (every answer 503 with Retry-After, renewed by
// other requests) gets no retries once its first attempts show it (cold,
// it gets the few its retry tokens allow), and no retry is slept for and
// then dropped: the caller of each operation gets the 503 at once, decided
// before any wait, as from a bare client. First attempts still go out.
func TestRetriesStopWhileTheHostKeepsShedding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := stubtest.New(stubtest.Deduping([]int{503}, "Retry-After: 1")...)
		tr := NewTransport(s)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var (
			others sync.WaitGroup
			mu     sync.Mutex
			waited int // calls that took time: a retry was waited for
			sent   int // attempts the others sent
		)
		others.Go(func() { // other operations, one starting every 100 ms
			for ctx.Err() == nil {
				others.Go(func() {
					rep := new(Report)
					start := time.Now()
					if resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(ctx, rep), "{}")); err == nil {
						resp.Body.Close()
					}
					mu.Lock()
					defer mu.Unlock()
					sent += len(rep.Attempts)
					if time.Since(start) > 0 {
						waited++
					}
				})
				time.Sleep(100 * time.Millisecond)
			}
		})
		time.Sleep(3 * time.Second)
		rep := new(Report)
		start := time.Now()
		resp, err := tr.RoundTrip(stubtest.Post(ContextWithReport(context.Background(), rep), "{}"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, rep.Attempts, 1, "no retry while the host sheds")
		assert.ErrorIs(t, rep.Stopped, ErrDelayTooLong)
		assert.Zero(t, time.Since(start), "decided before any wait")
		cancel()
		others.Wait()
		// Until firstsMin first attempts, the host is cold: no evidence
		// that it sheds, so its 503s' retries wait the delay, as many as
		// the retry tokens allow (a fresh bucket: 3). From then on, no
		// retry waited while others were shed.
		assert.LessOrEqual(t, waited, 3, "only the cold host's retries, within the tokens")
		assert.LessOrEqual(t, sent, 31+3, "first attempts, and the cold host's retries")
	})
}
