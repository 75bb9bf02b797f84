package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
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

// checkStorm asserts what must hold of any storm run. naiveAtP1 is the
// least amplification naive retries may show at p = 1: 4 attempts each, less
// whatever a busy machine pushes past the deadline.
func checkStorm(t *testing.T, cfg Config, res []Result, naiveAtP1 float64) {
	t.Helper()
	if want := len(cfg.scenarios()) * len(cfg.Strategies); len(res) != want {
		t.Fatalf("%d results, want %d", len(res), want)
	}
	for _, r := range res {
		if r.Keyed && r.Duplicates != 0 {
			t.Errorf("%s: %d duplicate effects for a keyed strategy", describe(r), r.Duplicates)
		}
		if r.Ops == 0 || r.ServerRequests == 0 {
			t.Errorf("%s: %d ops, %d server requests", describe(r), r.Ops, r.ServerRequests)
		}
		if r.Strategy == "none" && (r.Amplification < 0.95 || r.Amplification > 1.2) {
			// Above 1 only by net/http's own re-sends of keyed requests
			// whose response was lost on a reused connection.
			t.Errorf("%s: amplification %.2f, want about 1", describe(r), r.Amplification)
		}
		if (r.Scenario == ScenarioOutage) != (r.RecoveryS != nil) {
			t.Errorf("%s: recovery %v", describe(r), r.RecoveryS)
		}
		if r.Scenario == ScenarioSteady && r.P == 0 && r.SuccessRate < 0.5 {
			t.Errorf("%s: success %.2f on a healthy server", describe(r), r.SuccessRate)
		}
	}
	if nokey := find(res, ScenarioSteady, 0, "naive-nokey"); nokey == nil || nokey.Duplicates == 0 {
		t.Errorf("naive-nokey at p=0 with 10 %% lost responses: no duplicate seen; is the ledger oracle blind? %+v", nokey)
	}
	if naive := find(res, ScenarioSteady, 1, "naive"); naive == nil || naive.Amplification < naiveAtP1 {
		t.Errorf("naive at p=1: amplification below %v: %+v", naiveAtP1, naive)
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

func describe(r Result) string { return fmt.Sprintf("%s p=%g %s", r.Scenario, r.P, r.Strategy) }

// TestStormTiny runs the harness on loopback sockets in a tiny configuration
// and checks its real properties, its JSON and its plots.
func TestStormTiny(t *testing.T) {
	cfg := tinyConfig()
	var prog bytes.Buffer
	cfg.Progress = &prog
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkStorm(t, cfg, res, 3)
	if !strings.Contains(prog.String(), "100%") {
		t.Errorf("progress bar did not reach 100%%:\n%s", prog.String())
	}

	var js bytes.Buffer
	if err := WriteJSON(&js, res, false); err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(js.Bytes(), &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		for _, f := range []string{"strategy", "p", "ops", "server_requests", "amplification", "success_rate", "duplicates", "p50_ms", "p99_ms", "recovery_s"} {
			if _, ok := o[f]; !ok {
				t.Errorf("JSON object %v lacks %q", o, f)
			}
		}
		if _, ok := o["load"]; ok {
			t.Errorf("JSON has the series without -series")
		}
	}

	var md bytes.Buffer
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(md.String(), "\n"); lines != len(res)+2 {
		t.Errorf("Markdown table has %d lines, want %d", lines, len(res)+2)
	}

	files, err := WritePlots(t.TempDir(), cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("plots written: %v, want load and sweep, PNG and SVG", files)
	}
}
