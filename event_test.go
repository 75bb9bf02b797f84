package resilient_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/internal/stubtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoggerRecordsRetriesAndOutcomeWithoutSecrets(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201))
	req := stubtest.Post(context.Background(), `{"card":"4242424242424242"}`)
	req.Header.Set("Authorization", "Bearer sk_live_secret")
	req.Header.Set("Cookie", "session=s3cr3t")
	_, err := do(t, resilient.NewTransport(s, fast(resilient.WithLogger(l))...), req)
	require.NoError(t, err)
	out := buf.String()
	key := s.Attempts()[0].Header.Get("Idempotency-Key")
	assert.Contains(t, out, `"outcome":"retry"`)
	assert.Contains(t, out, `"outcome":"success"`)
	assert.Contains(t, out, `"idempotency_key":"`+key+`"`)
	assert.Contains(t, out, `"category":"DEPENDENCY.unavailable"`)
	for _, secret := range []string{"sk_live_secret", "s3cr3t", "4242"} {
		assert.NotContains(t, out, secret)
	}
}

func TestSilentByDefault(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)
	s := stubtest.New(stubtest.ReplyDeduping(503), stubtest.ReplyDeduping(201))
	_, err := do(t, resilient.NewTransport(s, fast()...), stubtest.Post(context.Background(), "{}"))
	require.NoError(t, err)
	assert.Empty(t, buf.String())
}
