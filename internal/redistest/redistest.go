// Package redistest starts throwaway redis-server processes for the tests
// of this repository's Redis modules: each on a free loopback port, in a
// directory of its own, stopped when the test ends. It needs redis-server
// on PATH (Debian's redis-server package; scripts/test installs it): a
// missing one fails the test, never skips it. It speaks to the server only
// to see it answer PING, over a plain TCP connection, so that it adds no
// dependency to the module it lives in.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Config is how to start a server. The zero Config is a server without
// persistence in a new temporary directory.
type Config struct {
	// Dir is the server's directory (its log, and its data if Args turn
	// persistence on); "" for a new t.TempDir().
	Dir string
	// Args are more redis-server arguments, after the defaults
	// (--save "" --appendonly no), so that they override them.
	Args []string
	// Cluster makes the server a Redis Cluster node (--cluster-enabled yes)
	// on a port whose cluster bus port (+10000) was free too.
	Cluster bool
}

// Server is a redis-server process started by Start.
type Server struct {
	// Addr is the server's address, "127.0.0.1:PORT".
	Addr string
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start starts a redis-server as c says and stops it when t ends.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found on PATH (%v): the tests need a real server; "+
			"scripts/test installs it (Debian package redis-server)", err)
	}
	var lastErr error
	for range 5 { // a free port may be taken again before redis-server binds it
		port, err := freePort(c.Cluster)
		if err != nil {
			lastErr = err
			continue
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg: c}
		if lastErr = s.start(t, 10*time.Second); lastErr == nil {
			return s
		}
	}
	t.Fatalf("start redis-server: %v", lastErr)
	return nil
}

// start runs the server on s.Addr, waits up to d for it to answer, and
// stops it when t ends.
func (s *Server) start(t testing.TB, d time.Duration) error {
	_, port, _ := net.SplitHostPort(s.Addr)
	dir := s.cfg.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}
	if s.cfg.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
	}
	cmd := exec.Command("redis-server", append(args, s.cfg.Args...)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	if err := s.waitReady(d); err != nil {
		s.Stop()
		return err
	}
	t.Cleanup(s.Stop)
	return nil
}

// waitReady polls the server with PING until it answers or d passes.
func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := ping(s.Addr)
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited: %v", s.Addr, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends PING on a new connection and reads the answer.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING: %q", line) // e.g. -LOADING
	}
	return nil
}

// Stop kills the server and waits for it to exit; it may be called again.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Restart starts a new redis-server on s's address after s was stopped (a
// restart after a crash: without persistence, the data is gone), and stops
// it when t ends.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var err error
	for range 50 { // the port may take a moment to be free again
		if err = s.start(t, 5*time.Second); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("restart redis-server on %s: %v", s.Addr, err)
}

// Freeze stops the server process (SIGSTOP): connections are still
// accepted by the kernel and commands written, but nothing is answered
// until Thaw. A frozen server is thawed when t ends, before it is stopped.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze redis-server on %s: %v", s.Addr, err)
	}
	t.Cleanup(s.Thaw)
}

// Thaw resumes a frozen server (SIGCONT); it may be called again.
func (s *Server) Thaw() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago; for
// a cluster node, one whose cluster bus port (+10000) was free too.
func freePort(cluster bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !cluster {
			return p, nil
		}
		if p+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000))); err == nil {
			_ = bus.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port pair for a cluster node")
}
