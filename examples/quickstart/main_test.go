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
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	assert.Contains(t, s, "attempt 0 after 0s: EOF (TRANSIENT, retry)")
	assert.Contains(t, s, "(success, replayed=true)")
	assert.Contains(t, s, "effects on the server for this key: 1 (total 1)")
}
