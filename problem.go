package resilient

// Problem types (RFC 9457 "type" members) of this package. DefaultClassifier
// recognises the first two in idempotency answers, besides the IETF draft's
// titles and Stripe's error codes (see DefaultClassifier); the fakeserver
// package answers with them, and a server may too. The Transport writes the
// third in its refusal responses (WithRefusalResponses).
const (
	// ProblemTypeInProgress: a request with the same key is still being
	// processed (409).
	ProblemTypeInProgress = "https://github.com/resilienthttp/resilient/problems/in-progress"
	// ProblemTypePayloadMismatch: the key was already used with a different
	// request (422, or 409).
	ProblemTypePayloadMismatch = "https://github.com/resilienthttp/resilient/problems/payload-mismatch"
	// ProblemTypeRefused: the Transport refused to send the request (a
	// refusal response, WithRefusalResponses).
	ProblemTypeRefused = "https://github.com/resilienthttp/resilient/problems/refused"
)
