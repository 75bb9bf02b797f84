package resilient

import (
	"context"
	"math"
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

// The window judges the host shedding from firstsMin first attempts with
// more than 1 in 7 failed, and never from fewer (a cold host); a bucket
// closes after firstsPer first attempts or firstsAge, and what is older
// than two buckets is forgotten.
func TestFirstsShedding(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tests := []struct {
		name       string
		ok, failed int
		after      time.Duration // when healthy is asked, after the notes
		want       bool
	}{
		{"nothing sent: no evidence", 0, 0, 0, false},
		{"too few to judge, one failed", 0, 1, 0, false},
		{"too few to judge, two of three failed", 1, 2, 0, false},
		{"few, but most failed", 1, host.FirstsMin - 2, 0, true},
		{"enough, all healthy", host.FirstsMin, 0, 0, false},
		{"1 in 7 failed", 6 * host.FirstsMin, host.FirstsMin, 0, false},
		{"a third failed (a host shedding a third)", 2 * host.FirstsMin, host.FirstsMin, 0, true},
		{"1 in 10 failed of two buckets (one bad backend of ten)", 360, 40, 0, false},
		{"1 in 5 failed of two buckets", 320, 80, 0, true},
		{"most failed", host.FirstsMin, 2 * host.FirstsMin, 0, true},
		{"all failed, just enough", 0, host.FirstsMin, 0, true},
		{"an aged bucket still counts", 0, host.FirstsMin, host.FirstsAge + time.Second, true},
		{"forgotten after two ages", 0, host.FirstsMin, 2*host.FirstsAge + time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f host.Firsts
			for range tt.ok {
				f.Note(t0.UnixNano(), true)
			}
			for range tt.failed {
				f.Note(t0.UnixNano(), false)
			}
			assert.Equal(t, tt.want, f.Shedding(t0.Add(tt.after).UnixNano()))
		})
	}
}

// The window holds the last one to two buckets of first attempts: a full
// bucket counts as the bucket before while the next fills; two buckets of
// failures push earlier healthy ones out; a bucket aged out starts afresh,
// its counts kept as the bucket before.
func TestFirstsWindowSlides(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	notes := func(f *host.Firsts, n int, at time.Time, ok bool) {
		for range n {
			f.Note(at.UnixNano(), ok)
		}
	}
	var full host.Firsts
	notes(&full, host.FirstsPer, t0, true)
	full.Note(t0.UnixNano(), false) // a new bucket
	assert.False(t, full.Shedding(t0.UnixNano()), "the full bucket still counts")

	var pushed host.Firsts
	notes(&pushed, host.FirstsPer, t0, true)
	notes(&pushed, 2*host.FirstsPer, t0, false)
	assert.True(t, pushed.Shedding(t0.UnixNano()), "two buckets of failures: the healthy ones are out of the window")

	var aged host.Firsts
	notes(&aged, host.FirstsPer/2, t0, true)
	later := t0.Add(host.FirstsAge + time.Millisecond)
	aged.Note(later.UnixNano(), false) // the aged bucket becomes the one before
	assert.False(t, aged.Shedding(later.UnixNano()), "%d healthy before, 1 failed now", host.FirstsPer/2)
	var agedFail host.Firsts
	notes(&agedFail, host.FirstsMin, t0, false)
	assert.True(t, agedFail.Shedding(t0.UnixNano()))
	assert.False(t, agedFail.Shedding(t0.Add(3*host.FirstsAge).UnixNano()), "all aged out")
}

// A fresh surge of failures is not hidden by a healthy bucket before it:
// once the current bucket holds firstsMin first attempts, it must pass the
// ratio too. Below firstsMin it is judged with the window only.
func TestFirstsCurrentBucketMustBeHealthyToo(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tests := []struct {
		name       string
		ok, failed int // in the current bucket, after a full healthy one
		want       bool
	}{
		{"1 in 7 failed now", 6 * 3, 3, false},
		{"2 in 5 failed now", 12, 8, true},
		{"3 in 20 failed now: within what a healthy host shows", 17, 3, false},
		{"a surge too small to judge alone", 0, host.FirstsMin - 1, false},
		{"a surge of firstsMin failures", 0, host.FirstsMin, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f host.Firsts
			for range host.FirstsPer {
				f.Note(t0.UnixNano(), true)
			}
			for range tt.ok {
				f.Note(t0.UnixNano(), true)
			}
			for range tt.failed {
				f.Note(t0.UnixNano(), false)
			}
			pOK, pFail, cOK, cFail, _ := host.FirstsCounts(f.W.Load(), host.FirstsNow(t0.UnixNano()))
			require.Equal(t, [4]uint64{host.FirstsPer, 0, uint64(tt.ok), uint64(tt.failed)}, [4]uint64{pOK, pFail, cOK, cFail})
			ok, failed := pOK+cOK, pFail+cFail
			require.GreaterOrEqual(t, ok, host.FirstsRatio*failed, "the window alone is healthy")
			assert.Equal(t, tt.want, f.Shedding(t0.UnixNano()))
		})
	}
}

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

// firstsFewest holds, for each n up to two buckets, the fewest failed of
// n first attempts that a healthy host (each failing with probability 1/7)
// shows less than 1 % of the time: the binomial tail, computed here by
// another route (products, not log-gamma).
func TestFirstsFewestIsTheBinomialTail(t *testing.T) {
	const p = 1.0 / (host.FirstsRatio + 1)
	got := host.FirstsFewest()
	for n := range 2*host.FirstsPer + 1 {
		want := 0
		for k := 0; k <= n; k++ {
			tail := 0.0
			for j := k; j <= n; j++ {
				tail += binomial(n, j) * math.Pow(p, float64(j)) * math.Pow(1-p, float64(n-j))
			}
			if tail < host.FirstsAlpha {
				want = k
				break
			}
		}
		require.Equal(t, want, int(got[n]), "n = %d", n)
	}
	assert.Equal(t, [...]uint16{0, 0, 0, 3, 4, 4}, [6]uint16(got[:6]), "a cold client's one or two failed calls are no evidence")
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// Fewer than firstsMin first attempts judge the host shedding only when as
// many failed as a healthy host would rarely show: never one or two calls
// of a cold client, always three of three.
func TestFirstsFewFailedOfFew(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UnixNano()
	tests := []struct {
		ok, failed int
		want       bool
	}{
		{0, 1, false}, {0, 2, false}, {1, 1, false}, {0, 3, true}, {1, 2, false}, {1, 3, false},
		{0, 4, true}, {6, 4, false}, {5, 5, true}, {11, 8, true}, {12, 7, false}, {17, 2, false},
	}
	for _, tt := range tests {
		var f host.Firsts
		for range tt.ok {
			f.Note(t0, true)
		}
		for range tt.failed {
			f.Note(t0, false)
		}
		assert.Equal(t, tt.want, f.Shedding(t0), "%d healthy, %d failed", tt.ok, tt.failed)
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
