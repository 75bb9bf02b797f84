package sim

import "slices"

// Shrink removes faults and parts from p while fails still reports the
// plan failing, and returns the smallest plan it found (p itself if
// nothing could go). fails should run a plan more than once: goroutine
// order is not a function of the plan.
func Shrink(p *Plan, fails func(*Plan) bool) *Plan {
	best := clonePlan(p)
	for changed := true; changed; {
		changed = false
		for _, cand := range candidates(best) {
			if fails(cand) {
				best, changed = cand, true
				break
			}
		}
	}
	return best
}

// candidates are the plans one step smaller than p.
func candidates(p *Plan) []*Plan {
	var out []*Plan
	try := func(f func(q *Plan) bool) {
		q := clonePlan(p)
		if f(q) {
			out = append(out, q)
		}
	}
	for i := range p.Ops {
		try(func(q *Plan) bool {
			if len(q.Ops) < 2 {
				return false
			}
			name := q.Ops[i].Name
			q.Ops = slices.Delete(q.Ops, i, i+1)
			q.StoreFaults = slices.DeleteFunc(q.StoreFaults, func(f StoreFault) bool { return f.Op == name })
			return true
		})
	}
	try(func(q *Plan) bool { c := q.Crash != nil; q.Crash = nil; return c })
	try(func(q *Plan) bool { c := q.Resume; q.Resume = false; return c })
	try(func(q *Plan) bool { c := q.ResumeAfter != 0; q.ResumeAfter = 0; return c })
	for i := range p.StoreFaults {
		try(func(q *Plan) bool { q.StoreFaults = slices.Delete(q.StoreFaults, i, i+1); return true })
	}
	for i := range p.DialRefused {
		try(func(q *Plan) bool { q.DialRefused = slices.Delete(q.DialRefused, i, i+1); return true })
	}
	for i := range p.WriteFaults {
		try(func(q *Plan) bool { q.WriteFaults = slices.Delete(q.WriteFaults, i, i+1); return true })
	}
	for i := range p.Ops {
		for j := range p.Ops[i].Faults {
			try(func(q *Plan) bool { q.Ops[i].Faults = slices.Delete(q.Ops[i].Faults, j, j+1); return true })
			try(func(q *Plan) bool {
				c := q.Ops[i].Faults[j].Kind != FaultNone
				q.Ops[i].Faults[j] = Fault{}
				return c
			})
		}
		try(func(q *Plan) bool { c := q.Ops[i].Callers > 1; q.Ops[i].Callers = 1; return c })
		try(func(q *Plan) bool { c := q.Ops[i].Redirect != 0; q.Ops[i].Redirect = 0; return c })
		try(func(q *Plan) bool { c := q.Ops[i].CancelAt != 0; q.Ops[i].CancelAt = 0; return c })
		try(func(q *Plan) bool { c := q.Ops[i].Start != 0; q.Ops[i].Start = 0; return c })
	}
	try(func(q *Plan) bool { c := q.IdleTimeout != 0; q.IdleTimeout = 0; return c })
	try(func(q *Plan) bool { c := q.Declared; q.Declared = false; return c })
	try(func(q *Plan) bool { c := q.NoTokens; q.NoTokens = false; return c })
	try(func(q *Plan) bool { c := q.Store == "bolt"; q.Store = "memory"; return c })
	try(func(q *Plan) bool { c := q.RetryAfterMax != 0; q.RetryAfterMax = 0; return c })
	return out
}

// clonePlan is a deep copy of p.
func clonePlan(p *Plan) *Plan {
	q, err := ParsePlan(p.JSON())
	if err != nil {
		panic(err) // cannot happen: JSON wrote it
	}
	return q
}
