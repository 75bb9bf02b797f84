// Package v1fixture holds records as the middleware and Inbox of scope and
// fingerprint version 1 (commit e10c1d1) wrote them, in each store's
// format, and the requests that wrote them: the stores' tests load them
// and check that the current code honours them.
//
// The fixtures were written by gen_postgres.go.txt and gen_redis.go.txt,
// copied as _test.go files into idempotency/postgres and idempotency/redis
// of a worktree at e10c1d1 and run there:
//
//	git worktree add --detach /tmp/old e10c1d1
//	cp gen_postgres.go.txt /tmp/old/idempotency/postgres/gen_fixture_test.go
//	cp scenario.go /tmp/old/idempotency/postgres/scenario_test.go  # package line changed to postgres_test
//	cd /tmp/old/idempotency/postgres && V1FIXTURE=$PWD/postgres.json go test -run TestWriteV1Fixture .
//
// and likewise for Redis.
package v1fixture

import "time"

// Request is one request of the scenario.
type Request struct {
	Path, Key, Authorization, Body string
}

// Requests are the middleware's requests of the scenario, on the route
// "POST /v1/payments": a bearer principal, none, and a query.
var Requests = []Request{
	{"/v1/payments", "fx-bearer", "Bearer tok_alice",
		`{"currency":"eur", "amount": 1000.0, "note": "caf\u00e9 \"x\" \ud83d\ude00", "items": [1, 2.50, -0.0, 1e2], "meta": {"z": null, "a": true}}`},
	{"/v1/payments", "fx-anon", "", `{"amount": 7}`},
	{"/v1/payments?amount=100", "fx-query", "Bearer tok_alice", `{}`},
}

// Inbox is the Inbox call of the scenario: inbox "webhooks", a JSON payload
// not in canonical form.
var Inbox = struct{ Name, Key, Payload, Result string }{
	"webhooks", "evt_fx", `{"type": "paid", "id": "evt_fx", "amount": 10}`, "handled evt_fx",
}

// Now is the records' clock of the scenario.
var Now = time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
