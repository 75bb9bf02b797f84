package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/examples/internal/selfexec"
)

func TestMain(m *testing.M) {
	// Re-executed by run as the order service.
	selfexec.Child(apiEnv, func(api string) error {
		return service(context.Background(), os.Stdout, os.Getenv(dsnEnv), api, os.Getenv(crashEnv))
	})
	os.Exit(m.Run())
}

func TestOrders(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, os.Args[0], "-test.run=^$"), out.String())
	s := out.String()
	t.Log(s)
	assert.Contains(t, s, "service 1: killed; 3 order(s) committed, 3 payment(s) at the API, 1 pending: pay:o3")
	assert.Regexp(t, regexp.MustCompile(`service 2: resumed pay:o3 with key \S+: 201, Idempotency-Status: replayed`), s)
	assert.Contains(t, s, "end: 5 orders, 5 payments, 0 duplicate(s)")
}
