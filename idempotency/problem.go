package idempotency

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ProblemTypeBase prefixes the type of every RFC 9457 problem the
// middleware answers with; the last segment names it: missing-key,
// invalid-key, invalid-body, too-large, body-timeout, incomplete-body,
// budget-spent, in-progress, payload-mismatch, failed. The resilient client's DefaultClassifier recognises in-progress
// (retry after Retry-After) and payload-mismatch (terminal). The titles
// are those of draft-ietf-httpapi-idempotency-key-header.
const ProblemTypeBase = "https://github.com/resilienthttp/resilient/problems/"

// problem is an RFC 9457 problem-details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code,omitempty"`
}

// problemResponse builds a problem-details answer.
func problemResponse(status int, slug, title, detail, code string) *Response {
	body, err := json.Marshal(problem{Type: ProblemTypeBase + slug, Title: title, Status: status, Detail: detail, Code: code})
	if err != nil { // cannot happen: strings and an int
		panic("idempotency: " + err.Error())
	}
	return &Response{
		Status: status,
		Header: http.Header{"Content-Type": {"application/problem+json"}},
		Body:   append(body, '\n'),
	}
}

func problemMissingKey(header string) *Response {
	return problemResponse(http.StatusBadRequest, "missing-key", header+" is missing",
		"This operation is idempotent and it requires correct usage of "+header+".", "idempotency.missing_key")
}

func problemInvalidKey(header string, err error) *Response {
	return problemResponse(http.StatusBadRequest, "invalid-key", header+" is invalid", err.Error(), "idempotency.invalid_key")
}

func problemInvalidBody(err error) *Response {
	return problemResponse(http.StatusBadRequest, "invalid-body", "The request body cannot be fingerprinted",
		err.Error(), "idempotency.invalid_body")
}

func problemTooLarge(limit int64) *Response {
	return problemResponse(http.StatusRequestEntityTooLarge, "too-large", "Content Too Large",
		"the body is larger than "+strconv.FormatInt(limit, 10)+" bytes", "")
}

func problemInProgress(header string, retryAfter time.Duration) *Response {
	secs := strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10)
	p := problemResponse(http.StatusConflict, "in-progress", "A request is outstanding for this "+header,
		"A request with the same "+header+" for the same operation is still in progress; retry after "+secs+
			" s to get its response.", "idempotency.in_progress")
	p.Header.Set("Retry-After", secs)
	return p
}

func problemMismatch(header string, status int) *Response {
	return problemResponse(status, "payload-mismatch", header+" is already used",
		"This "+header+" was already used with a different payload for this operation; a new operation needs a new key.",
		"idempotency.payload_mismatch")
}

// problemFailed answers an operation whose answer could not be stored
// (detail says why). It carries no Idempotency-Status.
func problemFailed(detail string) *Response {
	return problemResponse(http.StatusInternalServerError, "failed", "Internal Server Error", detail, "")
}

// problemUnreadable answers a request whose body could not be read whole,
// so that nothing ran: 413 when a size limit fired (an outer
// http.MaxBytesReader), 408 when the server's read deadline fired, else
// 400 (the client stopped sending).
func problemUnreadable(err error) *Response {
	var tooLarge *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooLarge):
		return problemTooLarge(tooLarge.Limit)
	case errors.As(err, &ne) && ne.Timeout():
		return problemResponse(http.StatusRequestTimeout, "body-timeout", "Request Timeout",
			"the body was not received in time; nothing was done", "")
	}
	return problemResponse(http.StatusBadRequest, "incomplete-body", "Bad Request",
		"the body could not be read whole; nothing was done", "")
}
