package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommand builds the command and runs it the two ways it runs: on
// sockets, and in simulated time through testing.Main, where stdout must
// carry only the results (testing's own "PASS" goes to stderr).
func TestCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "storm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tiny := []string{"-clients", "3", "-rate", "10", "-duration", "1s", "-outage", "300ms-600ms", "-steady", "300ms",
		"-p", "0,1", "-op-timeout", "1s", "-strategies", "none,resilient", "-tail-duration", "300ms"}
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var o, e bytes.Buffer
		cmd := exec.Command(bin, append(tiny, args...)...)
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("storm %v: %v\nstderr:\n%s", args, err, e.String())
		}
		return o.String(), e.String()
	}

	for _, mode := range [][]string{nil, {"-virtual"}} {
		stdout, stderr := run(append(mode, "-format", "json", "-out", t.TempDir())...)
		var res []map[string]any
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: stdout is not JSON: %v\n%s", mode, err, stdout)
		}
		if len(res) != 6 {
			t.Errorf("%v: %d results, want 3 scenarios × 2 strategies", mode, len(res))
		}
		if !strings.Contains(stderr, "storm [") || !strings.Contains(stderr, "load.png") || !strings.Contains(stderr, "storm.md") ||
			!strings.Contains(stderr, "tail.md") || !strings.Contains(stderr, "tail.png") {
			t.Errorf("%v: no progress bar or plot on stderr:\n%s", mode, stderr)
		}
	}

	stdout, _ := run("-virtual", "-scales", "both")
	if !strings.HasPrefix(stdout, "#### steady, a Transport per client") || !strings.Contains(stdout, "#### outage, one Transport shared") ||
		!strings.Contains(stdout, "| resilient-hedge-p95 |") || strings.Contains(stdout, "PASS") {
		t.Errorf("virtual Markdown output:\n%s", stdout)
	}

	if err := exec.Command(bin, "-format", "yaml").Run(); err == nil {
		t.Error("-format yaml accepted")
	}
}
