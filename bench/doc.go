// Package bench compares the per-request cost of resilient's Transport with
// bare net/http and two peers, github.com/hashicorp/go-retryablehttp and
// github.com/failsafe-go/failsafe-go, and measures the policies a user picks
// between (budgets, backoffs, breakers, key minting).
//
// Everything is in the package's benchmarks:
//
//	cd bench && go test -run '^$' -bench . -benchmem ./...
//
// The package holds the clients the benchmarks compare (NetHTTP, Resilient,
// RetryableHTTP, Failsafe), which bench/storm uses too; the retry-storm
// benchmark is in bench/storm and its command in bench/cmd/storm.
// bench is its own Go module, so that the peers and the plotting library stay
// out of the dependencies of github.com/resilienthttp/resilient.
package bench
