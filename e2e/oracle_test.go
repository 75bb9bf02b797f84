package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
)

// class is what an operation's caller was told; see the package doc.
type class uint8

const (
	success class = iota
	unknown
	failed
)

func (c class) String() string {
	return [...]string{"success", "unknown", "failed"}[c]
}

// classOf puts r in its class. typed is false for an error that is not a
// *resilient.Error, itself a violation (the class is then unknown).
func classOf(r result) (c class, typed bool) {
	if r.err != nil {
		var re *resilient.Error
		if !errors.As(r.err, &re) {
			return unknown, false
		}
		if re.Unknown {
			return unknown, true
		}
		return failed, true
	}
	switch {
	case r.status >= 200 && r.status < 300:
		return success, true
	case r.status >= 500, r.status == 409 && r.inProgress, r.report.Unknown:
		return unknown, true
	}
	return failed, true
}

// tally is one row of the summary table.
type tally struct {
	name                     string
	ops                      int
	success, unknown, failed int
	unknownWithEffect        int // unknown operations whose effect exists
	bodyErrors               int // final responses whose body could not be read
	effects, duplicates      int
	attempts                 int   // attempts the client's Transports reported
	requests                 int64 // API requests the fake server saw
	injected                 int64 // faults the fake server injected, 409s in progress and capacity 503s included
	elapsed                  time.Duration
	violations               int
}

// check applies the oracle of the package doc to results against srv's
// ledger and counters, reports each violation (the first ten in detail) and
// returns the row's tally.
func check(t *testing.T, name string, results []result, srv *fakeserver.Server, elapsed time.Duration) tally {
	t.Helper()
	tl := tally{name: name, ops: len(results), elapsed: elapsed}
	st := srv.Stats()
	tl.requests = st.Requests
	tl.injected = st.InProgressConflicts + st.CapacityRejections
	for _, n := range st.Faults {
		tl.injected += n
	}
	var violations []string
	violate := func(format string, args ...any) {
		tl.violations++
		if len(violations) < 10 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}

	effects := map[string][]fakeserver.Entry{}
	for _, e := range srv.Ledger() {
		if e.Key == "" {
			violate("effect %s has no idempotency key", e.ID)
			continue
		}
		effects[e.Key] = append(effects[e.Key], e)
	}
	tl.effects = len(srv.Ledger())

	byKey := map[string][]result{}
	for _, r := range results {
		c, typed := classOf(r)
		switch c {
		case success:
			tl.success++
		case unknown:
			tl.unknown++
		case failed:
			tl.failed++
		}
		if r.bodyErr != nil {
			tl.bodyErrors++
		}
		tl.attempts += len(r.report.Attempts)
		if !typed {
			violate("op %d: error is not a *resilient.Error: %s", r.op, describe(r))
		}
		if r.key == "" {
			violate("op %d: no idempotency key was sent: %s", r.op, describe(r))
			continue
		}
		byKey[r.key] = append(byKey[r.key], r)
		if c == unknown && len(effects[r.key]) > 0 {
			tl.unknownWithEffect++
		}
	}
	for key, es := range effects {
		if len(es) > 1 {
			tl.duplicates += len(es) - 1
			violate("key %s: %d effects (%s … %s)", key, len(es), es[0].ID, es[len(es)-1].ID)
		}
		if _, ok := byKey[key]; !ok {
			violate("effect %s under key %s that no operation sent", es[0].ID, key)
		}
	}
	for key, rs := range byKey {
		es := effects[key]
		for _, r := range rs {
			c, _ := classOf(r)
			switch {
			case c == success && len(es) != 1:
				violate("op %d told success but %d effects: %s", r.op, len(es), describe(r))
			case c == success && r.objectID != "" && len(es) == 1 && r.objectID != es[0].ID:
				violate("op %d told success with object %s but the effect is %s: %s", r.op, r.objectID, es[0].ID, describe(r))
			case c == failed && len(es) != 0:
				violate("op %d told failed but its effect %s exists: %s", r.op, es[0].ID, describe(r))
			}
		}
	}
	if st.DuplicateEffects != 0 {
		violate("fake server counts %d duplicate effects", st.DuplicateEffects)
	}
	if tl.ops > 0 && tl.attempts <= tl.ops && tl.success == tl.ops && tl.injected == 0 && tl.bodyErrors == 0 {
		violate("the fault never hit an operation: %d operations, %d attempts, all succeeded", tl.ops, tl.attempts)
	}
	if tl.violations > 0 {
		t.Errorf("%s: %d oracle violations; the first ones:\n  %s", name, tl.violations, strings.Join(violations, "\n  "))
	}
	return tl
}

// describe is one operation's story, for violation reports.
func describe(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s, ", r.key)
	if r.err != nil {
		fmt.Fprintf(&b, "error %q", r.err)
	} else {
		fmt.Fprintf(&b, "status %d", r.status)
	}
	if r.bodyErr != nil {
		fmt.Fprintf(&b, " (body: %v)", r.bodyErr)
	}
	b.WriteString("; attempts:")
	for _, a := range r.report.Attempts {
		if a.Err != nil {
			fmt.Fprintf(&b, " [%d after %v: %v → %s %s]", a.Attempt, a.Wait.Round(time.Millisecond), a.Err, a.Action, a.Category)
		} else {
			fmt.Fprintf(&b, " [%d after %v: %d → %s %s replayed=%t]", a.Attempt, a.Wait.Round(time.Millisecond), a.StatusCode, a.Action, a.Category, a.Replayed)
		}
	}
	if r.report.Stopped != nil {
		fmt.Fprintf(&b, "; stopped: %v", r.report.Stopped)
	}
	return b.String()
}

// table renders tallies as the summary table.
func table(title string, rows []tally) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", title)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "fault\tops\tsuccess\tunknown\t(with effect)\tfailed\tbody errors\teffects\tduplicates\trequests\tinjected\ttime\tviolations\t")
	var total tally
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%d\t\n", r.name, r.ops, r.success, r.unknown,
			r.unknownWithEffect, r.failed, r.bodyErrors, r.effects, r.duplicates, r.requests, r.injected, r.elapsed.Round(10*time.Millisecond), r.violations)
		total.ops += r.ops
		total.success += r.success
		total.unknown += r.unknown
		total.unknownWithEffect += r.unknownWithEffect
		total.failed += r.failed
		total.bodyErrors += r.bodyErrors
		total.effects += r.effects
		total.duplicates += r.duplicates
		total.requests += r.requests
		total.injected += r.injected
		total.elapsed += r.elapsed
		total.violations += r.violations
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%d\t\n", "total", total.ops, total.success, total.unknown,
		total.unknownWithEffect, total.failed, total.bodyErrors, total.effects, total.duplicates, total.requests, total.injected, total.elapsed.Round(10*time.Millisecond), total.violations)
	w.Flush()
	return b.String()
}
