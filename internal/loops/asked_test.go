package loops

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAskedDelaysBounded: the delays kept for outer loops' next tries are
// at most maxAsked; one that has passed is forgotten, to make room or when
// read.
func TestAskedDelaysBounded(t *testing.T) {
	var a Asked
	for i := range maxAsked {
		a.Set(strconv.Itoa(i), 100+int64(i), 0)
	}
	a.Set("new", 500, 0)
	assert.Zero(t, a.Get("new", 0), "full of delays still on: not kept")
	assert.Equal(t, int64(100), a.Get("0", 0))
	a.Set("new", 500, 150) // "0"…"49" have passed at 150: room
	assert.Equal(t, int64(500), a.Get("new", 150))
	assert.Zero(t, a.Get("60", 160), "passed")
	assert.LessOrEqual(t, len(a.until), maxAsked)
	a.Set("new", 400, 150)
	assert.Equal(t, int64(500), a.Get("new", 150), "a later time is never shortened")
}
