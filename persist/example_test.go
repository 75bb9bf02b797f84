package persist_test

import (
	"context"
	"fmt"
	"time"

	"github.com/resilienthttp/resilient/persist"
)

// A process claims an operation's key before its first attempt, claims it
// again when it retries (and gets the same key), and finishes it when the
// outcome is final.
func ExampleMemory() {
	ctx := context.Background()
	store := persist.NewMemory()

	rec, claimed, err := store.Claim(ctx, persist.Record{
		Operation:   "refund:ch_123",
		Key:         "0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a",
		Fingerprint: "sha256:…",
		Created:     time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Key, claimed, rec.State)

	// Another attempt of the same operation proposes a fresh key; it gets the stored one.
	rec, claimed, _ = store.Claim(ctx, persist.Record{Operation: "refund:ch_123", Key: "another key"})
	fmt.Println(rec.Key, claimed)

	pending, _ := store.Pending(ctx)
	fmt.Println(len(pending), "pending")

	if err := store.Finish(ctx, "refund:ch_123", persist.Done, 2); err != nil {
		panic(err)
	}
	pending, _ = store.Pending(ctx)
	fmt.Println(len(pending), "pending")
	// Output:
	// 0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a true pending
	// 0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a false
	// 1 pending
	// 0 pending
}
