package bolt

// Commits returns how many write transactions s committed, for the tests
// of package bolt_test.
func Commits(s *Store) int64 { return s.commits.Load() }
