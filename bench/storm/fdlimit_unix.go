//go:build unix

package storm

import "syscall"

// RaiseFileLimit raises the soft limit on open files (RLIMIT_NOFILE) to the
// hard limit and returns the new soft limit: a storm on sockets holds two
// descriptors per connection (client and server are in this process). It
// returns the current soft limit, and the error, if it cannot be raised.
func RaiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		want := l
		want.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return l.Cur, err
		}
		l = want
	}
	return l.Cur, nil
}
