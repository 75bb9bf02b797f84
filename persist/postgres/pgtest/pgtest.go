// Package pgtest starts a throwaway PostgreSQL server for tests and
// examples: initdb into a new temporary directory, then pg_ctl start on a
// free loopback port, with fsync and synchronous_commit on. It needs
// PostgreSQL's programs (Debian's postgresql package). It forwards to the
// root module's internal/pgtest, which idempotency/postgres's tests use
// too.
//
//	srv, err := pgtest.Start("")
//	if err != nil { ... }      // a missing PostgreSQL is an error, never a skip
//	defer srv.Stop()
//	pool, err := pgxpool.New(ctx, srv.DSN())
package pgtest

import "github.com/resilienthttp/resilient/internal/pgtest"

// Server is a PostgreSQL server started by Start from a data directory of
// its own, on a loopback port.
type Server struct{ s *pgtest.Server }

// DSN returns the server's connection string: user postgres, database
// postgres, trust authentication, on 127.0.0.1.
func (s *Server) DSN() string { return s.s.DSN() }

// Dir returns the server's temporary directory.
func (s *Server) Dir() string { return s.s.Dir() }

// Stop stops the server and removes its directory.
func (s *Server) Stop() { s.s.Stop() }

// Bin finds a PostgreSQL program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin (highest version first).
func Bin(name string) (string, error) { return pgtest.Bin(name) }

// Start runs initdb in a new temporary directory under parent ("" for the
// system's) and starts the server; see the package documentation.
func Start(parent string) (*Server, error) {
	s, err := pgtest.Start(parent)
	if err != nil {
		return nil, err
	}
	return &Server{s}, nil
}
