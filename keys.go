package resilient

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient/internal/wire"
)

// NewKey returns a new UUIDv7 (RFC 9562) as a 36-character string. It holds
// 48 bits of Unix milliseconds, then random bits from crypto/rand. So keys
// minted in sequence sort in time order, and their age can be read back. A
// Transport mints such keys by default, from a buffer of crypto/rand bytes
// of its own (see WithKeyFunc).
func NewKey() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("resilient: minting key: %w", err)
	}
	return u.String(), nil
}

// ValidateKey reports whether key can be sent as an idempotency key: non-empty,
// at most 255 bytes, printable ASCII (0x20–0x7E, no leading or trailing
// space). The error wraps ErrInvalidKey and never echoes the key.
func ValidateKey(key string) error { return wire.ValidateKey(key) }
