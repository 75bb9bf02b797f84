package sim

import (
	"strings"
	"testing"

	"github.com/resilienthttp/resilient/persist"
)

// Defects of the root package the simulator found, each fixed, each
// test the shrunk schedule that showed it (it failed before the fix).

// TestRegressionRetryPastKeyRetention: WithKeyRetention says a pending key
// older than the retention "is not reused", but only a Store claim checks
// the age; the retry loop does not. Found by seed 312 (with a 1 s
// retention, before plans kept the retention longer than any call): the
// first attempt is applied and its answer lost, the second gets a 503 with
// Retry-After: 2s, and the third goes out 2 s after the key was minted,
// past the 1 s the server keeps it, and is applied again.
func TestRegressionRetryPastKeyRetention(t *testing.T) {
	p, err := ParsePlan(`{"seed":312,"server_ttl":1000000000,"max_attempts":4,"backoff_base":0,"backoff_max":0,"attempt_timeout":2000000000,"key_retention":1000000000,"declared":true,"ops":[{"name":"opb","keying":"minted","callers":1,"faults":[{"kind":"lost"},{"kind":"status","status":503,"retry_after":2000000000}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	bad, res := runPlan(t, p, t.TempDir())
	if len(bad) > 0 {
		t.Fatalf("%s\n%s", strings.Join(bad, "\n"), Describe(res))
	}
}

// TestRegressionStaleRetentionCheckAfterSlowClaim: call.claim (operation.go)
// reads the clock before the Store's Claim and checks the key's age
// against that time, so a Claim that takes longer than what is left of the
// retention returns a key the server may have forgotten, and it is sent.
// Found by seed 15960 (a claim frozen for 60 s with a 60 s retention);
// shrunk by hand: two callers of one named operation, the second caller's
// claim takes 90 s, the server keeps keys for 60 s: the second caller
// creates a second object. Reading the clock after Claim returns (and
// checking the age before each attempt, see above) would refuse the key.
func TestRegressionStaleRetentionCheckAfterSlowClaim(t *testing.T) {
	p, err := ParsePlan(`{"seed":1,"server_ttl":60000000000,"max_attempts":3,"backoff_base":0,"backoff_max":0,"attempt_timeout":2000000000,"key_retention":60000000000,"store":"memory","store_faults":[{"op":"opa","method":"claim","n":2,"freeze":90000000000}],"ops":[{"name":"opa","keying":"named","callers":2}]}`)
	if err != nil {
		t.Fatal(err)
	}
	bad, res := runPlan(t, p, t.TempDir())
	if len(bad) > 0 {
		t.Fatalf("%s\n%s", strings.Join(bad, "\n"), Describe(res))
	}
}

// TestRegressionPendingOverwritesDone: with many callers of one named
// operation, a caller whose outcome is unknown records Pending after
// another caller recorded Done (call.record, operation.go, and Store.Finish
// overwrite the state), so a completed operation is listed as pending; a
// resumer then repeats it, or, past the retention, reports ErrKeyExpired
// for an operation a caller saw succeed. Found by seed 1590 with the
// "2xx ⇒ Done" check extended to many callers (Check keeps it to an
// operation's only call); shrunk by hand: two callers, the first request
// is answered 201, the second (a replay) hangs until its 10 ms attempt
// timeout, with one attempt allowed.
func TestRegressionPendingOverwritesDone(t *testing.T) {
	p, err := ParsePlan(`{"seed":1,"server_ttl":3600000000000,"max_attempts":1,"backoff_base":0,"backoff_max":0,"attempt_timeout":10000000,"key_retention":3600000000000,"store":"memory","ops":[{"name":"opa","keying":"named","callers":2,"faults":[{},{"kind":"hang"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	bad, res := runPlan(t, p, t.TempDir())
	if len(bad) > 0 {
		t.Fatalf("%s\n%s", strings.Join(bad, "\n"), Describe(res))
	}
	if res.States["opa"] != persist.Done {
		t.Fatalf("a caller got 201, but the operation is %v in the Store\n%s", res.States["opa"], Describe(res))
	}
}
