package sim

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/resilienthttp/resilient/persist"
)

// Check returns the invariants r breaks, one line each; none for a good
// schedule.
//
//   - effects: against a server that dedupes, at most one effect per
//     operation; against one that ignores keys, never more than a bare
//     client's attempts would make (one per call);
//   - attempts: no POST operation reaches the server more often than its
//     calls times WithMaxAttempts;
//   - lost: a 2xx answer's object exists; a call that says nothing was
//     applied (an *Error with Unknown false, the operation's only call)
//     has no effect; an unknown outcome comes with its key; an operation
//     Done in the Store has its effect, and one whose only call got a 2xx
//     (with no Store fault, no crash, returned before its deadline) is
//     Done;
//   - deadline: no call returns, nor its body ends, after its deadline,
//     its caller's cancel or its process's crash, in virtual time;
//   - linearizable: the calls of each operation, against the server's
//     ledger, fit a sequential idempotent create (porcupine).
func Check(r *Result) []string {
	var bad []string
	p := r.Plan
	calls := map[string][]Call{}
	for _, c := range r.Calls {
		calls[c.Op] = append(calls[c.Op], c)
	}
	storeFaulted := map[string]bool{}
	for _, f := range p.StoreFaults {
		storeFaulted[f.Op] = true
	}
	for _, op := range p.Ops {
		cs := calls[op.Name]
		effects := r.Effects[op.Name]
		if op.Method == http.MethodGet {
			if len(effects) > 0 {
				bad = append(bad, fmt.Sprintf("effects: GET op %s has %d effects", op.Name, len(effects)))
			}
			bad = append(bad, checkDeadlines(op.Name, cs)...)
			continue
		}
		if !p.IgnoreKeys && len(effects) > 1 {
			bad = append(bad, fmt.Sprintf("effects: op %s has %d effects against a deduping server", op.Name, len(effects)))
		}
		if limit := len(cs) * max(p.MaxAttempts, 1); r.Arrivals[op.Name] > limit {
			bad = append(bad, fmt.Sprintf("attempts: op %s reached the server %d times, more than %d calls × %d attempts",
				op.Name, r.Arrivals[op.Name], len(cs), max(p.MaxAttempts, 1)))
		}
		if p.IgnoreKeys && len(effects) > len(cs) {
			bad = append(bad, fmt.Sprintf("effects: op %s has %d effects from %d calls against a key-ignoring server", op.Name, len(effects), len(cs)))
		}
		for _, c := range cs {
			who := fmt.Sprintf("op %s caller %d (process %d)", op.Name, c.Caller, c.Proc)
			if c.Status/100 == 2 && len(effects) == 0 {
				bad = append(bad, fmt.Sprintf("lost: %s got %d but the server has no effect", who, c.Status))
			}
			if c.ID != "" && !slices.Contains(effects, c.ID) {
				bad = append(bad, fmt.Sprintf("lost: %s got object %s, not among the server's %v", who, c.ID, effects))
			}
			if e := c.ResErr; e != nil {
				if e.Unknown && e.Key == "" {
					bad = append(bad, fmt.Sprintf("lost: %s: unknown outcome without its key: %v", who, e))
				}
				if !e.Unknown && len(cs) == 1 && !c.Abandoned && !r.Resumed[op.Name] && r.Crashed.IsZero() && len(effects) > 0 {
					bad = append(bad, fmt.Sprintf("lost: %s was told nothing was applied, but the server has %d effect(s): %v", who, len(effects), e))
				}
			}
		}
		bad = append(bad, checkDeadlines(op.Name, cs)...)
		if op.Keying == KeyNamed && p.Store != "" {
			st, claimed := r.States[op.Name]
			if claimed && st == persist.Done && len(effects) == 0 {
				bad = append(bad, fmt.Sprintf("lost: op %s is Done in the Store but the server has no effect", op.Name))
			}
			if len(cs) == 1 && cs[0].Status/100 == 2 && !storeFaulted[op.Name] && r.Crashed.IsZero() &&
				(cs[0].Bound.IsZero() || cs[0].Return.Before(cs[0].Bound)) && st != persist.Done {
				bad = append(bad, fmt.Sprintf("lost: op %s got %d but its Store record is %v", op.Name, cs[0].Status, st))
			}
		}
		if !p.IgnoreKeys {
			if msg := linearizable(op.Name, cs, effects, r.End); msg != "" {
				bad = append(bad, msg)
			}
		}
	}
	return bad
}

// checkDeadlines: no call of op returns, nor its body ends, after its
// deadline, its caller's cancel or its process's crash.
func checkDeadlines(op string, cs []Call) []string {
	var bad []string
	for _, c := range cs {
		if c.Bound.IsZero() {
			continue
		}
		who := fmt.Sprintf("op %s caller %d (process %d)", op, c.Caller, c.Proc)
		if c.Return.After(c.Bound) {
			bad = append(bad, fmt.Sprintf("deadline: %s returned %v after its deadline/cancel/crash", who, c.Return.Sub(c.Bound)))
		}
		if !c.BodyEnd.IsZero() && c.BodyEnd.After(c.Bound) {
			bad = append(bad, fmt.Sprintf("deadline: %s's body ended %v after its deadline/cancel/crash", who, c.BodyEnd.Sub(c.Bound)))
		}
	}
	return bad
}

// Describe is a short account of r, for a failing schedule's report.
func Describe(r *Result) string {
	s := ""
	t0 := time.Time{}
	for _, c := range r.Calls {
		if t0.IsZero() || c.Start.Before(t0) {
			t0 = c.Start
		}
	}
	for _, c := range r.Calls {
		s += fmt.Sprintf("  call op=%s caller=%d proc=%d start=%v return=%v bound=%v status=%d id=%q abandoned=%v err=%v\n",
			c.Op, c.Caller, c.Proc, c.Start.Sub(t0), c.Return.Sub(t0), since(t0, c.Bound), c.Status, c.ID, c.Abandoned, c.Err)
	}
	s += fmt.Sprintf("  effects=%v states=%v crashed=%v resumed=%v\n", r.Effects, r.States, since(t0, r.Crashed), r.Resumed)
	return s
}

func since(t0, t time.Time) any {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(t0)
}
