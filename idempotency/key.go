package idempotency

import (
	"errors"
	"net/http"
	"strings"
)

// MaxKeyLength is the longest key accepted, in bytes after unquoting.
const MaxKeyLength = 255

// Errors of parseKey, in the detail of a 400 answer.
var (
	errRepeatedKey = errors.New("more than one Idempotency-Key header")
	errEmptyKey    = errors.New("the key is empty")
	errLongKey     = errors.New("the key is longer than 255 bytes")
	errKeyChars    = errors.New("the key must be printable ASCII")
	errKeyEscape   = errors.New("invalid escape in the quoted key")
	errKeyTrailing = errors.New("data after the quoted key")
	errKeyOpen     = errors.New("unterminated quoted key")
)

// parseKey reads the key header name of h: bare (abc, as Stripe's clients
// send it) or a Structured Field string ("abc", as the IETF draft sends
// it). present is false when there is no header. A bare key holding a
// comma is two header lines merged: refused as repeated.
func parseKey(h http.Header, name string) (key string, present bool, err error) {
	vals := h[name]
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, errRepeatedKey
	}
	v := strings.Trim(vals[0], " \t")
	if strings.HasPrefix(v, `"`) {
		key, err = parseSFString(v)
	} else if strings.IndexByte(v, ',') >= 0 {
		// Two field lines merged into one (RFC 9110 §5.3), as a proxy may
		// merge them: still a repeated key. An sf-string may hold a comma.
		err = errRepeatedKey
	} else {
		key, err = v, checkPrintable(v)
	}
	switch {
	case err != nil:
		return "", true, err
	case key == "":
		return "", true, errEmptyKey
	case len(key) > MaxKeyLength:
		return "", true, errLongKey
	}
	return key, true, nil
}

func checkPrintable(v string) error {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return errKeyChars
		}
	}
	return nil
}

// parseSFString parses an sf-string (RFC 8941 §3.3.3) that is the whole
// value.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errKeyEscape
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errKeyTrailing
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errKeyChars
		default:
			b.WriteByte(c)
		}
	}
	return "", errKeyOpen
}

// ParseKey reads the key header name of h as the middleware does: bare or
// a Structured Field string, printable ASCII, 1 to MaxKeyLength bytes; a
// bare key holding a comma is refused as repeated (two lines merged).
// present is false when there is no header; err says why a key is
// refused. A server reads it to act on the key before the middleware, as
// fakeserver draws its faults by key.
func ParseKey(h http.Header, name string) (key string, present bool, err error) {
	return parseKey(h, http.CanonicalHeaderKey(name))
}
