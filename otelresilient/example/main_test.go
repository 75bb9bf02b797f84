package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{
		"response: 201 after 3 attempts",
		"resilient.attempts ({attempt})",
		"category=DEPENDENCY.unavailable host=server method=POST status=503  2",
		"host=server method=POST status=201  1",
		"resilient.retries ({retry})",
		"resilient.retry.delay (s)",
		"category=DEPENDENCY.unavailable host=server method=POST  count=2",
		"resilient.operation.duration (s)",
		"host=server method=POST outcome=success status=201  count=1",
		"create charge resilient.attempt: idempotency_key=",
		"attempt=2 status=201 action=success",
	} {
		assert.Contains(t, s, want)
	}
}
