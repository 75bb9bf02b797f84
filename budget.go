package resilient

import (
	"time"

	"github.com/resilienthttp/resilient/internal/retrycontrol"
)

// RetryBudget is a retry control (see WithRetryControl). Each destination
// host gets a Finagle-style retry budget. It limits retries to a fraction of
// the traffic, so retries cannot turn a partial outage into a total one. It
// counts first attempts and retries over the last Window, and allows a retry
// while
//
//	retries < Ratio × first attempts + MinPerSecond × Window seconds
//
// Say 1,000 operations fail within one window, and each would retry 3 times.
// The default budget lets through at most 0.2 × 1,000 + 10 × 10 = 300
// retries, not 3,000. A retry the budget refuses is not sent. The last
// answer is returned (Report.Stopped is ErrBudgetExhausted), or an *Error
// with that Reason. A budget grows with first attempts whatever their fate.
// So retries add up to Ratio to the load even when every request fails.
//
// The zero value is the budget of Finagle and Linkerd: every zero field
// means its default (Ratio 0.2, MinPerSecond 10, Window 10 s). The window is
// split into 10 buckets, so an event counts for between 9/10 and all of
// Window. Memory is constant whatever the traffic. Most callers should use
// RetryTokens, the default, which grows with healthy answers instead.
type RetryBudget struct {
	// Ratio is the number of retries allowed per first attempt in the
	// window: 0.2 lets retries add at most 20 % to the traffic. 0 or NaN
	// means the default, 0.2; a negative value means none (only the
	// MinPerSecond floor); +Inf removes the limit.
	Ratio float64

	// MinPerSecond is the number of retries per second always allowed, on
	// top of Ratio. A client with little traffic can then still retry:
	// MinPerSecond × Window seconds retries per window. 0 or NaN means the
	// default, 10; a negative value means none.
	MinPerSecond float64

	// Window is the length of the rolling window over which first attempts
	// and retries are counted. It is split into 10 buckets of Window/10
	// each, rounded down to a whole nanosecond, at least 1 ns. 0 or
	// negative means the default, 10 s.
	Window time.Duration
}

// Budget is a retry budget kept outside the Transport, such as one shared
// by a fleet of processes (see SharedBudget). The Transport calls:
//
//   - DepositAt when an operation's first attempt is sent to the host;
//   - WithdrawAt before each retry. If it returns false, the retry is not
//     sent: the request stops with ErrBudgetExhausted as its reason;
//   - RefundAt(at) when a retry whose WithdrawAt(at) returned true was
//     then not sent.
//
// The Transport calls the methods on its request path, with the caller's
// goroutine, and does not wait for anything else. An implementation must be
// safe for concurrent use. It must not block on I/O: a remote budget
// answers from local state and synchronises in the background. It should
// not allocate.
type Budget interface {
	DepositAt(now time.Time)
	WithdrawAt(now time.Time) bool
	RefundAt(at time.Time)
}

// SharedBudget is a retry control (see WithRetryControl) for a budget kept
// outside the Transport. The function returns the Budget of each
// destination host. A fleet of processes may share one through Redis
// (github.com/resilienthttp/resilient/redisbudget). Its Memory backend
// shares one between the Transports of a process. The Transport calls the
// function when it creates a host's state, with the host as in URL.Host.
// That is on the host's first request, and again after the state was
// evicted for being idle. A nil result means no budget for that host. The
// function must be safe for concurrent use. A nil SharedBudget is ignored.
type SharedBudget func(host string) Budget

func newBudget(c RetryBudget) *retrycontrol.Budget {
	return retrycontrol.NewBudget(retrycontrol.BudgetConfig(c))
}

// span is the window c's budget counts over.
func (c RetryBudget) span() time.Duration { return retrycontrol.BudgetConfig(c).Span() }
