package resilient

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// ctxChildEnv makes the test binary run TestContextKindsInAFreshProcess's
// body: a process in which no ContextWith function has been called yet.
const ctxChildEnv = "RESILIENT_CTXKINDS_CHILD"

// TestContextKindsInAFreshProcess: in a process where no ContextWith
// function has run, a context is searched for none of the Transport's
// values; the first ContextWith call of each kind makes its value found,
// by the lookups and by a Transport's request. It runs in a child process:
// the kinds set are process-wide, and this process's other tests set them.
func TestContextKindsInAFreshProcess(t *testing.T) {
	if os.Getenv(ctxChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestContextKindsInAFreshProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), ctxChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestContextKindsInAFreshProcess")
		return
	}
	require.Zero(t, ctxKinds.Load(), "no ContextWith call yet")
	bg := context.Background()
	// A value put under a key without its ContextWith function is not
	// searched for: the search is skipped.
	raw := context.WithValue(context.WithValue(bg, keyCtxKey, "raw"), opCtxKey, "raw")
	_, ok := keyFromContext(raw)
	assert.False(t, ok)
	_, ok = operationFromContext(raw)
	assert.False(t, ok)

	// The first report of the process, through a Transport.
	var r Report
	tr := NewTransport(stubtest.New(stubtest.Reply(200)))
	resp, err := tr.RoundTrip(stubtest.Get(ContextWithReport(bg, &r), "api.test"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Len(t, r.Attempts, 1, "the report is filled")
	_, ok = keyFromContext(raw)
	assert.False(t, ok, "a report sets no other kind")

	// The first key of the process: the request sends it.
	stub := stubtest.New(stubtest.Reply(200))
	tr = NewTransport(stub)
	resp, err = tr.RoundTrip(stubtest.Get(ContextWithKey(bg, "k-first"), "api.test"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, stub.Attempts(), 1)
	assert.Equal(t, "k-first", stub.Attempts()[0].Header.Get(DefaultKeyHeader))

	op, ok := operationFromContext(ContextWithOperation(bg, "op1"))
	assert.True(t, ok)
	assert.Equal(t, "op1", op)
	k, ok := keyFromContext(raw)
	assert.True(t, ok, "once a kind is set, every context is searched for it")
	assert.Equal(t, "raw", k)
}
