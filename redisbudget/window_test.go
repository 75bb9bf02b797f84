package redisbudget

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memoryAt returns a Memory backend whose clock is *now.
func memoryAt(now *time.Time) *Memory {
	return &Memory{now: func() time.Time { return *now }}
}

// flushOne flushes one request to m and returns the reply.
func flushOne(t *testing.T, m *Memory, rule Rule, r Request) Reply {
	t.Helper()
	reps, err := m.Flush(context.Background(), rule, []Request{r})
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.NoError(t, reps[0].Err)
	return reps[0]
}

// The window allows Ratio × first attempts + the reserve, rounded up as a
// Budget rounds it, and forgets a bucket a Window after it was written.
func TestWindowRuleAndRoll(t *testing.T) {
	rule := Config{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second}.resolve().rule
	require.Equal(t, 10.0, rule.Reserve)
	now := time.Unix(1_800_000_000, 0)
	m := memoryAt(&now)
	p := Request{Name: "h", Process: "p1", Want: true, Demand: 1}

	r := p
	r.Deposits = 101 // 0.2 × 101 + 10 = 30.2: 31 permits
	rep := flushOne(t, m, rule, r)
	assert.Equal(t, int64(31), rep.Grant, "one process with demand gets every permit")
	assert.Equal(t, int64(1), rep.Processes)

	// All used: nothing left, within the window.
	now = now.Add(5 * time.Second)
	r = p
	r.UnusedEpoch = rep.Epoch
	rep = flushOne(t, m, rule, r)
	assert.Equal(t, int64(0), rep.Grant)

	// 10 s after the first bucket, it has left the window: the reserve is
	// back, less nothing (the empty grant charged nothing).
	now = now.Add(5 * time.Second)
	rep = flushOne(t, m, rule, p)
	assert.Equal(t, int64(10), rep.Grant)
}

// Unused permits go back to the bucket charged for them; permits used beyond
// the lease (Unused < 0) are charged to the current bucket.
func TestWindowGiveBack(t *testing.T) {
	rule := Config{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second}.resolve().rule
	now := time.Unix(1_800_000_000, 0)
	m := memoryAt(&now)
	rep := flushOne(t, m, rule, Request{Name: "h", Process: "p", Deposits: 20, Demand: 1, Want: true})
	require.Equal(t, int64(10), rep.Grant)
	now = now.Add(time.Second)
	// 4 used, 6 given back: 6 permits left, all granted again.
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "p", Unused: 6, UnusedEpoch: rep.Epoch, Demand: 1, Want: true})
	require.Equal(t, int64(6), rep.Grant)
	// 7 used of 6 (one permit refunded locally, then used): -1 charged.
	now = now.Add(time.Second)
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "p", Unused: -1, UnusedEpoch: rep.Epoch, Demand: 1, Want: true})
	require.Equal(t, int64(0), rep.Grant)
	// 10 more first attempts: 5 permits, less the one overdrawn.
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "p", Deposits: 10, Demand: 1, Want: true})
	require.Equal(t, int64(4), rep.Grant)
	// A process that wants none gives its lease back and gets none.
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "p", Unused: 4, UnusedEpoch: rep.Epoch})
	require.Equal(t, int64(0), rep.Grant)
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "p", Demand: 1, Want: true})
	require.Equal(t, int64(4), rep.Grant)
}

// The permits left are divided among the processes with demand; a process
// without demand gets one permit and does not count.
func TestWindowShares(t *testing.T) {
	rule := Config{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second, FlushInterval: time.Second}.resolve().rule
	now := time.Unix(1_800_000_000, 0)
	m := memoryAt(&now)
	flushOne(t, m, rule, Request{Name: "h", Process: "a", Deposits: 100, Demand: 1})
	flushOne(t, m, rule, Request{Name: "h", Process: "b", Demand: 1})
	rep := flushOne(t, m, rule, Request{Name: "h", Process: "c", Demand: 1, Want: true})
	assert.Equal(t, int64(3), rep.Processes)
	assert.Equal(t, int64(34), rep.Grant, "⌈100/3⌉")
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "d", Want: true})
	assert.Equal(t, int64(1), rep.Grant, "no demand: one permit")
	assert.Equal(t, int64(3), rep.Processes)
	// a and b stop flushing: after the process TTL only c shares.
	now = now.Add(rule.ProcessTTL + time.Millisecond)
	rep = flushOne(t, m, rule, Request{Name: "h", Process: "c", Demand: 1, Want: true})
	assert.Equal(t, int64(1), rep.Processes)
	assert.Equal(t, int64(65), rep.Grant)
	// Other budgets are other windows.
	rep = flushOne(t, m, rule, Request{Name: "other", Process: "c", Demand: 1, Want: true})
	assert.Equal(t, int64(0), rep.Grant)
}

func TestConfigDefaults(t *testing.T) {
	s := Config{}.resolve()
	assert.Equal(t, Rule{Ratio: 0.2, Reserve: 100, Bucket: time.Second, ProcessTTL: 3*time.Second + 50*time.Millisecond}, s.rule)
	assert.Equal(t, int64(128), s.every)
	assert.Equal(t, time.Second, s.interval)
	assert.Equal(t, 50*time.Millisecond, s.timeout)
	assert.Equal(t, "resilient:budget:", s.prefix)
	s = Config{Window: 2 * time.Second, Ratio: -1}.resolve()
	assert.Equal(t, 200*time.Millisecond, s.interval, "at most a bucket")
	assert.Equal(t, 0.0, s.rule.Ratio)
	assert.Equal(t, 20.0, s.rule.Reserve)
}

// A call that returned is no longer in flight: the next one, made at once,
// is sent (a call marked done only after its result was delivered made the
// next flush fail with errBusy, dropping its first attempts; -race, as
// scripts/test runs it, makes that order fail this test).
func TestCallsBackToBack(t *testing.T) {
	f := NewWithBackend(NewMemory(), Config{FlushInterval: time.Hour})
	defer f.Close()
	reqs := []Request{{Name: "h", Process: "p", Deposits: 1}}
	for i := range 2000 {
		_, err := f.call(reqs)
		require.NoError(t, err, "call %d", i)
	}
}
