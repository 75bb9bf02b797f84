package redis

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/resilienthttp/resilient/persist"
)

// ErrCorrupt is wrapped by the error a Store returns when a Redis key it owns
// holds data it cannot decode.
var ErrCorrupt = errors.New("persist/redis: corrupt record")

// maxMicros bounds Created in Unix microseconds: scores of sorted sets are
// float64, exact up to 2^53 (years 1685 to 2255).
const maxMicros = 1 << 53

// micros returns t in Unix microseconds, rounded down.
func micros(t time.Time) int64 {
	return t.UnixMicro() // floor: Nanosecond is never negative
}

// decodeFields builds op's record from the values of the hash fields key, fp,
// created, state and attempts, as a script returned them.
func decodeFields(op string, v any) (persist.Record, error) {
	f, ok := v.([]any)
	if !ok || len(f) != 5 {
		return persist.Record{}, corruptf(op, "fields %v", v)
	}
	var s [5]string
	names := [5]string{"key", "fp", "created", "state", "attempts"}
	for i, x := range f {
		str, ok := x.(string)
		if !ok {
			return persist.Record{}, corruptf(op, "field %s is %v", names[i], x)
		}
		s[i] = str
	}
	created, err := strconv.ParseInt(s[2], 10, 64)
	if err != nil || created <= -maxMicros || created >= maxMicros {
		return persist.Record{}, corruptf(op, "field created is %q", s[2])
	}
	state, err := strconv.ParseUint(s[3], 10, 8)
	if err != nil || (persist.State(state) != persist.Pending && persist.State(state) != persist.Done) {
		return persist.Record{}, corruptf(op, "field state is %q", s[3])
	}
	attempts, err := strconv.ParseInt(s[4], 10, 64)
	if err != nil || attempts < 0 || attempts > math.MaxInt {
		return persist.Record{}, corruptf(op, "field attempts is %q", s[4])
	}
	if s[0] == "" {
		return persist.Record{}, corruptf(op, "field key is empty")
	}
	return persist.Record{
		Operation:   op,
		Key:         s[0],
		Fingerprint: s[1],
		Created:     time.UnixMicro(created).UTC(),
		State:       persist.State(state),
		Attempts:    int(attempts),
	}, nil
}

// corruptf returns an error wrapping ErrCorrupt about op's record.
func corruptf(op, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrCorrupt, op, fmt.Sprintf(format, args...))
}
