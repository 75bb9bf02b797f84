package storm

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/resilienthttp/resilient/fakeserver"
)

// vcapacity is the fake server's capacity model (fakeserver.Capacity, as
// Config.Capacity sets it) run by a virtual run's driver instead of by the
// requests' own timers: MaxConcurrent slots, each held for the service
// time plus a share of the debt that shed requests leave (at most 4
// service times); a FIFO queue of at most Queue requests waiting at most
// QueueTimeout; beyond, a 503 with Retry-After at once, costing the shed
// cost. A request that finds a free slot or room in the queue, or is shed,
// learns it in its turn; the driver ends services, hands freed slots to
// the queue and sheds the requests that waited too long, at their instants
// and in a fixed order (ends, then the queue, then timeouts; by end then
// key). fakeserver's own model does the same with a timer per request,
// whose ties at one instant (the service time, the queue timeout and the
// arrivals are whole milliseconds apart) resolve in the runtime's order.
type vcapacity struct {
	max        int
	service    time.Duration
	queueMax   int
	queueWait  time.Duration // 0: no limit
	shedCost   time.Duration
	maxDebt    time.Duration
	retryAfter time.Duration
	notify     func()

	mu        sync.Mutex
	busy      []*vreq // in service
	queue     []*vreq // FIFO
	gone      []*vreq // callers that gave up, for the driver
	release   []vrelease
	debt      time.Duration
	shed      int64
	arrivals  int64
	abandoned int64
}

// vreq is one request at the capacity model.
type vreq struct {
	key     uint64
	end     time.Time // in service: when it ends; queued: when it is shed (zero: never)
	verdict chan bool // true: served, false: shed; buffered, 1
	decided bool
	queued  bool
}

// vrelease is a verdict the driver hands out, one per turn.
type vrelease struct {
	r      *vreq
	served bool
}

func newVCapacity(cfg Config, notify func()) *vcapacity {
	c := cfg.Capacity
	if c.MaxConcurrent <= 0 {
		return nil
	}
	return &vcapacity{max: c.MaxConcurrent, service: c.ServiceTime, queueMax: c.Queue, queueWait: c.QueueTimeout,
		shedCost: time.Duration(cfg.ShedCost * float64(c.ServiceTime)), maxDebt: time.Duration(c.MaxConcurrent) * time.Second,
		retryAfter: cfg.ShedRetryAfter, notify: notify}
}

// admit is a request arriving at now, in its turn (nothing else of the
// bubble runs). It returns once the request has been served its slot's
// time (true), or was shed (false); gone reports that the caller gave up
// first.
func (m *vcapacity) admit(ctx context.Context, now time.Time, key uint64) (served, gone bool) {
	r := &vreq{key: key, verdict: make(chan bool, 1)}
	m.mu.Lock()
	m.arrivals++
	switch {
	case len(m.busy) < m.max:
		m.start(r, now)
	case len(m.queue) < m.queueMax:
		r.queued = true
		if m.queueWait > 0 {
			r.end = now.Add(m.queueWait)
		}
		m.queue = append(m.queue, r)
	default:
		m.owe()
		m.mu.Unlock()
		return false, false
	}
	m.mu.Unlock()
	select {
	case v := <-r.verdict:
		return v, false
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.decided {
		return <-r.verdict, false
	}
	r.decided = true
	m.gone = append(m.gone, r)
	m.notify()
	return false, true
}

// start puts r in service at now: the service time and its share of the
// debt (fakeserver's capacity.hold).
func (m *vcapacity) start(r *vreq, now time.Time) {
	pay := min(m.debt, 4*m.service)
	m.debt -= pay
	r.queued = false
	r.end = now.Add(m.service + pay)
	m.busy = append(m.busy, r)
}

// owe adds a shed request's cost to the debt and counts it.
func (m *vcapacity) owe() {
	m.shed++
	m.debt = min(m.debt+m.shedCost, m.maxDebt)
}

// tick does what is due at now: drops the requests whose callers gave up,
// ends the services due, hands the free slots to the queue, sheds the
// requests that waited too long. The verdicts wait for next.
func (m *vcapacity) tick(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byKey := func(a, b *vreq) int { return cmp.Compare(a.key, b.key) }
	slices.SortFunc(m.gone, byKey)
	for _, r := range m.gone {
		m.busy = slices.DeleteFunc(m.busy, func(o *vreq) bool { return o == r })
		m.queue = slices.DeleteFunc(m.queue, func(o *vreq) bool { return o == r })
		m.abandoned++
	}
	m.gone = m.gone[:0]
	var ended []*vreq
	m.busy = slices.DeleteFunc(m.busy, func(r *vreq) bool {
		if r.end.After(now) {
			return false
		}
		ended = append(ended, r)
		return true
	})
	slices.SortFunc(ended, func(a, b *vreq) int { return cmp.Or(a.end.Compare(b.end), byKey(a, b)) })
	for _, r := range ended {
		m.decide(r, true)
	}
	for len(m.busy) < m.max && len(m.queue) > 0 {
		r := m.queue[0]
		m.queue = m.queue[1:]
		m.start(r, now)
	}
	m.queue = slices.DeleteFunc(m.queue, func(r *vreq) bool {
		if r.end.IsZero() || r.end.After(now) {
			return false
		}
		m.owe()
		m.decide(r, false)
		return true
	})
}

// decide records r's verdict, to be handed out by next.
func (m *vcapacity) decide(r *vreq, served bool) {
	r.decided = true
	m.release = append(m.release, vrelease{r, served})
}

// next hands out the first verdict not yet given, if any, waking its
// request.
func (m *vcapacity) next() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.release) == 0 {
		return false
	}
	v := m.release[0]
	m.release = m.release[1:]
	v.r.verdict <- v.served
	return true
}

// nextEvent returns the earliest instant at which tick has something to
// do, or the zero time.
func (m *vcapacity) nextEvent() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var at time.Time
	for _, q := range [][]*vreq{m.busy, m.queue} {
		for _, r := range q {
			if !r.end.IsZero() && (at.IsZero() || r.end.Before(at)) {
				at = r.end
			}
		}
	}
	return at
}

// shedAnswer is the fake server's answer to a request it sheds: a 503
// problem with the Retry-After of the capacity, and the request's key
// echoed, as fakeserver sends it.
func (m *vcapacity) shedAnswer(req *http.Request) *http.Response {
	body := `{"type":"` + fakeserver.ProblemTypeBase + `over-capacity","title":"Service Unavailable","status":503,` +
		`"detail":"fakeserver: over capacity"}` + "\n"
	h := http.Header{"Content-Type": {"application/problem+json"}, "Content-Length": {strconv.Itoa(len(body))}}
	if m.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((m.retryAfter+time.Second-1)/time.Second), 10))
	}
	for k, v := range req.Header {
		if strings.EqualFold(k, "Idempotency-Key") && len(v) == 1 {
			h.Set("Idempotency-Key", v[0])
		}
	}
	return &http.Response{Status: "503 Service Unavailable", StatusCode: http.StatusServiceUnavailable, Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: h, ContentLength: int64(len(body)), Request: req,
		Body: io.NopCloser(strings.NewReader(body))}
}
