package idempotency

import "net/http"

// Storage is a policy for the handler's answers: which are stored and
// replayed, and which are released so that a retry runs the handler again.
// Whatever the policy, a panic or an answer larger than MaxAnswer is
// stored as a 500 by a store that is not atomic and released by one that
// is (see New).
type Storage uint8

// The storage policies.
const (
	// StorageByStore, the default, stores every answer except 408, 425,
	// 429 and 503, which say that nothing was done. Another 5xx is stored
	// by a store that is not atomic, since the handler may have acted, and
	// rolled back with the effects by one that is.
	StorageByStore Storage = iota
	// StorageIETF follows draft-ietf-httpapi-idempotency-key-header: it
	// stores 2xx, 3xx and 4xx answers except 408, 409, 425 and 429, and
	// releases every 5xx, even from a store that is not atomic. Use it only
	// when a 5xx of the handler means that nothing was done.
	StorageIETF
	// StorageStripe stores every answer except 429, 5xx included, as
	// Stripe's API does: a retry gets the failure again, never a second
	// run. With an atomic store a stored 5xx commits the handler's effects.
	StorageStripe
)

// stores reports whether p stores an answer with status that the handler
// wrote, for a store that is atomic or not.
func (p Storage) stores(status int, atomic bool) bool {
	switch p {
	case StorageIETF:
		switch status {
		case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
			return false
		}
		return status < 500
	case StorageStripe:
		return status != http.StatusTooManyRequests
	}
	switch {
	case nothingDone(status):
		return false // the handler says it did not act: the retry must run
	case status >= 500:
		return !atomic
	}
	return true
}

// valid reports whether p is one of the policies.
func (p Storage) valid() bool { return p <= StorageStripe }
