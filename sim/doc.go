// Package sim is a deterministic simulator of the resilient Transport's
// operation lifecycle. It runs the real code — the root package's
// Transport, the fakeserver's handler, the memory Store and, in a sample of
// schedules, persist/bolt — over an in-memory network (net.Pipe
// connections to an http.Server, no socket) inside a testing/synctest
// bubble, whose clock is virtual.
//
// A schedule is a Plan drawn from a seed (NewPlan): the client's options,
// one to three operations (a POST each, to a collection of its own) with
// one to three callers, and the faults — the server's answer to each
// request of each operation, refused dials and connections cut mid-write,
// redirects, a Store that fails or freezes, a crash of the client process
// at any event and a new process resuming from the Store. Run executes a
// plan and Check tests the invariants on what happened; Shrink removes
// faults from a failing plan while it still fails.
//
// Faults and timings are a function of the seed; goroutine order is not
// (synctest makes time virtual, not scheduling), so a replay runs a seed
// several times and reports how many runs reproduce. The tests are the
// entry points: TestSimulate (the sweep), TestReplay, and TestMutants
// under -tags mutants. See README.md.
package sim
