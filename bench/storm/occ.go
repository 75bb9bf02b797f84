package storm

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/backoff"
)

// OCCConfig is the model of Brooker's "Exponential Backoff and Jitter" (AWS
// Architecture Blog, 2015), after the simulator published with it
// (aws-samples/aws-arch-backoff-simulator): N clients start together and
// each must write one row once with optimistic concurrency control — read
// the version, write if the version is unchanged, else back off and start
// over. Each message crosses a network whose delay is |N(NetMean, NetSD)|.
type OCCConfig struct {
	// Clients lists the numbers of contending clients to simulate.
	Clients []int
	// Runs is the number of simulations averaged per point.
	Runs int
	// NetMean and NetSD describe the network delay of each message.
	NetMean, NetSD time.Duration
	// Base and Cap parameterise every backoff.
	Base, Cap time.Duration
	// Seed seeds the network and the jitter.
	Seed uint64
}

// DefaultOCCConfig returns the post's parameters: delay N(10 ms, 2 ms), base
// 5 ms, cap 2 s; 10 to 100 clients; 100 runs per point.
func DefaultOCCConfig() OCCConfig {
	return OCCConfig{
		Clients: []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100},
		Runs:    100,
		NetMean: 10 * time.Millisecond, NetSD: 2 * time.Millisecond,
		Base: 5 * time.Millisecond, Cap: 2 * time.Second,
		Seed: 1,
	}
}

// OCCResult is the mean outcome of Runs simulations of one backoff with
// Clients clients.
type OCCResult struct {
	Backoff string `json:"backoff"`
	Clients int    `json:"clients"`
	// Calls is the number of write calls the server got until every client
	// had written (the "work" of the post).
	Calls float64 `json:"calls"`
	// TimeMs is the time until the last client had written.
	TimeMs float64 `json:"time_ms"`
}

// occBackoffs are the strategies of the post, built from resilient's
// Backoff types ("none" retries at once).
func occBackoffs(base, cap time.Duration) []struct {
	name string
	b    resilient.Backoff
} {
	return []struct {
		name string
		b    resilient.Backoff
	}{
		{"Exponential", resilient.Exponential(base, cap)},
		{"FullJitter", resilient.FullJitter(base, cap)},
		{"EqualJitter", resilient.EqualJitter(base, cap)},
		{"DecorrelatedJitter", resilient.DecorrelatedJitter(base, cap)},
		{"None", nil},
	}
}

// SimulateOCC runs the model for every backoff and number of clients of c.
// It is a discrete-event simulation (no goroutines, no clock): the backoffs
// are the SDK's own, made deterministic with internal/backoff's Seeded.
//
// The simulator's n-th retry waits base·2^n (10 ms first with base 5 ms);
// resilient's Backoff counts attempts from 1 with base·2^(attempt-1), so the
// simulation asks for attempt n+1 to get the same schedule.
func SimulateOCC(c OCCConfig) []OCCResult {
	var out []OCCResult
	for bi, bo := range occBackoffs(c.Base, c.Cap) {
		for _, n := range c.Clients {
			var calls, total float64
			for run := range c.Runs {
				seed := c.Seed*1_000_003 + uint64(bi)*10_007 + uint64(n)*101 + uint64(run)
				k, t := occRun(c, n, bo.b, seed)
				calls += float64(k)
				total += t
			}
			out = append(out, OCCResult{Backoff: bo.name, Clients: n,
				Calls: calls / float64(c.Runs), TimeMs: total / float64(c.Runs)})
		}
	}
	return out
}

// occ message kinds: what the event delivers and to whom.
const (
	occRead      = iota // a read request reaches the server
	occReadResp         // the version reaches the client
	occWrite            // a conditional write reaches the server
	occWriteResp        // the write's outcome reaches the client
)

type occEvent struct {
	at      float64 // ms
	kind    int
	client  int
	version int  // occReadResp, occWrite
	ok      bool // occWriteResp
	seq     int  // tie-breaker: insertion order
}

type occQueue []occEvent

func (q occQueue) Len() int { return len(q) }
func (q occQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q occQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *occQueue) Push(x any)   { *q = append(*q, x.(occEvent)) }
func (q *occQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// occRun simulates n clients once and returns the write calls and the time
// (ms) of the last event.
func occRun(c OCCConfig, n int, b resilient.Backoff, seed uint64) (calls int, end float64) {
	rng := rand.New(rand.NewPCG(seed, 0x0cc))
	mean, sd := ms(c.NetMean), ms(c.NetSD)
	delay := func() float64 { return math.Abs(rng.NormFloat64()*sd + mean) }
	type client struct {
		attempt int
		prev    time.Duration
		b       resilient.Backoff
	}
	clients := make([]client, n)
	q := make(occQueue, 0, 4*n)
	seq := 0
	push := func(e occEvent) {
		e.seq = seq
		seq++
		heap.Push(&q, e)
	}
	for i := range clients {
		clients[i].b = backoff.Seeded(b, seed^uint64(i+1)*0x9e3779b97f4a7c15)
		push(occEvent{at: delay(), kind: occRead, client: i})
	}
	version := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(occEvent)
		end = e.at
		switch e.kind {
		case occRead:
			push(occEvent{at: e.at + delay(), kind: occReadResp, client: e.client, version: version})
		case occReadResp:
			push(occEvent{at: e.at + delay(), kind: occWrite, client: e.client, version: e.version})
		case occWrite:
			calls++
			ok := e.version == version
			if ok {
				version++
			}
			push(occEvent{at: e.at + delay(), kind: occWriteResp, client: e.client, ok: ok})
		case occWriteResp:
			if e.ok {
				continue
			}
			cl := &clients[e.client]
			cl.attempt++
			var wait time.Duration
			if cl.b != nil {
				wait = cl.b.Delay(cl.attempt+1, cl.prev)
				cl.prev = wait
			}
			push(occEvent{at: e.at + delay() + ms(wait), kind: occRead, client: e.client})
		}
	}
	return calls, end
}

// ms converts d to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
