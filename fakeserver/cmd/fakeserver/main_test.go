package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/resilienthttp/resilient/fakeserver"
)

// runMainEnv makes the test binary act as the fakeserver command, so the tests
// can start it as a real process and signal it.
const runMainEnv = "FAKESERVER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const scenarioJSON = `{
  "seed": 5,
  "routes": [{"match": "POST /v1/charges", "script": [{"kind": "status", "status": 503, "retry_after": "2s"}]}]
}`

// startProcess runs the command as a child process and returns its base URL.
func startProcess(t *testing.T, args ...string) (*exec.Cmd, string, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("stderr: %s", stderr.String())
		}
	})
	lines := bufio.NewScanner(stdout)
	first := make(chan string, 1)
	go func() {
		if lines.Scan() {
			first <- lines.Text()
		}
		close(first)
	}()
	select {
	case line := <-first:
		url, ok := strings.CutPrefix(line, "listening on ")
		require.True(t, ok, "first line %q", line)
		require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
		return cmd, url, lines
	case <-time.After(exitBound):
		t.Fatalf("no 'listening on' line within %v", exitBound)
		return nil, "", nil
	}
}

func get(t *testing.T, c *http.Client, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func TestBinaryServesAdminAPIAndStopsOnSIGTERM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scenario.json")
	require.NoError(t, os.WriteFile(path, []byte(scenarioJSON), 0o600))
	cmd, base, lines := startProcess(t, "-addr", ":0", "-scenario", path, "-seed", "11")

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: exitBound}

	// The scenario file is loaded, the -seed flag overrides its seed.
	code, _, body := get(t, c, http.MethodGet, base+"/_fake/scenario", "")
	require.Equal(t, http.StatusOK, code)
	sc, err := fakeserver.ParseScenario([]byte(body))
	require.NoError(t, err)
	assert.EqualValues(t, 11, sc.Seed)

	code, h, _ := get(t, c, http.MethodPost, base+"/v1/charges", `{"amount":1}`, "Idempotency-Key", "k")
	assert.Equal(t, http.StatusServiceUnavailable, code, "the scripted fault")
	assert.Equal(t, "2", h.Get("Retry-After"))
	code, h, _ = get(t, c, http.MethodPost, base+"/v1/charges", `{"amount":1}`, "Idempotency-Key", "k", "Retry-Attempt", "1")
	assert.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "stored", h.Get("Idempotency-Status"))

	code, _, body = get(t, c, http.MethodGet, base+"/_fake/stats", "")
	require.Equal(t, http.StatusOK, code)
	var st fakeserver.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.EqualValues(t, 2, st.Requests)
	assert.EqualValues(t, 1, st.Retries)
	assert.Equal(t, 1, st.Effects)

	code, _, _ = get(t, c, http.MethodPut, base+"/_fake/scenario", `{"require_key": true}`)
	assert.Equal(t, http.StatusNoContent, code)
	code, _, _ = get(t, c, http.MethodPost, base+"/v1/charges", `{}`)
	assert.Equal(t, http.StatusBadRequest, code)

	code, _, _ = get(t, c, http.MethodPost, base+"/_fake/reset", "")
	assert.Equal(t, http.StatusNoContent, code)
	code, _, body = get(t, c, http.MethodGet, base+"/_fake/effects?key=k", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"key":"k","effects":0}`, body)

	// A request hangs; SIGTERM must still stop the server promptly and cleanly.
	code, _, _ = get(t, c, http.MethodPost, base+"/_fake/enqueue", `{"match":"*","faults":[{"kind":"hang"}]}`)
	require.Equal(t, http.StatusNoContent, code)
	hung := make(chan error, 1)
	go func() {
		r, _ := http.NewRequest(http.MethodPost, base+"/v1/charges", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "h")
		resp, err := c.Do(r)
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	require.Eventually(t, func() bool {
		_, _, body := get(t, c, http.MethodGet, base+"/_fake/stats", "")
		return strings.Contains(body, `"in_flight": 1`)
	}, exitBound, 10*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, []string{"shut down"}, waitExit(t, cmd, lines))
	assert.Error(t, <-hung, "the hung request's connection was dropped")
}

// exitBound bounds how long a signalled server may take to exit. Far longer
// than any grace period the tests set: it only turns a server that never
// exits into a failure, and a busy machine cannot break it.
const exitBound = 30 * time.Second

// waitExit reads the process's stdout to its end (the process exiting closes
// it), reaps it, requires exit status 0 within exitBound, and returns the
// lines printed after the first.
func waitExit(t *testing.T, cmd *exec.Cmd, lines *bufio.Scanner) []string {
	t.Helper()
	rest := make(chan []string, 1)
	go func() {
		var out []string
		for lines.Scan() {
			out = append(out, lines.Text())
		}
		rest <- out
	}()
	var out []string
	select {
	case out = <-rest:
	case <-time.After(exitBound):
		t.Fatalf("the server did not exit within %v of the signal", exitBound)
	}
	require.NoError(t, cmd.Wait(), "exit status 0")
	return out
}

// TestBinaryExitsOnSIGINTWhateverClientsDo: with a grace period of 1 s, SIGINT
// stops the server, with exit status 0, while clients hold connections that
// Shutdown alone would wait for: an idle keep-alive connection, one that never
// sends a request, and one whose request body never ends (its handler is in
// service, reading it).
func TestBinaryExitsOnSIGINTWhateverClientsDo(t *testing.T) {
	cmd, base, lines := startProcess(t, "-addr", "127.0.0.1:0", "-shutdown-timeout", "1s")
	addr := strings.TrimPrefix(base, "http://")

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: exitBound}
	code, _, _ := get(t, c, http.MethodPost, base+"/v1/orders", `{"n":1}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusCreated, code) // its connection stays open, idle

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()

	partial, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer partial.Close()
	_, err = io.WriteString(partial, "POST /v1/orders HTTP/1.1\r\nHost: fake\r\nIdempotency-Key: p\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"n\":")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, _, body := get(t, c, http.MethodGet, base+"/_fake/stats", "")
		return strings.Contains(body, `"in_flight": 1`)
	}, exitBound, 10*time.Millisecond, "the partial request never reached the handler")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	assert.Equal(t, []string{"shut down"}, waitExit(t, cmd, lines))
}

func TestRunRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"mode":"x"}`), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-nope"}, "flag provided but not defined"},
		{"extra argument", []string{"extra"}, "unexpected arguments"},
		{"missing scenario", []string{"-scenario", filepath.Join(dir, "missing.json")}, "no such file"},
		{"invalid scenario", []string{"-scenario", bad}, "mode"},
		{"bad address", []string{"-addr", "nonsense"}, "-addr"},
		{"bad pushback status", []string{"-pushback-status", "500"}, "want 503 or 429"},
		{"bad pushback bound", []string{"-pushback-max-in-flight", "-1"}, "invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error()+stderr.String(), tt.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestRunStopsWhenContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan())
	base, ok := strings.CutPrefix(lines.Text(), "listening on ")
	require.True(t, ok)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	code, _, _ := get(t, &http.Client{Transport: tr}, http.MethodPost, base+"/v1/orders", `{"n":1}`)
	assert.Equal(t, http.StatusCreated, code)
	cancel()
	require.True(t, lines.Scan())
	assert.Equal(t, "shut down", lines.Text())
	require.NoError(t, <-done)
}

// TestRunPushback checks that -pushback-* flags mount the middleware: with
// no budget at all, a retry gets the pushback answer (429 as asked) and a
// first attempt goes through.
func TestRunPushback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-pushback-ratio", "-1", "-pushback-min-per-second", "-1",
			"-pushback-status", "429"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan())
	base, ok := strings.CutPrefix(lines.Text(), "listening on ")
	require.True(t, ok)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	send := func(attempt string) *http.Response {
		r, err := http.NewRequest(http.MethodPost, base+"/v1/orders", strings.NewReader(`{"n":1}`))
		require.NoError(t, err)
		r.Header.Set("Retry-Attempt", attempt)
		resp, err := c.Do(r)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusCreated, send("0").StatusCode)
	resp := send("1")
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	cancel()
	require.True(t, lines.Scan())
	require.NoError(t, <-done)
}

// TestReadmeCommandsRun runs every fakeserver command of the READMEs and of
// docs/*.md as written, from the repository root (only the port is made free), and
// checks that the files they name exist and that the scenario example is
// the one fakeserver/README.md shows.
func TestReadmeCommandsRun(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	var cmds []string
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages := []string{"README.md", "fakeserver/README.md"}
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	for _, f := range pages {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			_, rest, ok := strings.Cut(line, "go run ./fakeserver/cmd/fakeserver")
			if !ok {
				continue
			}
			rest, _, _ = strings.Cut(rest, "`")
			rest, _, _ = strings.Cut(rest, "#")
			cmds = append(cmds, strings.TrimSpace(rest))
		}
		for _, m := range regexp.MustCompile(`--data @(\S+)`).FindAllStringSubmatch(string(b), -1) {
			assert.FileExists(t, filepath.Join(root, m[1]), "%s: curl --data @%s", f, m[1])
		}
	}
	require.NotEmpty(t, cmds)
	for _, c := range cmds {
		args := strings.Fields(c)
		for i := range args {
			if i > 0 && args[i-1] == "-addr" {
				args[i] = "127.0.0.1:0"
			}
			if i > 0 && args[i-1] == "-scenario" {
				args[i] = filepath.Join(root, args[i])
			}
		}
		cmd, url, _ := startProcess(t, args...)
		resp, err := http.Get(url + "/_fake/scenario")
		require.NoError(t, err, c)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, c)
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait(), c)
	}

	readme, err := os.ReadFile(filepath.Join(root, "fakeserver/README.md"))
	require.NoError(t, err)
	_, after, _ := strings.Cut(string(readme), "## Scenario JSON")
	_, block, _ := strings.Cut(after, "```json\n")
	block, _, _ = strings.Cut(block, "```")
	file, err := os.ReadFile(filepath.Join(root, "fakeserver/scenario.example.json"))
	require.NoError(t, err)
	var a, b any
	require.NoError(t, json.Unmarshal([]byte(block), &a))
	require.NoError(t, json.Unmarshal(file, &b))
	assert.Equal(t, a, b, "fakeserver/scenario.example.json is not the README's example")
}
