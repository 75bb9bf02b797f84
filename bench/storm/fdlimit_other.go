//go:build !unix

package storm

// RaiseFileLimit does nothing on systems without RLIMIT_NOFILE and returns
// 0 (unknown).
func RaiseFileLimit() (uint64, error) { return 0, nil }
