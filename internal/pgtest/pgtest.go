// Package pgtest starts a throwaway PostgreSQL server for tests and examples
// (persist/postgres/pgtest forwards to it; it lives in the root module so
// that a sub-module's tests need no other sub-module):
// initdb into a new temporary directory, then pg_ctl start on a free loopback
// port, with its Unix socket in that directory and fsync and
// synchronous_commit on. It needs PostgreSQL's programs (Debian's
// postgresql package): initdb and pg_ctl on PATH or in
// /usr/lib/postgresql/<version>/bin. Run as root, it runs the server as the
// postgres user (initdb refuses root), else as nobody.
//
//	srv, err := pgtest.Start("")
//	if err != nil { ... }      // a missing PostgreSQL is an error, never a skip
//	defer srv.Stop()
//	pool, err := pgxpool.New(ctx, srv.DSN())
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// Server is a PostgreSQL server started by Start from a data directory of its
// own, on a loopback port.
type Server struct {
	dir    string // temporary directory: data/, sock/, log
	pgCtl  string
	dsn    string
	cred   *syscall.Credential // the unprivileged user the server runs as, nil if we are not root
	closed bool
}

// DSN returns the server's connection string: user postgres, database
// postgres, trust authentication, on 127.0.0.1.
func (s *Server) DSN() string { return s.dsn }

// Dir returns the server's temporary directory (its data directory is
// Dir()/data).
func (s *Server) Dir() string { return s.dir }

// Bin finds a PostgreSQL program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin (highest version first).
func Bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in /usr/lib/postgresql/*/bin: a real server is needed; "+
		"scripts/test installs it (Debian package postgresql)", name)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start runs initdb into a new temporary directory under parent ("" for the
// default, os.TempDir) and starts the server with pg_ctl on a free loopback
// port, its Unix socket in that directory, fsync and synchronous_commit on.
// As root it runs both as the postgres user (initdb refuses root), else as
// the current user; then every directory above the new one must be
// traversable by that user. Stop stops it and removes the directory.
func Start(parent string) (*Server, error) {
	initdb, err := Bin("initdb")
	if err != nil {
		return nil, err
	}
	pgCtl, err := Bin("pg_ctl")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "persist-postgres-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, pgCtl: pgCtl}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return nil, err
		}
		s.cred = cred
		// The server's user must reach its directories: the parent is
		// traversable, data and sock are its own.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
		for _, d := range []string{data, sock, dir} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	if out, err := s.command(initdb, "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
		"--locale=C", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	var lastErr error
	for range 5 { // a free port may be taken again before the server binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s "+
			"-c fsync=on -c synchronous_commit=on -c max_connections=200", port, sock)
		out, err := s.command(pgCtl, "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts).CombinedOutput()
		if err == nil {
			s.dsn = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port)
			ok = true
			return s, nil
		}
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil, lastErr
}

// unprivileged returns the credential of the postgres user, else of nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and no postgres or nobody user to run initdb as")
}

// command returns a command running as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// Stop stops the server (fast shutdown) and removes its directory. It may be
// called again.
func (s *Server) Stop() {
	if s.closed {
		return
	}
	s.closed = true
	if s.dsn != "" {
		cmd := s.command(s.pgCtl, "stop", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "-t", "30")
		_ = cmd.Run()
	}
	_ = os.RemoveAll(s.dir)
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
