package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyConfig is a storm small enough for CI: 4 clients × 20 operations/s,
// a 1.5 s outage scenario with an outage from 0.5 s to 1 s, and steady
// scenarios of 0.5 s at p = 0 and 1; every strategy; 10 % lost responses so
// that retries without a key have something to duplicate.
func tinyConfig() Config {
	c := DefaultConfig()
	c.Clients, c.Rate = 4, 20
	c.Duration, c.OutageStart, c.OutageEnd = 1500*time.Millisecond, 500*time.Millisecond, time.Second
	c.SteadyDuration, c.Ps = 500*time.Millisecond, []float64{0, 1}
	c.OpTimeout = time.Second
	c.Lost = 0.1
	return c
}

// checkInvariants asserts what holds of any storm run, however busy the
// machine: the shape of the results, no duplicate effect for a keyed
// strategy, every operation accounted for.
func checkInvariants(t *testing.T, cfg Config, res []Result) {
	t.Helper()
	require.Len(t, res, len(cfg.scenarios())*len(cfg.Strategies)*len(cfg.Scales))
	for _, r := range res {
		if r.Keyed {
			assert.Zero(t, r.Duplicates, "%s: duplicate effects for a keyed strategy", describe(r))
		}
		assert.Positive(t, r.Ops, describe(r))
		// Every operation that succeeded is at least one request the server
		// saw. (Not every operation the client sent: on a busy machine one
		// can time out before the server reads it.)
		assert.GreaterOrEqual(t, r.ServerRequests, int64(r.SuccessRate*float64(r.Ops)+0.5)-1, describe(r))
		assert.Equal(t, r.Scenario == ScenarioOutage, r.RecoveryS != nil, "%s: recovery %v", describe(r), r.RecoveryS)
		assert.Equal(t, r.LateOps > 0 || r.AcceptErrors > 0 || r.Overran, r.Disturbed, describe(r))
		if r.Strategy == "none" {
			// One attempt, plus net/http's own re-sends of keyed requests
			// whose response was lost on a reused connection (10 %).
			assert.LessOrEqual(t, r.Amplification, 1.25, describe(r))
			if r.VsNone != nil {
				assert.Zero(t, *r.VsNone, describe(r))
				assert.Zero(t, *r.Harm, describe(r))
			}
		}
	}
}

func find(res []Result, scenario string, p float64, strategy string) *Result {
	for i, r := range res {
		if r.Scenario == scenario && r.P == p && r.Strategy == strategy {
			return &res[i]
		}
	}
	return nil
}

func describe(r Result) string {
	return fmt.Sprintf("%s %s p=%g %s", r.Scale, r.Scenario, r.P, r.Strategy)
}

// TestStormTiny runs the harness on loopback sockets in a tiny configuration
// and checks only what load cannot break (timing and rates are checked in
// virtual time: TestVirtualTiny), then its JSON, Markdown and plots.
func TestStormTiny(t *testing.T) {
	cfg := tinyConfig()
	var prog bytes.Buffer
	cfg.Progress = &prog
	res, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	checkInvariants(t, cfg, res)
	assert.Contains(t, prog.String(), "100%", "progress bar")
	// With 10 % lost responses the unkeyed loop duplicates, unless the
	// machine kept its operations from the server.
	if nokey := find(res, ScenarioSteady, 0, "naive-nokey"); assert.NotNil(t, nokey) && !nokey.Disturbed && nokey.Unsent == 0 && nokey.Ops >= 40 {
		assert.Positive(t, nokey.Duplicates, "naive-nokey at p=0 with 10 %% lost responses: is the ledger oracle blind?")
	}

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, res, false))
	var objs []map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &objs))
	for _, o := range objs {
		for _, f := range []string{"strategy", "scale", "p", "ops", "server_requests", "amplification", "success_rate",
			"vs_none", "harm", "duplicates", "p50_ms", "p99_ms", "recovery_s", "late_ops", "disturbed", "invalid"} {
			assert.Contains(t, o, f)
		}
		assert.NotContains(t, o, "load", "series without -series")
	}

	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, res))
	rows := regexp.MustCompile(`(?m)^\| [0-9.]+×? \| `).FindAllString(md.String(), -1)
	assert.Len(t, rows, len(res), "a row per result:\n%s", md.String())

	files, err := WritePlots(t.TempDir(), cfg, res)
	require.NoError(t, err)
	assert.Len(t, files, 4, "load and sweep, PNG and SVG")
}
