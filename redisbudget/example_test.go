package redisbudget_test

import (
	"fmt"
	"net/http"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/redisbudget"
)

// Every replica of a service shares one retry budget per destination host:
// retries to a host stay below 20 % of the fleet's first attempts to it,
// plus 10 per second.
func ExampleNew() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	fleet := redisbudget.New(rdb, redisbudget.Config{
		OnStateChange: func(host string, from, to redisbudget.State, err error) {
			fmt.Printf("retry budget of %s: %v → %v (%v)\n", host, from, to, err)
		},
	})
	defer fleet.Close()
	client := resilient.NewClient(resilient.WithRetryControl(resilient.SharedBudget(fleet.For)))
	_ = client // client.Get(...), client.Post(...)
}

// A Memory backend shares budgets between the Fleets of one process, for
// simulations and tests.
func ExampleNewWithBackend() {
	mem := redisbudget.NewMemory()
	a := redisbudget.NewWithBackend(mem, redisbudget.Config{})
	b := redisbudget.NewWithBackend(mem, redisbudget.Config{})
	defer a.Close()
	defer b.Close()
	_ = &http.Client{Transport: resilient.NewTransport(http.DefaultTransport, resilient.WithRetryControl(resilient.SharedBudget(a.For)))}
	fmt.Println(b.Stats().Budgets)
	// Output: 0
}
