// Package crashmatrix is the crash matrix of the durable Stores, shared by
// their modules' tests: a client process that issues operations through a
// Transport with a Store (ContextWithOperation) is killed with SIGKILL at
// points of an operation — after the Store claim and before sending, after
// the server committed, during the backoff before a retry (with and
// without an effect), each also in the second hop of an operation that
// goes through a 307 or 308 redirect, and at random times — and a new
// process on the same Store resumes the pending operations
// (Store.Pending) and issues the rest. The oracle: every operation has
// exactly one effect on the fake server, under the key the Store holds;
// an operation killed at a kill point is resumed, not issued anew; nothing
// is left pending. Between two children of Sequence the parent reads the
// Store: an operation a killed child completed (the Store holds it done,
// its effect is on the server under its key) before it could print so is
// completed for the oracle; one done without its effect, or gone, fails.
//
// A test binary that runs the matrix (EachPoint, Sequence) calls Main first
// in its TestMain: the child processes are the test binary itself,
// re-executed. Child and At also serve children of a test's own design
// (persist/postgres's order service).
package crashmatrix

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Kill points. A child stops at the deterministic ones itself (it prints
// "at PHASE OP" and sleeps until the parent's SIGKILL); Random is a SIGKILL
// at a random time, wherever the child is.
const (
	// Claimed: the operation's key is durable in the Store, nothing is sent.
	Claimed = "claimed"
	// Sent: the server has committed the effect and answered; the answer
	// has not reached the Transport.
	Sent = "sent"
	// BackoffAfterEffect: attempt 0 reached the server, committed, and its
	// connection was reset; the Transport sleeps before the retry.
	BackoffAfterEffect = "backoff-after-effect"
	// BackoffBeforeEffect: attempt 0 was answered 503 by a gateway that
	// never reached the server; the Transport sleeps before the retry.
	BackoffBeforeEffect = "backoff-before-effect"
	// Random: a SIGKILL at a random time.
	Random = "random"
	// The same four kill points in the second hop of an operation that goes
	// through a 307 or 308 redirect: after the first hop's redirect was
	// answered and the client follows it.
	HopClaimed             = "hop-claimed"
	HopSent                = "hop-sent"
	HopBackoffAfterEffect  = "hop-backoff-after-effect"
	HopBackoffBeforeEffect = "hop-backoff-before-effect"
)

// Phases are the kill points, Random last.
var Phases = []string{Claimed, Sent, BackoffAfterEffect, BackoffBeforeEffect,
	HopClaimed, HopSent, HopBackoffAfterEffect, HopBackoffBeforeEffect, Random}

// hopPhase reports whether a kill point is in the second hop of a redirect.
func hopPhase(phase string) bool { return strings.HasPrefix(phase, "hop-") }

// At prints "at PHASE OP", the line on which the parent (Child.Run) kills
// the process, and waits for the SIGKILL; a parent that never sends it gets
// a process that exits with status 3.
func At(phase string, op any) {
	fmt.Printf("at %s %v\n", phase, op)
	time.Sleep(time.Minute)
	os.Exit(3)
}

// Child is a child process to run: the test binary, re-executed with no
// test to run and Env added to its environment.
type Child struct {
	Env []string
	// KillAfter, if positive, SIGKILLs the child this long after it starts,
	// or after it prints "ready" if FromReady is set.
	KillAfter time.Duration
	FromReady bool
}

// KilledAt returns c to be killed at kill: "random:DELAY_MS" SIGKILLs the
// child after the delay; any other non-empty kill ("PHASE:OP") goes into
// the child's environment as env=kill, for the child to stop there (At).
func (c Child) KilledAt(env, kill string) Child {
	phase, arg, _ := strings.Cut(kill, ":")
	switch {
	case phase == Random:
		ms, _ := strconv.Atoi(arg)
		c.KillAfter = time.Duration(ms) * time.Millisecond
	case kill != "":
		c.Env = append(append([]string(nil), c.Env...), env+"="+kill)
	}
	return c
}

// Incarnation is what one run of a child printed and how it ended.
type Incarnation struct {
	Lines  []string
	Killed bool  // SIGKILL ended it
	Err    error // cmd.Wait's error
}

// Run runs the child until it exits, SIGKILLs it when it prints a line
// that starts with "at " (At) or at c.KillAfter, and returns what it
// printed. A watchdog kills a child still running after a minute.
func (c Child) Run(t testing.TB) Incarnation {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() { _ = cmd.Process.Kill() }
	var timer *time.Timer
	if c.KillAfter > 0 && !c.FromReady {
		timer = time.AfterFunc(c.KillAfter, kill)
	}
	watchdog := time.AfterFunc(time.Minute, kill)
	var inc Incarnation
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		inc.Lines = append(inc.Lines, line)
		switch {
		case line == "ready" && c.KillAfter > 0 && c.FromReady:
			timer = time.AfterFunc(c.KillAfter, kill)
		case strings.HasPrefix(line, "at "):
			kill() // SIGKILL
		}
	}
	watchdog.Stop()
	inc.Err = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	var ee *exec.ExitError
	if errors.As(inc.Err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			inc.Killed = true
		}
	}
	return inc
}
