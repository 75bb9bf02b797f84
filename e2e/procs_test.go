package e2e

import (
	"context"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// findBinary returns the path of the program name: $env if set, else the
// first of PATH and dirs that has it. A missing program fails the test with
// install, the command that installs it: CI must run these tests, so
// scripts/e2e-deps must have installed it.
func findBinary(t *testing.T, env, name, install string, dirs ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("%s not found ($%s, PATH, %v): run scripts/e2e-deps to install it (%s)", name, env, dirs, install)
	return ""
}

// goBin is where go install puts programs.
func goBin() string {
	if b := os.Getenv("GOBIN"); b != "" {
		return b
	}
	return filepath.Join(build.Default.GOPATH, "bin")
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess starts cmd with its output in logName under dir, and stops it
// (SIGTERM, then SIGKILL after 5 s) and waits for it when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd, dir, logName string) {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		defer out.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// waitFor calls ready until it returns nil or timeout passes, and returns its
// last error.
func waitFor(ctx context.Context, timeout time.Duration, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dialable reports whether something accepts TCP connections on addr.
func dialable(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func itoa(n int) string { return strconv.Itoa(n) }
