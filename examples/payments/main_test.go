package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPayments(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out), out.String())
	s := out.String()
	t.Log(s)
	assert.Regexp(t, `pay: 1 attempt\(s\), 201 \{"amount":500,"currency":"eur","id":1\} Idempotency-Status: "stored"`, s)
	assert.Regexp(t, `pay with a key: 1 attempt\(s\), 201 \{"amount":1000,"currency":"eur","id":2\} Idempotency-Status: "stored"`, s)
	assert.Regexp(t, `pay again: 1 attempt\(s\), 201 \{"amount":1000,"currency":"eur","id":2\} Idempotency-Status: "replayed"`, s)
	assert.Regexp(t, `other amount: 1 attempt\(s\), 422 .*payload-mismatch.* Idempotency-Status: ""`, s)
	assert.Regexp(t, `answer lost: 2 attempt\(s\), 201 \{"amount":2500,"currency":"eur","id":3\} Idempotency-Status: "replayed"`, s)
	assert.Regexp(t, `handler fails: 2 attempt\(s\), 201 \{"amount":700,"currency":"eur","id":5\} Idempotency-Status: "stored"`, s)
	assert.Contains(t, s, "end: 4 payments; stored 4, replayed 2, mismatch 1, released 1")
}
