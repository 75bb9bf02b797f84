package storm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultsDoNoHarm is issue 11's regression test of the SDK's defaults
// in virtual time: at both scales, at a few failure rates and through the
// outage, the strategy "resilient" (the SDK's defaults) must not be flagged
// HARM against "none" (success more than 0.5 point below none's, or more
// than 0.5 % of the operations none completed failed).
func TestDefaultsDoNoHarm(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ps, cfg.Ops = []float64{0.1, 0.3, 0.5, 0.9}, 2000
	cfg.Scales = []string{ScalePerClient, ScaleShared}
	cfg.Strategies = []string{"none", "resilient"}
	res := RunVirtual(t, cfg)
	require.Len(t, res, 2*5*2)
	for _, r := range res {
		if r.Strategy == "resilient" {
			assert.False(t, r.Harmful, "%s: vs none %+.1f points, harm %d", describe(r), *r.VsNone, *r.Harm)
		}
	}
}
