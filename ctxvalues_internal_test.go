package resilient

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

type otherKey struct{}

// merged is a context whose values are its own, then other's: each of the
// Transport's values is found wherever it was set.
type merged struct {
	context.Context
	other context.Context
}

func (m merged) Value(k any) any {
	if v := m.Context.Value(k); v != nil {
		return v
	}
	return m.other.Value(k)
}

// TestContextValues: the innermost setting of each value wins, each is
// found through other packages' values and through a context that merges
// two, and a parent is never changed by a child's setting.
func TestContextValues(t *testing.T) {
	r1, r2 := &Report{}, &Report{}
	bg := context.Background()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		key    string
		hasKey bool
		op     string
		hasOp  bool
		report *Report
	}{
		{"none", bg, "", false, "", false, nil},
		{"key", ContextWithKey(bg, "k1"), "k1", true, "", false, nil},
		{"empty key is set", ContextWithKey(bg, ""), "", true, "", false, nil},
		{"all three", ContextWithReport(ContextWithOperation(ContextWithKey(bg, "k1"), "op1"), r1), "k1", true, "op1", true, r1},
		{"innermost wins", ContextWithKey(ContextWithReport(ContextWithKey(ContextWithReport(bg, r1), "k1"), r2), "k2"), "k2", true, "", false, r2},
		{"through other values", context.WithValue(ContextWithOperation(context.WithValue(ContextWithKey(bg, "k1"), otherKey{}, 1), "op1"), otherKey{}, 2), "k1", true, "op1", true, nil},
		{"merged", merged{ContextWithReport(bg, r1), ContextWithOperation(ContextWithKey(bg, "k1"), "op1")}, "k1", true, "op1", true, r1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := keyFromContext(tc.ctx)
			assert.Equal(t, tc.key, k)
			assert.Equal(t, tc.hasKey, ok)
			op, ok := operationFromContext(tc.ctx)
			assert.Equal(t, tc.op, op)
			assert.Equal(t, tc.hasOp, ok)
			assert.Same(t, tc.report, reportFromContext(tc.ctx))
		})
	}
	parent := ContextWithKey(bg, "k1")
	_ = ContextWithKey(parent, "k2")
	k, _ := keyFromContext(parent)
	assert.Equal(t, "k1", k)
}
