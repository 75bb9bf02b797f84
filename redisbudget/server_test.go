package redisbudget_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// server is a redis-server process started by startServer.
type server struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// startServer starts a redis-server on a free loopback port, in a temporary
// directory, without persistence, and stops it when t ends. A missing
// redis-server fails the test: scripts/test installs it.
func startServer(t testing.TB) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH (%v): the Redis budget tests need a real server; "+
			"scripts/test installs it (Debian package redis-server)", err)
	}
	var lastErr error
	for range 5 { // a free port may be taken again before redis-server binds it
		srv, err := tryStart(t, bin)
		if err == nil {
			return srv
		}
		lastErr = err
	}
	t.Fatalf("start redis-server: %v", lastErr)
	return nil
}

func tryStart(t testing.TB, bin string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
	)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(srv.done)
	}()
	if err := srv.waitReady(10 * time.Second); err != nil {
		srv.stop()
		return nil, err
	}
	t.Cleanup(srv.stop)
	return srv, nil
}

// waitReady polls the server with PING until it answers or d passes.
func (s *server) waitReady(d time.Duration) error {
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited: %v", s.addr, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and waits for it to exit; it may be called again.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// freeze stops the server process (SIGSTOP): connections are still accepted
// by the kernel and commands written, but nothing is answered until thaw. A
// frozen server is thawed when t ends, before it is stopped.
func (s *server) freeze(t testing.TB) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(s.thaw)
}

// thaw resumes a frozen server (SIGCONT); it may be called again.
func (s *server) thaw() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
}

// client returns a client of the server, closed when t ends.
func (s *server) client(t testing.TB) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func TestServerHelper(t *testing.T) {
	srv := startServer(t)
	require.NoError(t, srv.client(t).Ping(t.Context()).Err())
}

// restart starts a new redis-server on s's address after s was stopped (a
// restart after a crash: the data is gone), and stops it when t ends.
func (s *server) restart(t testing.TB) {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	dir := t.TempDir()
	var err error
	for range 50 { // the port may take a moment to be free again
		cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		if err = cmd.Start(); err != nil {
			break
		}
		s.cmd, s.done = cmd, make(chan struct{})
		done := s.done
		go func() { _ = cmd.Wait(); close(done) }()
		if err = s.waitReady(5 * time.Second); err == nil {
			t.Cleanup(s.stop)
			return
		}
		s.stop()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("restart redis-server on %s: %v", s.addr, err)
}
