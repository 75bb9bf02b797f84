package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// outcome is what one call of an operation says of it, as the sequential
// model of an idempotent create reads it.
type outcome struct {
	kind string // "created" (id set, or "" when the body was lost), "maybe", "none", or "final" (the ledger)
	id   string
	ids  []string // the ledger's objects, for "final"
}

// createModel is an idempotent create, per key: the first call that
// applies creates the object; every later one answers with the same
// object. Its state is the object's id, "" before any, "*" for an object
// created by a call that did not see its id. A call with an unknown
// outcome may or may not have created it (two next states).
var createModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: func(state, _, output any) []any {
		s, o := state.(string), output.(outcome)
		switch o.kind {
		case "created":
			switch {
			case o.id == "" && s == "":
				return []any{"*"}
			case o.id == "":
				return []any{s}
			case s == "" || s == "*" || s == o.id:
				return []any{o.id}
			}
			return nil
		case "maybe":
			if s == "" {
				return []any{"", "*"}
			}
			return []any{s}
		case "final":
			switch {
			case len(o.ids) == 0 && s == "":
				return []any{s}
			case len(o.ids) == 1 && (s == "*" || s == o.ids[0]):
				return []any{s}
			}
			return nil
		}
		return []any{s} // "none": nothing applied by this call
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	DescribeOperation: func(_, output any) string {
		o := output.(outcome)
		return fmt.Sprintf("%s %s%v", o.kind, o.id, o.ids)
	},
}

// linearizable checks the calls of one operation (one key) and the
// server's objects for it against createModel; "" if they fit. A call is
// "created" when it got a 2xx, "none" when the Transport said nothing was
// applied, "maybe" otherwise (unknown, a final 5xx, an abandoned call). The
// server's ledger is read last, after every call returned.
func linearizable(op string, calls []Call, effects []string, end time.Time) string {
	var h []porcupine.Operation
	for i, c := range calls {
		o := outcome{kind: "maybe"}
		switch {
		case c.Abandoned:
		case c.Status/100 == 2:
			o = outcome{kind: "created", id: c.ID}
		case c.ResErr != nil && !c.ResErr.Unknown && c.ResErr.Attempts == 0:
			o.kind = "none"
		}
		ret := c.Return.UnixNano()
		if c.Abandoned {
			ret = math.MaxInt64 // its effect may come at any later time
		}
		h = append(h, porcupine.Operation{ClientId: i, Input: nil, Call: c.Start.UnixNano(), Output: o, Return: ret})
	}
	t := end.UnixNano()
	if t == math.MaxInt64 {
		t--
	}
	h = append(h, porcupine.Operation{ClientId: len(calls), Call: t, Output: outcome{kind: "final", ids: effects}, Return: t})
	if porcupine.CheckOperations(createModel.ToModel(), h) {
		return ""
	}
	return fmt.Sprintf("linearizable: op %s: calls and the server's objects %v fit no sequential idempotent create", op, effects)
}
