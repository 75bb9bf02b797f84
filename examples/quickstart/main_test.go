package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out)) // run checks the effects and the error itself
	s := out.String()
	t.Log("\n" + s)
	// Undeclared: the lost response is returned as a bare client would, not re-sent.
	assert.Contains(t, s, "attempt 0 after 0s: EOF (TRANSIENT, terminal)")
	assert.Contains(t, s, "not re-sent: outcome unknown")
	// Declared: re-sent with the same key, answered from the server's store.
	assert.Contains(t, s, "attempt 0 after 0s: EOF (TRANSIENT, retry)")
	assert.Contains(t, s, "(success, replayed=true)")
	assert.Contains(t, s, "effects on the server for this key: 1\n")
	assert.NotContains(t, s, "attempt 2")
}
