package bolt_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/resilienthttp/resilient/persist"
	"github.com/resilienthttp/resilient/persist/bolt"
)

// A process keeps its pending keys in a file. After a crash, the next run
// opens the same file and resumes the pending operations with their keys.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "resilient-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "operations.db")
	ctx := context.Background()

	// First run: claim a key, then "crash" before the operation finishes.
	store, err := bolt.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	rec, claimed, err := store.Claim(ctx, persist.Record{
		Operation: "refund:ch_123",
		Key:       "0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claimed", rec.Key, claimed)
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	// Next run: the pending operation is still there, with the same key.
	store, err = bolt.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	pending, err := store.Pending(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range pending {
		fmt.Println("resume", rec.Operation, rec.Key)
		if err := store.Finish(ctx, rec.Operation, persist.Done, 1); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// claimed 0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a true
	// resume refund:ch_123 0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a
}
