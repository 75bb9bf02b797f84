package resilient

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAskedDelaysBounded: the delays kept for outer loops' next tries are
// at most maxAsked; one that has passed is forgotten, to make room or when
// read.
func TestAskedDelaysBounded(t *testing.T) {
	var a askedDelays
	for i := range maxAsked {
		a.set(strconv.Itoa(i), 100+int64(i), 0)
	}
	a.set("new", 500, 0)
	assert.Zero(t, a.get("new", 0), "full of delays still on: not kept")
	assert.Equal(t, int64(100), a.get("0", 0))
	a.set("new", 500, 150) // "0"…"49" have passed at 150: room
	assert.Equal(t, int64(500), a.get("new", 150))
	assert.Zero(t, a.get("60", 160), "passed")
	assert.LessOrEqual(t, len(a.until), maxAsked)
	a.set("new", 400, 150)
	assert.Equal(t, int64(500), a.get("new", 150), "a later time is never shortened")
}
