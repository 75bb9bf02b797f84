package wire

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/resilienthttp/resilient/internal/reason"
)

// maxKeyLength is the longest idempotency key the Transport accepts from a
// caller (and the longest most servers store).
const maxKeyLength = 255

// KeySource mints a Transport's keys when no WithKeyFunc is set: the UUIDv7s
// of NewKey. Their random bits come from crypto/rand through a buffer. So a
// request does not pay a crypto/rand read of its own; uuid.NewV7 reads 16
// bytes per key. The buffer is the Transport's, not the process's:
// uuid.EnableRandPool is global state that belongs to the application. The
// zero keySource is ready to use; it is safe for concurrent use.
type KeySource struct {
	mu   sync.Mutex
	left int                 // unread bytes at the end of rand; 0: fill it
	rand [keyRandBuffer]byte // from crypto/rand
	slab strings.Builder     // the bytes of the last keys minted (see mint)
	last int64               // the time and sequence of the last key minted (v7Time)
}

// keyRandBuffer is how many random bytes keySource reads at once: 32 keys.
const keyRandBuffer = 512

// Read fills p from the buffer, at most what is left in it: uuid reads
// with io.ReadFull. It refills the buffer from crypto/rand when it is used
// up.
func (s *KeySource) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return (*heldKeySource)(s).Read(p)
}

// heldKeySource is a keySource whose mutex the caller holds: mint holds it
// across the UUID and the slab, one lock per key instead of two.
type heldKeySource KeySource

// Read is keySource.Read with s.mu held.
func (h *heldKeySource) Read(p []byte) (int, error) {
	s := (*KeySource)(h)
	if s.left == 0 {
		if _, err := rand.Read(s.rand[:]); err != nil {
			return 0, err
		}
		s.left = len(s.rand)
	}
	off := len(s.rand) - s.left
	if len(p) == len(uuid.UUID{}) && s.left >= len(p) {
		// A UUID's bytes, the one read mint makes: a copy of fixed size,
		// without memmove's call.
		*(*uuid.UUID)(p) = *(*uuid.UUID)(s.rand[off:])
		s.left -= len(p)
		return len(p), nil
	}
	n := copy(p, s.rand[off:])
	s.left -= n
	return n, nil
}

// Mint returns a new key, as NewKey does. Its keys pass ValidateKey by
// construction (36 bytes of hex digits and hyphens).
//
// It lays the UUIDv7 out as uuid.NewV7FromReader does: 48 bits of Unix
// milliseconds, the version, 12 bits of sub-millisecond time (v7Time), the
// variant, 62 random bits. It does so itself, under the one mutex it holds
// for the buffer: uuid's takes its own mutex, and its reader escapes, so
// each UUID it makes is a heap allocation (bench/README.md, "Why the hot
// path is written this way").
//
// The key's bytes are written into a slab shared by keySlabKeys keys. The
// slab is a strings.Builder: what it has written is never written again,
// so each key is a substring of its String. That saves the allocation of
// each key's string but that of every keySlabKeys-th. A key kept alive
// keeps its slab alive: at most keySlabKeys*36 bytes.
func (s *KeySource) Mint() (string, error) {
	s.mu.Lock()
	var u uuid.UUID
	if _, err := (*heldKeySource)(s).Read(u[:]); err != nil {
		s.mu.Unlock()
		return "", fmt.Errorf("resilient: minting key: %w", err)
	}
	milli, seq := s.v7Time(time.Now().UnixNano())
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(milli>>40), byte(milli>>32), byte(milli>>24), byte(milli>>16), byte(milli>>8), byte(milli)
	u[6] = 0x70 | 0x0f&byte(seq>>8) // version 7
	u[7] = byte(seq)
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b [36]byte
	formatKey(&b, &u)
	if s.slab.Cap()-s.slab.Len() < len(b) {
		s.slab.Reset() // the keys already handed out keep the old slab
		s.slab.Grow(keySlabKeys * len(b))
	}
	s.slab.Write(b[:])
	k := s.slab.String()
	s.mu.Unlock()
	return k[len(k)-len(b):], nil
}

// v7Time returns the milliseconds and the 12-bit sequence of a key minted
// at nano (Unix ns), as uuid's getV7Time does: the sequence is the
// sub-millisecond time in units of 256 ns. Their pair (milli<<12 + seq) is
// greater than that of any key s minted before, so s's keys sort in the
// order they were minted. It requires that s.mu is held.
func (s *KeySource) v7Time(nano int64) (milli, seq int64) {
	const nanoPerMilli = int64(time.Millisecond)
	milli = nano / nanoPerMilli
	seq = (nano - milli*nanoPerMilli) >> 8
	now := milli<<12 + seq
	if now <= s.last {
		now = s.last + 1
		milli, seq = now>>12, now&0xfff
	}
	s.last = now
	return milli, seq
}

// keySlabKeys is how many keys share an allocation (see mint).
const keySlabKeys = 16

// formatKey writes u's canonical form (u.String(): 8-4-4-4-12 lowercase
// hex) into b. It writes a byte of u at a time, at constant offsets, from a
// table of the 256 digit pairs (bench/README.md, "Why the hot path is
// written this way").
func formatKey(b *[36]byte, u *uuid.UUID) {
	pair := func(i int, x byte) { binary.LittleEndian.PutUint16(b[i:i+2], hexPairs[x]) }
	pair(0, u[0])
	pair(2, u[1])
	pair(4, u[2])
	pair(6, u[3])
	pair(9, u[4])
	pair(11, u[5])
	pair(14, u[6])
	pair(16, u[7])
	pair(19, u[8])
	pair(21, u[9])
	pair(24, u[10])
	pair(26, u[11])
	pair(28, u[12])
	pair(30, u[13])
	pair(32, u[14])
	pair(34, u[15])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
}

// hexPairs holds the two hex digits of each byte value, in the order
// binary.LittleEndian.PutUint16 stores them.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = uint16(digits[i>>4]) | uint16(digits[i&15])<<8
	}
	return t
}()

// ValidateKey is the root's ValidateKey: whether key can be sent as an
// idempotency key. The error wraps reason.ErrInvalidKey and never echoes the key.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", reason.ErrInvalidKey)
	case len(key) > maxKeyLength:
		return fmt.Errorf("%w: %d bytes, limit %d", reason.ErrInvalidKey, len(key), maxKeyLength)
	case key[0] == ' ' || key[len(key)-1] == ' ':
		return fmt.Errorf("%w: leading or trailing space", reason.ErrInvalidKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is not printable ASCII", reason.ErrInvalidKey, i)
		}
	}
	return nil
}

// MethodSet is a small set of HTTP methods; a bitmask of the common ones with
// a slice for the rest keeps the per-request check free of maps.
type MethodSet struct {
	bits  uint16
	other []string
}

// methodBit returns m's bit in methodSet.bits, and false for a method that
// has none. "" is GET, as in net/http. It is a switch, which the compiler turns into a search on length
// and content (bench/README.md, "Why the hot path is written this way").
func methodBit(m string) (uint16, bool) {
	switch m {
	case http.MethodGet, "":
		return 1 << 0, true
	case http.MethodHead:
		return 1 << 1, true
	case http.MethodPost:
		return 1 << 2, true
	case http.MethodPut:
		return 1 << 3, true
	case http.MethodPatch:
		return 1 << 4, true
	case http.MethodDelete:
		return 1 << 5, true
	case http.MethodConnect:
		return 1 << 6, true
	case http.MethodOptions:
		return 1 << 7, true
	case http.MethodTrace:
		return 1 << 8, true
	}
	return 0, false
}

// NewMethodSet returns the set of methods, in any case.
func NewMethodSet(methods ...string) MethodSet {
	var s MethodSet
	for _, m := range methods {
		m = strings.ToUpper(m)
		if bit, ok := methodBit(m); ok {
			s.bits |= bit
		} else {
			s.other = append(s.other, m)
		}
	}
	return s
}

// Has reports whether m is in s.
func (s MethodSet) Has(m string) bool {
	bit, _ := methodBit(m)
	return s.HasBit(bit, m)
}

// HasBit is has for method m, whose bit (methodBit) is bit: 0 for a method
// without one.
func (s MethodSet) HasBit(bit uint16, m string) bool {
	if bit != 0 {
		return s.bits&bit != 0
	}
	for _, o := range s.other {
		if o == m {
			return true
		}
	}
	return false
}

// WireKey returns the spelling under which the Transport sends the key
// header named canonical (see config.keyWire): lower case for the two names
// net/http takes for a mark of idempotence, canonical otherwise.
func WireKey(canonical string) string {
	switch canonical {
	case "Idempotency-Key", "X-Idempotency-Key":
		return strings.ToLower(canonical)
	}
	return canonical
}

// SentKey returns the key a request sent by the Transport (or by the
// caller with its own key) carries under the header named canonical, in
// whatever spelling: "" if none.
func SentKey(h http.Header, canonical, wire string) string {
	if vs := h[wire]; len(vs) > 0 {
		return vs[0]
	}
	if vs := h[canonical]; len(vs) > 0 {
		return vs[0]
	}
	for name, vs := range h {
		if len(vs) > 0 && strings.EqualFold(name, canonical) {
			return vs[0]
		}
	}
	return ""
}

// KeyTime returns the creation time embedded in a UUIDv7 key, and false for
// a key that is not a UUIDv7.
func KeyTime(key string) (time.Time, bool) {
	u, err := uuid.Parse(key)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}
