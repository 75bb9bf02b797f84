package storm

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"
)

// arrival is one operation of the load: when it starts (since the start of
// the load) and which client starts it.
type arrival struct {
	at     time.Duration
	client int
}

// schedule returns the arrivals of a load of clients × rate operations per
// second during d: client c starts an operation every 1/rate, from a phase
// drawn uniformly in [0, 1/rate) with a PCG seeded by seed. The arrivals are
// sorted by time (then client), so that operation i is the same for every
// strategy run with the same arguments.
func schedule(clients int, rate float64, d time.Duration, seed uint64) []arrival {
	period := time.Duration(float64(time.Second) / rate)
	rng := rand.New(rand.NewPCG(seed, 0x5709_6d5e_ed5c_4a11))
	n := int(float64(clients)*rate*d.Seconds()) + clients
	out := make([]arrival, 0, n)
	for c := range clients {
		for at := time.Duration(rng.Int64N(int64(period))); at < d; at += period {
			out = append(out, arrival{at: at, client: c})
		}
	}
	slices.SortFunc(out, func(a, b arrival) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.client, b.client))
	})
	return out
}
