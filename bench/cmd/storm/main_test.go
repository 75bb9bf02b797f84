package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/resilienthttp/resilient/bench/storm"
)

// TestCommand builds the command and runs it the two ways it runs: on
// sockets, and in simulated time through testing.Main, where stdout must
// carry only the results (testing's own "PASS" goes to stderr).
func TestCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "storm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tiny := []string{"-clients", "3", "-rate", "10", "-duration", "1s", "-outage", "300ms-600ms", "-steady", "300ms", "-overload", "",
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

	for _, mode := range [][]string{{"-engine", "sockets"}, nil} {
		stdout, stderr := run(append(mode, "-format", "json", "-out", t.TempDir())...)
		var res struct {
			Engine  string           `json:"engine"`
			Results []map[string]any `json:"results"`
			Tail    []map[string]any `json:"tail"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: stdout is not JSON: %v\n%s", mode, err, stdout)
		}
		if len(res.Results) != 6 || len(res.Tail) != 4 {
			t.Errorf("%v: %d results, want 3 scenarios × 2 strategies; %d tail results, want 4", mode, len(res.Results), len(res.Tail))
		}
		for _, r := range append(res.Results, res.Tail...) {
			if _, ok := r["disturbed"].(bool); !ok {
				t.Errorf("%v: a result without its disturbed field: %v", mode, r)
			}
			if _, ok := r["invalid"].(bool); !ok {
				t.Errorf("%v: a result without its invalid field: %v", mode, r)
			}
		}
		if want := map[bool]string{true: "sockets", false: "virtual"}[mode != nil]; res.Engine != want {
			t.Errorf("%v: engine %q, want %q", mode, res.Engine, want)
		}
		for _, f := range []string{"storm [", "load.png", "storm.md", "tail.md", "tail.png", "index.html", "headline.txt"} {
			if !strings.Contains(stderr, f) {
				t.Errorf("%v: no %q on stderr:\n%s", mode, f, stderr)
			}
		}
	}

	// The default output is the headline: at most 40 lines, the engine,
	// no result disturbed in virtual time.
	head, _ := run()
	if n := strings.Count(head, "\n"); n > 40 || !strings.Contains(head, "engine: virtual") ||
		!strings.Contains(head, "0 disturbed, 0 invalid") || !strings.Contains(head, "  → ") {
		t.Errorf("headline (%d lines):\n%s", n, head)
	}

	stdout, _ := run("-format", "markdown", "-scales", "both")
	if !strings.HasPrefix(stdout, "#### steady, a Transport per client") || !strings.Contains(stdout, "#### outage, one Transport shared") ||
		!strings.Contains(stdout, "| resilient-hedge-p95 |") || strings.Contains(stdout, "PASS") {
		t.Errorf("virtual Markdown output:\n%s", stdout)
	}

	if err := exec.Command(bin, "-format", "yaml").Run(); err == nil {
		t.Error("-format yaml accepted")
	}
}

// TestTargetCommand runs the command against the fakeserver binary, built
// and started here, and against a plain httptest server; and checks that it
// refuses more than its caps, a target off loopback, and stops on SIGINT
// with a partial report.
func TestTargetCommand(t *testing.T) {
	dir := t.TempDir()
	bin, fake := filepath.Join(dir, "storm"), filepath.Join(dir, "fakeserver")
	for _, b := range [][2]string{{bin, "."}, {fake, "github.com/resilienthttp/resilient/fakeserver/cmd/fakeserver"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	small := []string{"-strategies", "none,resilient", "-target-duration", "500ms", "-target-op-timeout", "500ms", "-format", "json"}
	type report struct {
		Engine  string           `json:"engine"`
		Notes   []string         `json:"notes"`
		Results []map[string]any `json:"results"`
		Tail    []map[string]any `json:"tail"`
	}
	storm := func(args ...string) (report, string, error) {
		var o, e bytes.Buffer
		cmd := exec.Command(bin, append(small, args...)...)
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var r report
		if err == nil {
			if jerr := json.Unmarshal(o.Bytes(), &r); jerr != nil {
				t.Fatalf("storm %v: stdout is not JSON: %v\n%s", args, jerr, o.String())
			}
		}
		return r, e.String(), err
	}

	// The fakeserver binary: every scenario, through its admin API.
	srv := exec.Command(fake, "-addr", "127.0.0.1:0")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("fakeserver: %q, %v", line, err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	r, stderr, err := storm("-target", url)
	if err != nil {
		t.Fatalf("storm -target fakeserver: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "fakeserver admin API") || !strings.Contains(stderr, "at most") || r.Engine != "target" ||
		len(r.Results) != 6 || len(r.Tail) != 3 {
		t.Errorf("storm -target fakeserver: %d results, %d tail, engine %q, stderr:\n%s", len(r.Results), len(r.Tail), r.Engine, stderr)
	}
	for _, res := range r.Results {
		if res["no_ledger"] == true || res["duplicates"].(float64) != 0 {
			t.Errorf("fakeserver result without ledger or with duplicates: %v", res)
		}
	}

	// A plain server: the scenarios without injection, and what was skipped.
	var n atomic.Int64
	var interrupt atomic.Pointer[os.Process]
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if p := interrupt.Load(); n.Add(1) == 15 && p != nil {
			p.Signal(os.Interrupt)
		}
	}))
	defer plain.Close()
	r, stderr, err = storm("-target", plain.URL+"/ping")
	if err != nil {
		t.Fatalf("storm -target plain: %v\n%s", err, stderr)
	}
	if len(r.Results) != 4 || len(r.Tail) != 3 || !strings.Contains(strings.Join(r.Notes, " "), "skipped") {
		t.Errorf("storm -target plain: %d results, %d tail, notes %q", len(r.Results), len(r.Tail), r.Notes)
	}

	// The caps, and loopback.
	for _, args := range [][]string{
		{"-target", plain.URL, "-target-rate", "1000"},
		{"-target", plain.URL, "-target-concurrency", "500"},
		{"-target", plain.URL, "-target-duration", "1m"},
		{"-target", "http://10.1.2.3:9/"},
	} {
		if _, stderr, err := storm(args...); err == nil || !strings.Contains(stderr, "storm: ") {
			t.Errorf("storm %v: accepted (%v)\n%s", args, err, stderr)
		}
	}

	// SIGINT in the second run: a partial report, exit status 130.
	n.Store(0)
	var o, e bytes.Buffer
	target := exec.Command(bin, append(small, "-target", plain.URL)...)
	target.Stdout, target.Stderr = &o, &e
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	interrupt.Store(target.Process)
	err = target.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("interrupted storm: %v\n%s", err, e.String())
	}
	var partial report
	if err := json.Unmarshal(o.Bytes(), &partial); err != nil {
		t.Fatalf("interrupted storm: stdout is not JSON: %v\n%s", err, o.String())
	}
	if len(partial.Results) != 1 || !strings.Contains(strings.Join(partial.Notes, " "), "INTERRUPTED") {
		t.Errorf("interrupted storm: %d results, notes %q", len(partial.Results), partial.Notes)
	}
}

// TestVirtualRunsAreByteIdentical runs the command twice, in virtual time,
// for a reduced default run (every scenario and strategy of the headline,
// the tail included) and a reduced sweep (three failure rates, both
// overloads, both scales, the command's strategies, resilient-pushback,
// whose server mounts the pushback middleware, and resilient-fleet, whose
// clients share a budget through their flushers), and wants the same bytes
// from both runs: stdout and every table and JSON file of -out (the plots
// and index.html are drawn from them). Another seed must give other bytes.
func TestVirtualRunsAreByteIdentical(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "storm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	files := []string{"headline.txt", "storm.md", "storm.json", "tail.md", "tail.json"}
	run := func(args ...string) map[string][]byte {
		t.Helper()
		dir := t.TempDir()
		var o, e bytes.Buffer
		cmd := exec.Command(bin, append(args, "-out", dir)...)
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("storm %v: %v\nstderr:\n%s", args, err, e.String())
		}
		if strings.Contains(e.String(), "PASS") {
			t.Errorf("storm %v: a stray PASS on stderr:\n%s", args, e.String())
		}
		got := map[string][]byte{"stdout": o.Bytes()}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			got[f] = b
		}
		return got
	}
	for _, args := range [][]string{
		{"-ops", "1500", "-tail-duration", "1s"},
		{"-format", "json", "-sweep", "-p", "0,0.5,1", "-scales", "both", "-ops", "1000", "-duration", "6s", "-outage", "2s-4s", "-tail-duration", "500ms",
			"-strategies", strings.Join(append(storm.CommandStrategies(), storm.PushbackStrategy, "resilient-fleet"), ",")},
	} {
		a, b := run(args...), run(args...)
		for name, want := range a {
			if !bytes.Equal(want, b[name]) {
				t.Errorf("storm %v: %s differs between two runs", args, name)
			}
		}
		other := run(append(args, "-seed", "2")...)
		if bytes.Equal(a["storm.json"], other["storm.json"]) {
			t.Errorf("storm %v: -seed 2 gave the bytes of -seed 1", args)
		}
	}
}

// TestSeedsCommand: -seeds N runs N seeds and prints each strategy's mean
// over them; -seeds-from aggregates saved runs the same way, and the two
// agree; -seeds needs virtual time.
func TestSeedsCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "storm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tiny := []string{"-clients", "3", "-rate", "10", "-no-outage", "-steady", "300ms", "-overload", "", "-p", "0.5",
		"-op-timeout", "1s", "-strategies", "none,resilient", "-no-tail"}
	run := func(args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		cmd := exec.Command(bin, append(slices.Clone(tiny), args...)...)
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("storm %v: %v\nstderr:\n%s", args, err, e.String())
		}
		return o.String()
	}
	md := run("-seeds", "2")
	if !strings.Contains(md, "over seeds") || !strings.Contains(md, "| 0.5 | 0 | resilient | 2 |") {
		t.Errorf("-seeds 2:\n%s", md)
	}
	dir := t.TempDir()
	var files []string
	for _, seed := range []string{"1", "2"} {
		f := filepath.Join(dir, seed+".json")
		if err := os.WriteFile(f, []byte(run("-seed", seed, "-format", "json")), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if from := run("-seeds-from", strings.Join(files, ",")); from != md {
		t.Errorf("-seeds-from the same two seeds:\n%s\nwant\n%s", from, md)
	}
	if err := exec.Command(bin, append(slices.Clone(tiny), "-seeds", "2", "-engine", "sockets")...).Run(); err == nil {
		t.Error("-seeds with sockets: accepted")
	}
}
