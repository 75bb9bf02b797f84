package resilient

// ProblemTypeRefused is the RFC 9457 problem type of the Transport's refusal
// responses (WithRefusalResponses): it refused to send the request.
const ProblemTypeRefused = "https://github.com/resilienthttp/resilient/problems/refused"

// The problem types of the idempotency answers that DefaultClassifier
// recognises besides the IETF draft's titles and Stripe's error codes; the
// fakeserver package answers with them (fakeserver.ProblemTypeBase).
const (
	problemTypeInProgress      = "https://github.com/resilienthttp/resilient/problems/in-progress"
	problemTypePayloadMismatch = "https://github.com/resilienthttp/resilient/problems/payload-mismatch"
)
