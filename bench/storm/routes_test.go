package storm

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoutesDeadRouteDoesNotStarveTheLiveOne runs the routes scenario in
// virtual time at both scales: beside a dead route, the live route (p =
// 0.2) succeeds within 2 points of its success alone; with both routes
// dead, the host's load stays within the outage bound; resilient fails no
// operation of the live route that one attempt completes.
func TestRoutesDeadRouteDoesNotStarveTheLiveOne(t *testing.T) {
	rc := RoutesConfig{Duration: 10 * time.Second}
	res := RunRoutesVirtual(t, rc, []string{ScalePerClient, ScaleShared})
	require.Len(t, res, 12)
	alone := map[string]float64{}
	for _, r := range res {
		if r.Strategy == "resilient" && r.Mix == MixLiveAlone {
			alone[r.Scale] = r.SuccessB
		}
	}
	for _, r := range res {
		if r.Strategy != "resilient" {
			continue
		}
		assert.Zero(t, r.HarmB, "%s %s", r.Scale, r.Mix)
		switch r.Mix {
		case MixDeadLive:
			assert.InDelta(t, alone[r.Scale], r.SuccessB, 0.02, "%s: the live route beside a dead one vs alone", r.Scale)
			assert.Zero(t, r.SuccessA)
		case MixBothDead:
			assert.LessOrEqual(t, r.Load, 1.05, "%s: load bounded when everything fails", r.Scale)
		}
	}
	var md bytes.Buffer
	require.NoError(t, WriteRoutesMarkdown(&md, rc, res))
	assert.Contains(t, md.String(), "| per-client | a dead, b | resilient |")
}
