package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/resilienthttp/resilient/persist"
)

// ErrCorrupt is wrapped by the error a Store returns when the file holds data
// it cannot decode: a record or an index entry damaged on disk, or written by
// an incompatible version of this package.
var ErrCorrupt = errors.New("persist/bolt: corrupt data")

// recordVersion is the first byte of every encoded record.
const recordVersion = 1

// encodeRecord returns the version 1 encoding of r:
//
//	byte     version (1)
//	byte     state
//	uvarint  attempts
//	varint   Created, seconds since the Unix epoch
//	uvarint  Created, nanoseconds within the second
//	uvarint  length of Operation, then its bytes
//	uvarint  length of Key, then its bytes
//	uvarint  length of Fingerprint, then its bytes
//
// r.Attempts must not be negative.
func encodeRecord(r persist.Record) []byte {
	n := 2 + 4*binary.MaxVarintLen64 + len(r.Operation) + len(r.Key) + len(r.Fingerprint)
	b := make([]byte, 0, n+2*binary.MaxVarintLen64)
	b = append(b, recordVersion, byte(r.State))
	b = binary.AppendUvarint(b, uint64(r.Attempts))
	b = binary.AppendVarint(b, r.Created.Unix())
	b = binary.AppendUvarint(b, uint64(r.Created.Nanosecond()))
	for _, s := range []string{r.Operation, r.Key, r.Fingerprint} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// decodeRecord decodes what encodeRecord wrote. On malformed input it returns
// an error wrapping ErrCorrupt, never a partial record, and never panics.
// Created is returned in UTC.
func decodeRecord(b []byte) (persist.Record, error) {
	d := decoder{b: b}
	version := d.byte("version")
	if d.err == nil && version != recordVersion {
		return persist.Record{}, corrupt("record version %d, want %d", version, recordVersion)
	}
	state := persist.State(d.byte("state"))
	if d.err == nil && state != persist.Pending && state != persist.Done {
		return persist.Record{}, corrupt("record state %d", state)
	}
	attempts := d.uvarint("attempts", math.MaxInt)
	sec := d.varint("created seconds")
	nsec := d.uvarint("created nanoseconds", 999_999_999)
	op := d.string("operation")
	key := d.string("key")
	fp := d.string("fingerprint")
	if d.err == nil && len(d.b) > 0 {
		d.err = corrupt("%d trailing bytes after record", len(d.b))
	}
	if d.err != nil {
		return persist.Record{}, d.err
	}
	return persist.Record{
		Operation:   op,
		Key:         key,
		Fingerprint: fp,
		Created:     time.Unix(sec, int64(nsec)).UTC(),
		State:       state,
		Attempts:    int(attempts),
	}, nil
}

// decoder reads fields from b until the first error, which it keeps in err;
// after an error every read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = corrupt("record truncated before %s", field)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// uvarint reads an unsigned varint no greater than limit.
func (d *decoder) uvarint(field string, limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if !d.consumed(field, n) {
		return 0
	}
	if v > limit {
		d.err = corrupt("record %s %d out of range", field, v)
		return 0
	}
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if !d.consumed(field, n) {
		return 0
	}
	return v
}

// consumed advances past a varint of n bytes as binary.(U)varint reports it:
// n == 0 means the input ended, n < 0 an overflow; both set d.err.
func (d *decoder) consumed(field string, n int) bool {
	switch {
	case n == 0:
		d.err = corrupt("record truncated in %s", field)
		return false
	case n < 0:
		d.err = corrupt("record %s overflows 64 bits", field)
		return false
	}
	d.b = d.b[n:]
	return true
}

// string reads a length-prefixed string.
func (d *decoder) string(field string) string {
	n := d.uvarint(field, math.MaxUint64)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = corrupt("record %s length %d exceeds the %d bytes left", field, n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// corrupt returns an error wrapping ErrCorrupt with the given detail.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// indexPrefixLen is the length of the time prefix of an index key.
const indexPrefixLen = 12

// indexKey returns the key of op in the created and pending indexes: Created
// as 8 bytes of seconds (sign bit flipped, big-endian) and 4 bytes of
// nanoseconds, then the operation name, so that byte order is age order with
// ties in operation order.
func indexKey(created time.Time, op string) []byte {
	k := make([]byte, indexPrefixLen, indexPrefixLen+len(op))
	timePrefix(k, created)
	return append(k, op...)
}

// timePrefix writes the indexKey prefix of t into k[:indexPrefixLen].
func timePrefix(k []byte, t time.Time) {
	binary.BigEndian.PutUint64(k, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
}

// indexOperation returns the operation name of an index key.
func indexOperation(k []byte) ([]byte, error) {
	if len(k) <= indexPrefixLen {
		return nil, corrupt("index key of %d bytes", len(k))
	}
	return k[indexPrefixLen:], nil
}

// before reports whether index key k sorts before the time prefix p.
func before(k, p []byte) bool {
	return bytes.Compare(k[:min(len(k), indexPrefixLen)], p) < 0
}
