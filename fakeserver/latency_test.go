package fakeserver

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatencyDistSlowTail(t *testing.T) {
	for _, draw := range []Draw{DrawOperation, DrawStream} {
		t.Run(string(draw), func(t *testing.T) {
			dist := &LatencyDist{Median: Duration(10 * time.Millisecond), Sigma: 0.2, SlowRate: 0.02, SlowFactor: 20}
			p, err := newRoutePlan(Route{Match: "GET /v1/x/{id}", Draw: draw, Latency: dist}, 7)
			require.NoError(t, err)
			var ops opCounts
			const n = 20000
			ds := make([]time.Duration, n)
			for i := range ds {
				ds[i] = time.Duration(p.next(strconv.Itoa(i), &ops).Latency)
			}
			slices.Sort(ds)
			assert.InDelta(t, float64(10*time.Millisecond), float64(ds[n/2]), float64(time.Millisecond), "median")
			slow := 0
			for _, d := range ds {
				if d > 80*time.Millisecond {
					slow++
				}
			}
			assert.InDelta(t, 0.02, float64(slow)/n, 0.004, "2 %% of requests 20× slower")
		})
	}
}

// With DrawOperation, the k-th attempt of an operation takes the same time
// whatever else arrived: a hedge meets its own draw, the same for every
// strategy.
func TestLatencyDistDeterministicPerOperation(t *testing.T) {
	dist := &LatencyDist{Median: Duration(10 * time.Millisecond), Sigma: 0.5, SlowRate: 0.1, SlowFactor: 20}
	draws := func(order []int) map[string]Duration {
		p, err := newRoutePlan(Route{Match: "*", Draw: DrawOperation, Latency: dist}, 1)
		require.NoError(t, err)
		var ops opCounts
		out := map[string]Duration{}
		for _, i := range order {
			op := strconv.Itoa(i)
			f1 := p.next(op, &ops)
			f2 := p.next(op, &ops)
			out[op+"/1"], out[op+"/2"] = f1.Latency, f2.Latency
		}
		return out
	}
	a, b := draws([]int{1, 2, 3, 4}), draws([]int{4, 3, 2, 1})
	assert.Equal(t, a, b)
	assert.NotEqual(t, a["1/1"], a["1/2"], "each attempt draws its own latency")
}

func TestLatencyDistInScenarioJSON(t *testing.T) {
	var sc Scenario
	require.NoError(t, json.Unmarshal([]byte(`{"routes":[{"match":"GET /v1/items/{id}",
		"latency":{"median":"10ms","sigma":0.25,"slow_rate":0.02,"slow_factor":20}}]}`), &sc))
	require.NoError(t, sc.Validate())
	assert.Equal(t, &LatencyDist{Median: Duration(10 * time.Millisecond), Sigma: 0.25, SlowRate: 0.02, SlowFactor: 20}, sc.Routes[0].Latency)
	for _, bad := range []LatencyDist{{Median: -1}, {Sigma: -1}, {SlowRate: 2}, {SlowFactor: 0.5}} {
		sc := Scenario{Routes: []Route{{Latency: &bad}}}
		assert.Error(t, sc.Validate(), "%+v", bad)
	}
}
