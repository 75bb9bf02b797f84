package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
)

// TestCheckFlags: each invariant flags a result that breaks it, and a
// clean result passes, so the sweep's silence means something.
func TestCheckFlags(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	plan := func(ignore bool, keying Keying) *Plan {
		p := &Plan{IgnoreKeys: ignore, Ops: []Op{{Name: "opa", Keying: keying, Callers: 1}}}
		if keying == KeyNamed {
			p.Store = "memory"
		}
		return p
	}
	ok := Call{Op: "opa", Start: t0, Return: t0.Add(time.Second), Status: 201, ID: "op_1"}
	tests := []struct {
		name string
		res  Result
		want string // "" for none
	}{
		{"clean", Result{Plan: plan(false, KeyMinted), Calls: []Call{ok}, Effects: map[string][]string{"opa": {"op_1"}}}, ""},
		{"two effects, deduping server", Result{Plan: plan(false, KeyMinted), Calls: []Call{ok}, Effects: map[string][]string{"opa": {"op_1", "op_2"}}}, "effects:"},
		{"two effects from one call, key-ignoring server", Result{Plan: plan(true, KeyMinted), Calls: []Call{ok}, Effects: map[string][]string{"opa": {"op_1", "op_2"}}}, "effects:"},
		{"more requests than attempts", Result{Plan: &Plan{MaxAttempts: 2, Ops: []Op{{Name: "opa", Keying: KeyMinted, Callers: 1}}},
			Calls: []Call{ok}, Effects: map[string][]string{"opa": {"op_1"}}, Arrivals: map[string]int{"opa": 3}}, "attempts:"},
		{"2xx without effect", Result{Plan: plan(false, KeyMinted), Calls: []Call{ok}, Effects: map[string][]string{}}, "lost:"},
		{"unknown without key", Result{Plan: plan(false, KeyMinted),
			Calls:   []Call{{Op: "opa", Start: t0, Return: t0, ResErr: &resilient.Error{Unknown: true, Attempts: 1}}},
			Effects: map[string][]string{}}, "lost:"},
		{"told not applied, but applied", Result{Plan: plan(false, KeyMinted),
			Calls:   []Call{{Op: "opa", Start: t0, Return: t0, ResErr: &resilient.Error{Key: "k", Attempts: 1}}},
			Effects: map[string][]string{"opa": {"op_1"}}}, "lost:"},
		{"done without effect", Result{Plan: plan(false, KeyNamed),
			Calls:   []Call{{Op: "opa", Start: t0, Return: t0, ResErr: &resilient.Error{Key: "k", Unknown: true, Attempts: 1}}},
			Effects: map[string][]string{}, States: map[string]persist.State{"opa": persist.Done}}, "lost: op opa is Done"},
		{"2xx left pending", Result{Plan: plan(false, KeyNamed), Calls: []Call{ok},
			Effects: map[string][]string{"opa": {"op_1"}}, States: map[string]persist.State{"opa": persist.Pending}}, "lost: op opa got 201"},
		{"returned after the deadline", Result{Plan: plan(false, KeyMinted),
			Calls:   []Call{{Op: "opa", Start: t0, Return: t0.Add(2 * time.Second), Bound: t0.Add(time.Second), Status: 503}},
			Effects: map[string][]string{}}, "deadline:"},
		{"body after the deadline", Result{Plan: plan(false, KeyMinted),
			Calls:   []Call{{Op: "opa", Start: t0, Return: t0, BodyEnd: t0.Add(2 * time.Second), Bound: t0.Add(time.Second), Status: 503}},
			Effects: map[string][]string{}}, "deadline:"},
		{"two callers see two objects", Result{Plan: plan(false, KeyExplicit),
			Calls: []Call{ok, {Op: "opa", Start: t0.Add(2 * time.Second), Return: t0.Add(3 * time.Second), Status: 201, ID: "op_2"}},
			// the server's ledger shows one: the second answer is not of it
			Effects: map[string][]string{"opa": {"op_1"}}}, "linearizable:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.res.End = t0.Add(time.Hour)
			bad := Check(&tt.res)
			if tt.want == "" {
				if len(bad) > 0 {
					t.Fatalf("want no violation, got %q", bad)
				}
				return
			}
			for _, b := range bad {
				if strings.Contains(b, tt.want) {
					return
				}
			}
			t.Fatalf("want a violation containing %q, got %q", tt.want, bad)
		})
	}
}

// TestShrinkKeepsOnlyWhatFails: with a failure that needs one lost
// answer, the shrinker removes every other operation, fault, crash and
// option.
func TestShrinkKeepsOnlyWhatFails(t *testing.T) {
	p := &Plan{
		Seed: 7, Store: "bolt", IdleTimeout: time.Millisecond, Declared: true,
		Crash: &Crash{Event: 3}, Resume: true, ResumeAfter: time.Minute,
		DialRefused: []int{1, 3}, WriteFaults: []WireCut{{Dial: 2, After: 10}},
		StoreFaults: []StoreFault{{Op: "opa", Method: "claim", N: 1}},
		Ops: []Op{
			{Name: "opa", Keying: KeyNamed, Callers: 3, Redirect: 307, Faults: []Fault{{Kind: FaultReset}, {Kind: FaultHang}}},
			{Name: "opb", Keying: KeyMinted, Callers: 1, CancelAt: time.Second, Faults: []Fault{{Kind: FaultStatus, Status: 503}, {Kind: FaultLost}, {Kind: FaultDrop}}},
		},
	}
	fails := func(q *Plan) bool {
		for _, op := range q.Ops {
			for _, f := range op.Faults {
				if f.Kind == FaultLost {
					return true
				}
			}
		}
		return false
	}
	got := Shrink(p, fails)
	want := `{"seed":7,"server_ttl":0,"max_attempts":0,"backoff_base":0,"backoff_max":0,"key_retention":0,"store":"memory","ops":[{"name":"opb","keying":"minted","callers":1,"faults":[{"kind":"lost"}]}]}`
	if got.JSON() != want {
		t.Fatalf("shrunk to\n%s\nwant\n%s", got.JSON(), want)
	}
	if p.Crash == nil || len(p.Ops) != 2 {
		t.Fatal("Shrink modified its argument")
	}
}
