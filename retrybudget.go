package resilient

import "time"

// RetryBudget is what the gate asks of a retry budget: the Transport calls
// DepositAt when an operation's first attempt is sent to the host,
// WithdrawAt before each retry (which is not sent if it returns false), and
// RefundAt(at) when a retry whose WithdrawAt(at) returned true was then not
// sent. *Budget implements it in memory; WithBudgetFunc plugs in another
// implementation, such as a budget shared by many processes.
//
// The Transport calls the methods on its request path, with the caller's
// goroutine, and does not wait for anything else: an implementation must
// be safe for concurrent use, must not block on I/O (a remote budget
// answers from local state and synchronises in the background), and should
// not allocate.
type RetryBudget interface {
	DepositAt(now time.Time)
	WithdrawAt(now time.Time) bool
	RefundAt(at time.Time)
}

var _ RetryBudget = (*Budget)(nil)
