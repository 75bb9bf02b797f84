package resilient_test

import (
	"fmt"
	"time"

	"github.com/resilienthttp/resilient"
)

// A Budget counts first attempts and retries over a rolling window. The
// explicit-time methods make its behaviour reproducible.
func ExampleBudget() {
	b := resilient.NewBudget(resilient.BudgetConfig{
		Ratio:        0.1, // retries may add 10 % to the traffic
		MinPerSecond: -1,  // and nothing more (0 would mean the default, 10/s)
		Window:       10 * time.Second,
	})
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

	// 50 operations send their first attempt, and all of them fail.
	for range 50 {
		b.DepositAt(now)
	}
	fmt.Println("available:", b.AvailableAt(now))

	retries := 0
	for b.WithdrawAt(now) {
		retries++
	}
	fmt.Println("retries allowed:", retries)

	// One window later the failures have expired: only new traffic counts.
	later := now.Add(10 * time.Second)
	fmt.Println("retry allowed with no new traffic:", b.WithdrawAt(later))
	for range 20 {
		b.DepositAt(later)
	}
	fmt.Println("available after 20 new operations:", b.AvailableAt(later))

	// Output:
	// available: 5
	// retries allowed: 5
	// retry allowed with no new traffic: false
	// available after 20 new operations: 2
}

// The default budget allows 20 % of the traffic in retries, plus 10 retries
// per second so that a quiet client can still retry.
func ExampleNewBudget() {
	b := resilient.NewBudget(resilient.DefaultBudgetConfig())
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	fmt.Println("idle:", b.AvailableAt(now))
	for range 1000 {
		b.DepositAt(now)
	}
	fmt.Println("after 1000 first attempts:", b.AvailableAt(now))

	// Output:
	// idle: 100
	// after 1000 first attempts: 300
}
