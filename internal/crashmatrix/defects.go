package crashmatrix

import (
	"context"
	"os"

	"github.com/resilienthttp/resilient/persist"
)

// defectEnv plants a defect of the harness's own in a child's Store, for
// the package's tests to show that the oracle catches it: doneBeforeEffect
// or dropPending. Unset (always, outside those tests): no defect.
const defectEnv = "RESILIENT_CRASH_DEFECT"

// The defects defectEnv plants.
const (
	// doneBeforeEffect: a claim is marked done at once, before anything
	// is sent (a kill after the claim loses the operation).
	doneBeforeEffect = "done-before-effect"
	// dropPending: Pending reports nothing (a restarted child resumes
	// nothing).
	dropPending = "drop-pending"
)

// windowEnv, set, makes a child that is to be killed stop (At) right after
// it completed the first operation it resumed, before it prints the line:
// the window in which a random kill makes the parent believe an operation
// unfinished that the Store holds done. Set only by the package's tests.
const windowEnv = "RESILIENT_CRASH_WINDOW"

// planted returns s with the defect defectEnv names, s itself if none.
func planted(s persist.Store) persist.Store {
	switch os.Getenv(defectEnv) {
	case doneBeforeEffect:
		return doneEarly{s}
	case dropPending:
		return noPending{s}
	}
	return s
}

// doneEarly marks every operation it claims done before it is sent.
type doneEarly struct{ persist.Store }

func (d doneEarly) Claim(ctx context.Context, c persist.Record) (persist.Record, bool, error) {
	rec, claimed, err := d.Store.Claim(ctx, c)
	if err == nil && claimed {
		err = d.Store.Finish(ctx, c.Operation, persist.Done, 0)
	}
	return rec, claimed, err
}

// noPending reports no pending operation.
type noPending struct{ persist.Store }

func (noPending) Pending(context.Context) ([]persist.Record, error) { return nil, nil }
