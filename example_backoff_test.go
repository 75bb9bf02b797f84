package resilient_test

import (
	"fmt"
	"time"

	"github.com/resilienthttp/resilient"
)

// Exponential doubles the delay on each retry up to the cap. It has no
// jitter, so its delays are exact.
func ExampleExponential() {
	b := resilient.Exponential(100*time.Millisecond, 2*time.Second)
	for attempt := 1; attempt <= 7; attempt++ {
		fmt.Println(attempt, b.Delay(attempt, 0))
	}

	// Output:
	// 1 100ms
	// 2 200ms
	// 3 400ms
	// 4 800ms
	// 5 1.6s
	// 6 2s
	// 7 2s
}

// FullJitter, the default, draws each delay from [0, min(max, base·2^(attempt-1))).
func ExampleFullJitter() {
	b := resilient.FullJitter(100*time.Millisecond, 2*time.Second)
	for attempt := 1; attempt <= 6; attempt++ {
		d := b.Delay(attempt, 0)
		ceiling := min(2*time.Second, 100*time.Millisecond<<(attempt-1))
		fmt.Printf("attempt %d: below %v: %t\n", attempt, ceiling, d >= 0 && d < ceiling)
	}

	// Output:
	// attempt 1: below 100ms: true
	// attempt 2: below 200ms: true
	// attempt 3: below 400ms: true
	// attempt 4: below 800ms: true
	// attempt 5: below 1.6s: true
	// attempt 6: below 2s: true
}
