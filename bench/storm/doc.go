// Package storm is the retry-storm benchmark: many clients send keyed POSTs
// at a steady rate to a fake server (github.com/resilienthttp/resilient/fakeserver)
// with a capacity limit, through an outage and at a range of independent
// failure rates, once per retry strategy, each strategy against a fresh
// server with exactly the same load. It reports, per strategy and scenario,
// the operations, the requests the server saw, their ratio (amplification),
// the success rate, the duplicate effects in the server's ledger, latency
// percentiles and the time goodput takes to recover after the outage
// (Result), as a Markdown table, JSON and plots.
//
// Run runs on loopback sockets (127.0.0.1 only); RunVirtual runs the same
// harness in simulated time with testing/synctest against the server's
// in-process transport, so that 100,000 clients over a simulated minute take
// seconds. SimulateOCC and RetryModel reproduce two published results
// (Brooker 2015 and 2022) with the SDK's own Backoff types and Transport.
//
// PlanTarget and TargetPlan.Run storm a server the user runs, within caps
// (the command's -target); ReadPolicies turns a team's own resilient
// options into strategies (-policy FILE). WriteHeadline writes the first
// screen of a run (Summary), WriteHTML a self-contained report.
//
// Every load is bounded: a schedule fixed in advance (at most 10 million
// operations per run), a deadline per operation and one per run.
// The command is bench/cmd/storm.
package storm
