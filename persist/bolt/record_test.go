package bolt

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/persist"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  persist.Record
	}{
		{"typical", persist.Record{
			Operation: "refund:ch_123", Key: "0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a",
			Fingerprint: "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
			Created:     time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC), State: persist.Pending,
		}},
		{"done with attempts", persist.Record{
			Operation: "op", Key: "k", Created: time.Unix(1, 0).UTC(), State: persist.Done, Attempts: 4,
		}},
		{"empty fingerprint, pre-epoch time", persist.Record{
			Operation: "op", Key: "k", Created: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC), State: persist.Pending,
		}},
		{"zero time, huge attempts", persist.Record{
			Operation: "op", Key: "k", Created: time.Time{}.UTC(), State: persist.Done, Attempts: 1 << 40,
		}},
		{"binary strings", persist.Record{
			Operation: "\x00\xff", Key: "\n", Fingerprint: string(make([]byte, 300)),
			Created: time.Unix(0, 0).UTC(), State: persist.Pending,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeRecord(encodeRecord(tt.rec))
			require.NoError(t, err)
			assert.Equal(t, tt.rec, got)
		})
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	valid := encodeRecord(persist.Record{
		Operation: "op", Key: "key", Fingerprint: "fp",
		Created: time.Unix(1700000000, 5).UTC(), State: persist.Pending, Attempts: 1,
	})
	with := func(edit func(b []byte) []byte) []byte {
		return edit(append([]byte(nil), valid...))
	}
	tests := []struct {
		name    string
		data    []byte
		wantMsg string
	}{
		{"empty", nil, "truncated before version"},
		{"unknown version", with(func(b []byte) []byte { b[0] = 2; return b }), "record version 2"},
		{"zero state", with(func(b []byte) []byte { b[1] = 0; return b }), "record state 0"},
		{"unknown state", with(func(b []byte) []byte { b[1] = 7; return b }), "record state 7"},
		{"only header", valid[:2], "truncated in attempts"},
		{"truncated in name", valid[:len(valid)-8], "exceeds"},
		{"truncated before fingerprint", valid[:len(valid)-3], "truncated in fingerprint"},
		{"trailing bytes", append(append([]byte(nil), valid...), 0), "1 trailing bytes"},
		{"varint overflow", append([]byte{1, 1}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "overflows"},
		{"nanoseconds out of range", func() []byte {
			b := []byte{1, 1, 0}
			b = binary.AppendVarint(b, 0)
			return binary.AppendUvarint(b, 1e9)
		}(), "created nanoseconds 1000000000 out of range"},
		{"huge length", func() []byte {
			b := []byte{1, 1, 0, 0, 0}
			return binary.AppendUvarint(b, 1<<62)
		}(), "operation length 4611686018427387904 exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := decodeRecord(tt.data)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.Contains(t, err.Error(), "persist/bolt: corrupt data: ")
			assert.Zero(t, rec)
		})
	}
}

// FuzzDecodeRecord checks that decodeRecord never panics, fails only with
// ErrCorrupt, and that what it accepts re-encodes to an equal record.
// The seed corpus is in testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(persist.Record{
		Operation: "refund:ch_123", Key: "0190c9a2-7d1e-7c3a-9b7e-5f0e1d2c3b4a", Fingerprint: "ab12",
		Created: time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC), State: persist.Pending,
	}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			require.Zero(t, rec)
			return
		}
		again, err := decodeRecord(encodeRecord(rec))
		require.NoError(t, err)
		require.Equal(t, rec, again)
	})
}

func TestIndexKeyOrder(t *testing.T) {
	times := []time.Time{
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 999999999),
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(1700000000, 0),
		time.Unix(1700000000, 1),
		time.Unix(1700000001, 0),
	}
	for i := 1; i < len(times); i++ {
		a, b := indexKey(times[i-1], "z"), indexKey(times[i], "a")
		assert.Less(t, string(a), string(b), "%v < %v", times[i-1], times[i])
	}
	assert.Less(t, string(indexKey(times[0], "a")), string(indexKey(times[0], "b")))

	op, err := indexOperation(indexKey(times[4], "refund:1"))
	require.NoError(t, err)
	assert.Equal(t, "refund:1", string(op))
	_, err = indexOperation(make([]byte, indexPrefixLen))
	require.ErrorIs(t, err, ErrCorrupt)
}
