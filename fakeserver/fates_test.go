package fakeserver_test

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

// fateRoute is a route that fails half its requests, drawn per operation.
func fateRoute() fakeserver.Route {
	return fakeserver.Route{Match: "POST /v1/charges", FailureRate: 0.5, Draw: fakeserver.DrawOperation}
}

// TestOperationFatesAreTheSameWhateverTheOrder sends the attempts of the same
// operations to two servers in different orders and interleavings, as two
// retry strategies would: the k-th attempt of an operation meets the same fate
// on both, and the fate OperationFate predicts.
func TestOperationFatesAreTheSameWhateverTheOrder(t *testing.T) {
	const ops, attempts = 60, 4
	type attempt struct{ op, n int }
	var inOrder, shuffled []attempt
	for op := range ops {
		for n := 1; n <= attempts; n++ {
			inOrder = append(inOrder, attempt{op, n})
		}
	}
	// Another client: operations interleaved at random, but each
	// operation's attempts still in order, and some operations given fewer
	// attempts.
	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]int, ops)
	for {
		var open []int
		for op := range ops {
			if next[op] < attempts-op%2 {
				open = append(open, op)
			}
		}
		if len(open) == 0 {
			break
		}
		op := open[rng.IntN(len(open))]
		next[op]++
		shuffled = append(shuffled, attempt{op, next[op]})
	}

	tests := []struct {
		name    string
		keyed   bool // a keyed operation that succeeded is replayed (201) whatever its later fates
		headers func(op int) (key string, hdr map[string]string)
	}{
		{"operation header, no key", false, func(op int) (string, map[string]string) {
			return "", map[string]string{fakeserver.DefaultOperationHeader: strconv.Itoa(op)}
		}},
		{"idempotency key only", true, func(op int) (string, map[string]string) {
			return strconv.Itoa(op), nil
		}},
		{"header and key: the header names the operation", true, func(op int) (string, map[string]string) {
			return "key-" + strconv.Itoa(op), map[string]string{fakeserver.DefaultOperationHeader: strconv.Itoa(op)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcomes := func(order []attempt) map[attempt]int {
				s := fakeserver.NewUnstarted(fakeserver.WithSeed(7), fakeserver.WithRoute(fateRoute()))
				defer s.Close()
				c := &http.Client{Transport: s.Transport()}
				out := map[attempt]int{}
				for _, a := range order {
					key, hdr := tt.headers(a.op)
					out[a] = mustDo(t, c, inProcessURL, req{key: key, headers: hdr, body: `{"op":` + strconv.Itoa(a.op) + `}`}).status
				}
				return out
			}
			a, b := outcomes(inOrder), outcomes(shuffled)
			failed := 0
			for at, status := range b {
				assert.Equal(t, a[at], status, "op %d attempt %d", at.op, at.n)
			}
			for at, status := range a {
				want := http.StatusCreated
				if fakeserver.OperationFate(7, "POST /v1/charges", strconv.Itoa(at.op), at.n) < 0.5 {
					want = http.StatusServiceUnavailable
					failed++
				}
				if replayed := tt.keyed && status == http.StatusCreated; !replayed {
					assert.Equal(t, want, status, "op %d attempt %d: the status OperationFate predicts", at.op, at.n)
				}
			}
			assert.InDelta(t, len(a)/2, failed, float64(len(a))/5, "about half the attempts fail")
		})
	}
}

// TestOperationFateIsAPureFunction pins the hash: the same inputs give the
// same draw in any process, and each input matters.
func TestOperationFateIsAPureFunction(t *testing.T) {
	base := fakeserver.OperationFate(1, "POST /v1/charges", "42", 1)
	assert.Equal(t, base, fakeserver.OperationFate(1, " POST /v1/charges ", "42", 1), "the match is normalised")
	for name, other := range map[string]float64{
		"seed":    fakeserver.OperationFate(2, "POST /v1/charges", "42", 1),
		"route":   fakeserver.OperationFate(1, "POST /v1/refunds", "42", 1),
		"op":      fakeserver.OperationFate(1, "POST /v1/charges", "43", 1),
		"attempt": fakeserver.OperationFate(1, "POST /v1/charges", "42", 2),
	} {
		assert.NotEqual(t, base, other, name)
	}
	var sum float64
	const n = 20000
	for i := range n {
		u := fakeserver.OperationFate(3, "*", strconv.Itoa(i), 1+i%4)
		require.True(t, u >= 0 && u < 1, "draw %v out of [0,1)", u)
		sum += u
	}
	assert.InDelta(t, 0.5, sum/n, 0.01, "uniform draws have mean 1/2")
}

// TestOperationCountsSurviveSetScenario checks what the attempt number
// counts: every drawn request of the operation, across scenario changes,
// until Reset; and that a request without identity falls back to the stream.
func TestOperationCountsSurviveSetScenario(t *testing.T) {
	sc := fakeserver.Scenario{Seed: 5, Routes: []fakeserver.Route{fateRoute()}}
	s := fakeserver.NewUnstarted(fakeserver.WithScenario(sc))
	defer s.Close()
	c := &http.Client{Transport: s.Transport()}
	want := func(op string, n int) int {
		if fakeserver.OperationFate(5, "POST /v1/charges", op, n) < 0.5 {
			return http.StatusServiceUnavailable
		}
		return http.StatusCreated
	}
	send := func(op string) int {
		return mustDo(t, c, inProcessURL, req{headers: map[string]string{fakeserver.DefaultOperationHeader: op}}).status
	}
	// Find an operation whose first two attempts differ, so that counting
	// is visible.
	op := ""
	for i := 0; op == ""; i++ {
		if o := strconv.Itoa(i); want(o, 1) != want(o, 2) {
			op = o
		}
	}
	steps := []struct {
		name    string
		before  func()
		attempt int
	}{
		{"first attempt", func() {}, 1},
		{"second attempt, after SetScenario", func() { require.NoError(t, s.SetScenario(sc)) }, 2},
		{"first again, after Reset", s.Reset, 1},
	}
	for _, st := range steps {
		st.before()
		assert.Equal(t, want(op, st.attempt), send(op), st.name)
	}

	// No header and no key: the stream, so not an error, and not counted.
	got := mustDo(t, c, inProcessURL, req{}).status
	assert.Contains(t, []int{http.StatusCreated, http.StatusServiceUnavailable}, got)
}

func TestDrawValidation(t *testing.T) {
	tests := []struct {
		name string
		r    fakeserver.Route
		ok   bool
	}{
		{"default", fakeserver.Route{}, true},
		{"stream", fakeserver.Route{Draw: fakeserver.DrawStream}, true},
		{"operation, custom header", fakeserver.Route{Draw: fakeserver.DrawOperation, OperationHeader: "X-Op"}, true},
		{"unknown draw", fakeserver.Route{Draw: "dice"}, false},
		{"bad header", fakeserver.Route{Draw: fakeserver.DrawOperation, OperationHeader: "X Op"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fakeserver.Scenario{Routes: []fakeserver.Route{tt.r}}.Validate()
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
