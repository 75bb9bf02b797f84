// Package e2e holds the end-to-end tests of resilient: its Transport over real
// sockets against the fake server, directly and through real intermediaries
// (toxiproxy, nginx), with the client process killed mid-operation, and with bad
// input. It is its own module so that the toxiproxy client and its
// dependencies stay out of the SDK's module. It has no API: everything is in the
// _test.go files.
//
// # Running
//
//	scripts/e2e-deps             # once: installs toxiproxy-server, nginx and stripe-mock
//	cd e2e && go test -race ./...
//	cd e2e && go test -race -short ./...   # fewer operations per fault
//
// A missing toxiproxy-server, nginx or stripe-mock fails the tests (never skips
// them) with a message naming scripts/e2e-deps and the command that installs
// the program.
//
// TestStripeGoAgainstStripeMock runs github.com/stripe/stripe-go, whose HTTP
// client is a resilient one, against stripe-mock (Stripe's API with canned
// responses) behind a fault proxy: how the SDK accounts for an SDK that
// retries on its own, and the two setups that make sense.
//
// TestStripeGoAndALocalRefusal checks that a request the Transport refuses
// without sending it is, with WithRefusalResponses, an answer stripe-go does
// not retry.
//
// TestNeverWorseThanBareClient sends, under every fault of the three fault
// matrices, the same POSTs with a bare client and with resilient.Wrap and
// its defaults to an API that ignores idempotency keys, and checks that no
// operation gets more effects with the SDK than without (see its doc). Its
// second table holds the same rows, with the defaults, to the oracle below.
//
// # The oracle
//
// Every operation is one POST /v1/charges with its own idempotency key (twins
// share one: see the in-progress fault). What the caller was told puts it in
// one of three classes:
//
//   - success: no error and a final 2xx status;
//   - unknown: a *resilient.Error with Unknown true, or no error and a final
//     response that does not say whether the effect exists: any 5xx (the fake
//     server's injected and outage answers, a capacity 503, nginx's 502 and
//     504 pages), a 409 whose problem code is idempotency.in_progress, or any
//     final response whose resilient.Report says Unknown (an earlier attempt
//     may have been applied and nothing since has answered for it);
//   - failed: a *resilient.Error with Unknown false, or no error and any other
//     final status (4xx, 429 included).
//
// The fake server's ledger then must show, for every key: exactly one effect
// when some operation with that key was told success (and, when the success
// body could be read, the object it names is that effect); no effect when an
// operation with that key was told failed; at most one effect in every case.
// No effect may exist without a key, or under a key no operation sent, and
// Stats.DuplicateEffects must be 0. An error that is not a *resilient.Error
// is itself a violation.
package e2e
