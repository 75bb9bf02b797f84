package storm

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTailHedgingCutsTheTail runs the tail scenario in virtual time at both
// scales: with 2 % of requests 20× slower, hedging (fixed delay and p95)
// must cut the p99 at least 5× at a load of at most 1.06, and resilient
// without hedging must send one request per operation.
func TestTailHedgingCutsTheTail(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ops = 8000
	cfg.Scales = []string{ScalePerClient, ScaleShared}
	res := RunTailVirtual(t, cfg)
	require.Len(t, res, 2*len(TailStrategyNames()))
	for _, r := range res {
		assert.False(t, r.Overran, "%s %s", r.Scale, r.Strategy)
		assert.Equal(t, 1.0, r.SuccessRate, "%s %s", r.Scale, r.Strategy)
		switch r.Strategy {
		case "none", "resilient":
			assert.Equal(t, 1.0, r.Load, "%s %s", r.Scale, r.Strategy)
		case "resilient-hedge-fixed", "resilient-hedge-p95":
			assert.GreaterOrEqual(t, r.P99Gain, 5.0, "%s %s: p99 %.1f ms", r.Scale, r.Strategy, r.P99Ms)
			assert.LessOrEqual(t, r.Load, 1.06, "%s %s", r.Scale, r.Strategy)
		}
	}
	var md bytes.Buffer
	require.NoError(t, WriteTailMarkdown(&md, cfg.Tail, res))
	assert.Contains(t, md.String(), "| resilient-hedge-p95 |")
	files, err := PlotTail(t.TempDir(), res)
	require.NoError(t, err)
	assert.Len(t, files, 2)
}
