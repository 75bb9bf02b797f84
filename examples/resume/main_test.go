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
	// Re-executed by run as the client process.
	selfexec.Child(childEnv, func(url string) error {
		return child(context.Background(), os.Stdout, url, os.Getenv(dbEnv))
	})
	os.Exit(m.Run())
}

func TestResume(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, os.Args[0], "-test.run=^$"), out.String())
	s := out.String()
	t.Log(s)
	pending := regexp.MustCompile(`client 2: found pending operation refund:ch_123 with key (\S+)`).FindStringSubmatch(s)
	require.Len(t, pending, 2, "the restarted client finds the pending operation")
	assert.Contains(t, s, "client 2: 201 with key "+pending[1]+", Idempotency-Status: replayed")
	assert.Contains(t, s, "server: 1 effect(s), 0 duplicate(s)")
}
