package idempotency_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/resilienthttp/resilient/idempotency"
)

// A message whose handler always fails runs MaxFailures times, then is a
// dead letter: Do refuses it without running fn, and an operator lists it
// and, once the cause is fixed, releases it for another try.
func ExampleInbox_deadLetters() {
	ctx := context.Background()
	in := &idempotency.Inbox{Store: idempotency.NewMemoryStore(), MaxFailures: 3}
	broken := func(context.Context) ([]byte, error) { return nil, errors.New("downstream refused") }
	for range 5 {
		_, _, err := in.Do(ctx, "evt_1", nil, broken)
		fmt.Println(err)
	}

	dead, err := in.DeadLetters(ctx, 10)
	if err != nil {
		panic(err)
	}
	for _, d := range dead {
		fmt.Println(d.Key, d.Failures, d.LastError)
	}
	if err := in.ReleaseDeadLetter(ctx, "evt_1"); err != nil {
		panic(err)
	}
	res, _, err := in.Do(ctx, "evt_1", nil, func(context.Context) ([]byte, error) { return []byte("done"), nil })
	fmt.Println(string(res), err)
	// Output:
	// downstream refused
	// downstream refused
	// downstream refused
	// idempotency: the message is a dead letter: it failed too often
	// idempotency: the message is a dead letter: it failed too often
	// evt_1 3 downstream refused
	// done <nil>
}
