package retrycontrol

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// budgetBuckets is the number of buckets a Budget's window is split into.
const budgetBuckets = 10

// budgetRolling is the epoch of a bucket that a goroutine is resetting. No real
// epoch has this value: epochs are clamped well inside the int64 range.
const budgetRolling = math.MinInt64

// BudgetConfig configures a Budget. NewBudget resolves it once; the zero
// value of each field is documented with the field. The common call is
// NewBudget(DefaultBudgetConfig()).
type BudgetConfig struct {
	// Ratio is the number of retries allowed per first attempt in the
	// window: 0.2 lets retries add at most 20 % to the traffic. 0 means the
	// default, 0.2; a negative value means none (only the MinPerSecond
	// floor); NaN means the default; +Inf removes the limit.
	Ratio float64

	// MinPerSecond is the number of retries per second always allowed, on
	// top of Ratio, so that a client with little traffic can still retry:
	// MinPerSecond × Window seconds retries per window. 0 means the
	// default, 10; a negative value means none; NaN means the default.
	MinPerSecond float64

	// Window is the length of the rolling window over which first attempts
	// and retries are counted, split into 10 buckets of Window/10 each
	// (rounded down to a whole nanosecond, at least 1 ns). Window ≤ 0 means
	// the default, 10 s.
	Window time.Duration
}

// DefaultBudgetConfig returns the configuration of Finagle and Linkerd
// (what resilient.RetryBudget's zero fields mean): Ratio 0.2, MinPerSecond 10,
// Window 10 s — retries may add 20 % to the traffic, plus 100 retries per
// window.
func DefaultBudgetConfig() BudgetConfig {
	return BudgetConfig{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second}
}

// A Budget limits retries to a fraction of the traffic, so that retries
// cannot turn a partial outage into a total one. It counts first attempts
// (deposits) and retries (withdrawals) over a rolling window and allows a
// retry while
//
//	retries < Ratio × first attempts + MinPerSecond × Window seconds
//
// both counted over the last Window. With the defaults, if 1,000 operations
// fail within one window and each would retry 3 times, the budget lets
// through at most 0.2 × 1,000 + 10 × 10 = 300 retries, not 3,000. Because
// it grows with first attempts whatever their fate, a budget lets retries
// add up to Ratio to the load even when every request fails; a token bucket
// (Tokens, the Transport's default) grows with healthy answers instead.
//
// The zero value is a usable Budget that behaves as
// NewBudget(DefaultBudgetConfig()); NewBudget makes one with another
// configuration. A Budget must not be copied after first use.
//
// Call Deposit once per logical operation, when its first attempt is sent,
// and Withdraw before each retry: if Withdraw returns false, do not retry.
// A Transport configured with resilient.RetryBudget does both for each
// destination host. DepositAt, WithdrawAt and
// AvailableAt take the time explicitly and are the deterministic forms for
// tests and simulations; the others pass time.Now(). Times should not go
// backwards by a Window or more: an event that old (a goroutine stalled that
// long, or a wall-clock step) resets the bucket it maps to, losing that
// bucket's newer counts.
//
// The window is split into 10 buckets, each stamped with its epoch, its index
// in absolute time; a bucket is reset when it is next written after its
// epoch has passed, and is ignored by readers once it is older than the
// window, so a budget left idle for hours starts afresh. An event therefore
// counts for between 9/10 and all of Window. Memory is constant whatever the
// traffic.
//
// A Budget is safe for concurrent use by multiple goroutines. Deposit is
// lock-free and does not allocate: two atomic loads (the latest bucket and
// its epoch) and one atomic add, except when it moves to another bucket.
// Withdraw is a compare-and-swap loop on its bucket's retry count, so
// concurrent withdrawals within one bucket never exceed the bound. The
// accepted approximations, none of which can make a count negative or
// larger than the number of calls: a Deposit that meets
// its bucket while another goroutine is resetting it (a few nanoseconds,
// once per bucket per window) is dropped; Withdraw calls in different
// buckets at the same moment (at a bucket boundary) do not see each other,
// so each may exceed the bound by one.
type Budget struct {
	p       budgetParams // the zero value means DefaultBudgetConfig
	buckets [budgetBuckets]budgetBucket
	// latest is the bucket of the latest epoch deposited to, nil before
	// the first deposit: a hint for deposit.
	latest atomic.Pointer[budgetBucket]
}

// budgetParams is a BudgetConfig resolved by NewBudget.
type budgetParams struct {
	ratio   float64 // retries per deposit, ≥ 0
	reserve float64 // MinPerSecond × window seconds, ≥ 0
	width   int64   // bucket width in nanoseconds, ≥ 1; 0 in the zero Budget
	// last is the last epoch deposit finds without a division:
	// MaxInt64/width/2, so that last×width cannot overflow; 0 in the zero
	// Budget.
	last int64
}

// budgetBucket counts the events of one epoch. Its counts only ever grow by
// one or are reset to zero, and only current resets them.
type budgetBucket struct {
	epoch       atomic.Int64 // absolute bucket index, or budgetRolling
	deposits    atomic.Int64
	withdrawals atomic.Int64
}

// NewBudget returns a Budget configured by c, with its fields' zero and
// invalid values resolved as documented on BudgetConfig.
func NewBudget(c BudgetConfig) *Budget {
	return &Budget{p: c.params()}
}

func (c BudgetConfig) params() budgetParams {
	window := c.Window
	if window <= 0 {
		window = 10 * time.Second
	}
	width := max(int64(window)/budgetBuckets, 1)
	d := DefaultBudgetConfig()
	ratio, perSecond := OrDefault(c.Ratio, d.Ratio), OrDefault(c.MinPerSecond, d.MinPerSecond)
	seconds := time.Duration(width * budgetBuckets).Seconds()
	return budgetParams{ratio: ratio, reserve: perSecond * seconds, width: width, last: math.MaxInt64 / width / 2}
}

// OrDefault resolves a BudgetConfig field: 0 and NaN mean the default, a
// negative value means none. redisbudget resolves its rules with it.
func OrDefault(v, def float64) float64 {
	switch {
	case v == 0 || v != v:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Span returns the window the configuration resolves to: 10 buckets of
// Window/10, rounded down to a whole nanosecond.
func (c BudgetConfig) Span() time.Duration {
	return time.Duration(c.params().width * budgetBuckets)
}

// params returns b's resolved configuration.
func (b *Budget) params() budgetParams {
	if b.p.width == 0 {
		return DefaultBudgetConfig().params()
	}
	return b.p
}

// epoch returns the absolute index of the bucket that holds now.
func (p budgetParams) epoch(now time.Time) int64 { return p.epochOf(UnixNanos(now)) }

// UnixNanos returns now in nanoseconds since 1970, saturated far from
// overflow (UnixNano overflows outside 1678–2262; Sub's overflow check
// costs more). The root package compares deadlines so too.
func UnixNanos(now time.Time) int64 {
	const maxSec = math.MaxInt64/int64(time.Second) - 1
	switch s := now.Unix(); {
	case s > maxSec:
		return math.MaxInt64
	case s < -maxSec:
		return math.MinInt64
	default:
		return s*int64(time.Second) + int64(now.Nanosecond())
	}
}

// epochOf returns the absolute index of the bucket that holds d (UnixNanos).
func (p budgetParams) epochOf(d int64) int64 {
	e := d / p.width
	if d%p.width < 0 {
		e-- // floor, for times before 1970
	}
	// Keep e±budgetBuckets from overflowing and e away from budgetRolling.
	return min(max(e, math.MinInt64/4), math.MaxInt64/4)
}

// available returns the bound minus the retries, given the counts of the
// window. A retry is allowed while it is positive.
func (p budgetParams) available(deposits, withdrawals int64) float64 {
	a := p.reserve
	if deposits > 0 { // never 0 × +Inf
		a += p.ratio * float64(deposits)
	}
	return a - float64(withdrawals)
}

// bucket returns the bucket that holds epoch e.
func (b *Budget) bucket(e int64) *budgetBucket {
	i := e % budgetBuckets
	if i < 0 {
		i += budgetBuckets
	}
	return &b.buckets[i]
}

// Deposit records a first attempt now. Call it once per logical operation,
// not per attempt.
func (b *Budget) Deposit() { b.DepositAt(time.Now()) }

// DepositAt records a first attempt at time now.
func (b *Budget) DepositAt(now time.Time) { b.deposit(UnixNanos(now)) }

// deposit records a first attempt at now; a deposit to a bucket that a
// later epoch has taken is dropped (see Budget).
//
// Most deposits fall in the bucket of the latest one (b.latest): deposit
// then checks that now lies within that bucket's epoch, without a division,
// and adds to it. That is what depositIn would do: the epoch of now is the
// bucket's. Only epochs in [0, p.last] are checked so, where the product
// of an epoch and the width cannot overflow.
func (b *Budget) deposit(now int64) {
	if bk := b.latest.Load(); bk != nil {
		if ep := bk.epoch.Load(); ep >= 0 && ep <= b.p.last {
			if off := now - ep*b.p.width; off >= 0 && off < b.p.width {
				bk.deposits.Add(1)
				return
			}
		}
	}
	b.depositIn(b.params().epochOf(now))
}

// depositIn records a first attempt in epoch e, and makes its bucket the
// latest if e is later than the latest's.
func (b *Budget) depositIn(e int64) {
	bk := b.bucket(e)
	if bk.epoch.Load() == e || bk.current(e) {
		bk.deposits.Add(1)
	}
	if l := b.latest.Load(); l == nil || l.epoch.Load() < e {
		b.latest.Store(bk)
	}
}

// Withdraw reports whether a retry may be sent now, and if so counts it.
// A refused retry is not counted.
func (b *Budget) Withdraw() bool { return b.WithdrawAt(time.Now()) }

// WithdrawAt reports whether a retry may be sent at time now, and if so
// counts it. A refused retry is not counted.
func (b *Budget) WithdrawAt(now time.Time) bool {
	p := b.params()
	e := p.epoch(now)
	bk := b.bucket(e)
	for {
		if !bk.current(e) {
			runtime.Gosched() // another goroutine is resetting bk: three stores
			continue
		}
		d, w, own, ok := b.sum(e, bk)
		if !ok {
			continue // bk was reset while being read
		}
		if !(p.available(d, w) > 0) {
			return false
		}
		if bk.withdrawals.CompareAndSwap(own, own+1) {
			return true
		}
	}
}

// SpendAt counts a retry sent at time now without asking the budget: one
// that another budget allowed, such as a budget shared by a fleet that this
// one stands in for while the shared one cannot be reached
// (redisbudget). The window then knows of every retry sent, so that a
// fallback to this budget starts from what was spent. A refund for it is
// made with RefundAt.
func (b *Budget) SpendAt(now time.Time) {
	e := b.params().epoch(now)
	bk := b.bucket(e)
	for !bk.current(e) {
		runtime.Gosched() // another goroutine is resetting bk: three stores
	}
	bk.withdrawals.Add(1)
}

// RefundAt takes back a withdrawal made by WithdrawAt(at) for a retry that
// was then not sent (the caller gave up during the backoff, or the breaker
// refused it). If at's bucket has rolled since, the withdrawal has left the
// window already and there is nothing to take back.
func (b *Budget) RefundAt(at time.Time) {
	e := b.params().epoch(at)
	bk := b.bucket(e)
	for bk.epoch.Load() == e {
		w := bk.withdrawals.Load()
		if w <= 0 || bk.withdrawals.CompareAndSwap(w, w-1) {
			return
		}
	}
}

// Available returns the number of retries Withdraw would allow now if
// nothing else happened: a whole number ≥ 0, or +Inf. It is meant for
// reports and metrics.
func (b *Budget) Available() float64 { return b.AvailableAt(time.Now()) }

// AvailableAt returns the number of retries WithdrawAt(now) would allow if
// nothing else happened: a whole number ≥ 0, or +Inf. It does not modify b.
func (b *Budget) AvailableAt(now time.Time) float64 {
	p := b.params()
	e := p.epoch(now)
	d, w, _, _ := b.sum(e, nil)
	return max(math.Ceil(p.available(d, w)), 0)
}

// sum adds up the counts of the buckets within the window that ends in epoch
// e. It also returns own's retry count, and ok=false if own (when not nil) is
// not a bucket of the window, or was reset while being read.
func (b *Budget) sum(e int64, own *budgetBucket) (deposits, withdrawals, ownWithdrawals int64, ok bool) {
	ok = true
	for i := range b.buckets {
		bk := &b.buckets[i]
		d, w, valid := bk.read(e)
		if bk == own {
			ok, ownWithdrawals = valid, w
		}
		deposits += d
		withdrawals += w
	}
	return deposits, withdrawals, ownWithdrawals, ok
}

// read returns bk's counts if its epoch lies within budgetBuckets of e (a
// bucket stamped a little after e belongs to a goroutine whose clock read
// came later, and is counted), or ok=false with zero counts if bk is stale,
// being reset, or was reset while being read.
func (bk *budgetBucket) read(e int64) (deposits, withdrawals int64, ok bool) {
	ep := bk.epoch.Load()
	if ep <= e-budgetBuckets || ep >= e+budgetBuckets { // also budgetRolling
		return 0, 0, false
	}
	deposits, withdrawals = bk.deposits.Load(), bk.withdrawals.Load()
	if bk.epoch.Load() != ep {
		return 0, 0, false
	}
	return deposits, withdrawals, true
}

// current makes bk the bucket of epoch e, resetting its counts first if it
// holds another epoch. It reports false, without waiting, if another
// goroutine is resetting bk. The reset marks the bucket budgetRolling before
// zeroing the counts and publishes the new epoch last, so a goroutine that
// sees the new epoch never adds to, or reads, the old counts. (Only a
// goroutine stalled for a whole window between its check and its add can
// add to a bucket that has since been reset: its event is counted in the
// newer epoch, or lost.)
func (bk *budgetBucket) current(e int64) bool {
	for {
		old := bk.epoch.Load()
		switch {
		case old == e:
			return true
		case old == budgetRolling:
			return false
		case bk.epoch.CompareAndSwap(old, budgetRolling):
			bk.deposits.Store(0)
			bk.withdrawals.Store(0)
			bk.epoch.Store(e)
			return true
		}
	}
}
