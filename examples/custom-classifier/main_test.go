package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCustomClassifier(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	t.Log("\n" + out.String())

	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(line)
		rows[f[0]+" "+f[1]] = f[2:]
	}
	// route classifier → attempts…, category, action, body
	assert.Equal(t, []string{"400", "VALIDATION", "terminal", `{"code":"card_declined_try_again","message":"issuer`, `unavailable"}`}, rows["/v1/declined default"])
	assert.Equal(t, []string{"400", "→", "201", "-", "success", `{"id":"ch_1","status":"succeeded"}`}, rows["/v1/declined provider"])
	assert.Equal(t, []string{"402", "VALIDATION", "terminal", `{"code":"authentication_pending"}`}, rows["/v1/required default"])
	assert.Equal(t, []string{"402", "→", "201", "-", "success", `{"id":"ch_1","status":"succeeded"}`}, rows["/v1/required provider"])
	assert.Equal(t, []string{"400", "VALIDATION", "terminal", `{"code":"invalid_amount"}`}, rows["/v1/invalid default"])
	assert.Equal(t, []string{"400", "VALIDATION", "terminal", `{"code":"invalid_amount"}`}, rows["/v1/invalid provider"])
	assert.Equal(t, []string{"200", "-", "success", `{"status":"duplicate","id":"ch_0"}`}, rows["/v1/duplicate default"])
	// The body the classifier peeked at reaches the caller whole.
	assert.Equal(t, []string{"200", "PROVIDER.duplicate", "terminal", `{"status":"duplicate","id":"ch_0"}`}, rows["/v1/duplicate provider"])
}
