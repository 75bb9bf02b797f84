package fakeserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ProblemTypeBase prefixes the type URI of every problem-details body
// (RFC 9457, application/problem+json) the server answers; the last segment
// names the problem: missing-key, invalid-key, invalid-json, too-large,
// not-found, method-not-allowed, in-progress, payload-mismatch, injected-fault,
// outage, over-capacity.
//
// The idempotency answers follow draft-ietf-httpapi-idempotency-key-header
// (§2.7): 400 for a missing key, 409 while a request with the key is in
// progress, 422 (or the configured status) for a key reused with another
// payload, with the draft's titles. The draft gives no type URIs of its own
// (its examples share one placeholder), so the types of the in-progress and
// payload-mismatch answers are the ones the resilient client's
// DefaultClassifier recognises: ProblemTypeBase + "in-progress" and
// ProblemTypeBase + "payload-mismatch".
const ProblemTypeBase = "https://github.com/resilienthttp/resilient/problems/"

// Problem codes, in the "code" member of problem bodies (the client's
// category of the answer, which clients may match on).
const (
	// CodeInProgress is the code of a 409 answered while the key is in progress.
	CodeInProgress = "idempotency.in_progress"
	// CodePayloadMismatch is the code of a key reused with a different payload.
	CodePayloadMismatch = "idempotency.payload_mismatch"
)

// problem is an RFC 9457 problem-details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code,omitempty"`
}

// problemResponse builds a problem-details answer.
func problemResponse(status int, slug, title, detail, code string) *response {
	body, err := json.Marshal(problem{
		Type:   ProblemTypeBase + slug,
		Title:  title,
		Status: status,
		Detail: detail,
		Code:   code,
	})
	if err != nil { // cannot happen: only strings and an int
		panic("fakeserver: " + err.Error())
	}
	return &response{
		status: status,
		header: http.Header{"Content-Type": {"application/problem+json"}},
		body:   append(body, '\n'),
	}
}

func problemMissingKey() *response {
	return problemResponse(http.StatusBadRequest, "missing-key", "Idempotency-Key is missing",
		"This operation is idempotent and it requires correct usage of Idempotency Key.", "")
}

func problemInvalidKey(err error) *response {
	return problemResponse(http.StatusBadRequest, "invalid-key", "Idempotency-Key is invalid", err.Error(), "")
}

func problemInProgress(retryAfter time.Duration) *response {
	p := problemResponse(http.StatusConflict, "in-progress",
		"A request is outstanding for this Idempotency-Key",
		"A request with the same Idempotency-Key for the same operation is still in progress; retry after "+
			retryAfterSeconds(retryAfter)+" s to get its response.", CodeInProgress)
	p.header.Set("Retry-After", retryAfterSeconds(retryAfter))
	return p
}

func problemMismatch(status int) *response {
	return problemResponse(status, "payload-mismatch",
		"Idempotency-Key is already used ("+CodePayloadMismatch+")",
		CodePayloadMismatch+": this Idempotency-Key was already used with a different payload for this "+
			"operation; a new operation needs a new key.", CodePayloadMismatch)
}

// retryAfterSeconds formats d as delay-seconds, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
