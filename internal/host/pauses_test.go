package host

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestClearPauses: an ended pause is cleared, a pending one is kept.
func TestClearPauses(t *testing.T) {
	var h State
	h.Pauses.PauseUntil.Store(100)
	h.Pauses.RetryPauseUntil.Store(200)
	h.Pauses.clearPauses(150)
	assert.Zero(t, h.Pauses.PauseUntil.Load())
	assert.Equal(t, int64(200), h.Pauses.RetryPauseUntil.Load())
	h.Pauses.clearPauses(200)
	assert.Zero(t, h.Pauses.RetryPauseUntil.Load())
}
