package resilient

import (
	"net/http"

	"github.com/resilienthttp/resilient/internal/wire"
)

// RoundTrip sends req, retrying as configured. See Transport for the
// guarantees. Errors are *Error values. errors.Is matches them against these
// sentinels and the context's errors:
//
//	ErrInvalidKey, ErrInvalidRequest, ErrBodyNotReplayable, ErrStore,
//	ErrOperationMismatch, ErrKeyExpired, ErrCircuitOpen, ErrTokensExhausted,
//	ErrBudgetExhausted, ErrRetriesExhausted, ErrDelayTooLong, ErrRateLimited
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A plain call (plain.go) sends its first attempt without the loop's
	// state; any other request goes through the loop (roundTrip).
	var (
		resp *http.Response
		err  error
		ok   bool
		hs   wire.HeaderScan // the header's scan, made once
	)
	if t.plain && plainBody(req) {
		resp, err, ok = t.sendPlain(req, &hs)
	}
	if !ok {
		resp, err = t.roundTrip(req, hs)
	}
	if err != nil && t.cfg.refusalResponses {
		if r := refusalResponse(req, err, t.cfg.now()); r != nil {
			return r, nil
		}
	}
	if err == nil && (resp.ContentLength >= minResumable || resp.ContentLength < 0) && req.Method == http.MethodGet {
		t.resumable(req, resp) // resume.go
	}
	return resp, err
}
