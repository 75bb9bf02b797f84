package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/require"
)

// createCharge is the snippet of README.md's "The outcome of a call", as written there:
// keep the two the same.
func createCharge(ctx context.Context, client *http.Client, api string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req) // one Idempotency-Key, the same on every attempt
	var re *resilient.Error
	switch {
	case errors.As(err, &re) && re.Unknown:
		// An attempt may have reached the server and no answer came back: the charge may exist.
		// Retrying later with re.Key is safe; a new key is not.
		return fmt.Errorf("charge %s: outcome unknown: %w", re.Key, err)
	case err != nil:
		return err // nothing was applied for sure (dial error, breaker open, budget spent...)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated { // the real final status: a 4xx, or a 503 once retries are spent
		return fmt.Errorf("charge: %s", resp.Status)
	}
	return nil
}

// TestCreateChargeFromReadme runs the Quickstart's function against a server
// that loses the first response after committing the charge: declared as a
// server that dedupes by key, the charge is re-sent and applied once; not
// declared (nothing else shows that it dedupes), it is not re-sent and the
// function reports an unknown outcome, with the one effect on the server.
func TestCreateChargeFromReadme(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []resilient.Option
		unknown bool
	}{
		{"declared deduping", []resilient.Option{resilient.WithDedupingServer("127.0.0.1")}, false},
		{"not declared", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
				Match:  "POST /v1/charges",
				Script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}},
			}))
			defer srv.Close()
			client := resilient.Wrap(srv.Client(), tc.opts...)
			err := createCharge(context.Background(), client, srv.URL, []byte(`{"amount":1000}`))
			if tc.unknown {
				require.ErrorIs(t, err, resilient.ErrUnsafeRetry)
				require.ErrorContains(t, err, "outcome unknown")
				require.Equal(t, int64(1), srv.Stats().Requests)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, 1, srv.TotalEffects())
			require.Zero(t, srv.Stats().DuplicateEffects)
		})
	}
}

// TestReadmeSnippets: README.md and docs/testing.md show these Go snippets
// as they are in the test files that compile and run them (docs'
// TestGoBlocksRun checks every block; this names the two whole functions).
func TestReadmeSnippets(t *testing.T) {
	for _, snippet := range []struct{ page, file, fn string }{
		{"README.md", "readme_test.go", "createCharge"},
		{filepath.Join("docs", "testing.md"), filepath.Join("..", "testing-with-fakeserver", "readme_test.go"), "TestChargeIsAppliedOnce"},
	} {
		page, err := os.ReadFile(filepath.Join("..", "..", snippet.page))
		require.NoError(t, err)
		src, err := os.ReadFile(snippet.file)
		require.NoError(t, err)
		_, body, ok := strings.Cut(string(src), "\nfunc "+snippet.fn+"(")
		require.True(t, ok, "%s has no func %s", snippet.file, snippet.fn)
		body, _, ok = strings.Cut(body, "\n}\n")
		require.True(t, ok)
		require.True(t, strings.Contains(string(page), "func "+snippet.fn+"("+body+"\n}\n"),
			"%s must show func %s as it is in %s", snippet.page, snippet.fn, snippet.file)
	}
}

// TestQuickstartAsWritten runs README.md's Quickstart lines as written. Their
// host, api.example.com, is served in-process by a fakeserver that loses the
// first response after committing the charge: http.DefaultTransport, which
// NewClient sends through, is the fakeserver's for this test. Declared as a
// server that dedupes, the charge is re-sent under its key: one effect.
func TestQuickstartAsWritten(t *testing.T) {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/charges",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}},
	}))
	defer srv.Close()
	saved := http.DefaultTransport
	http.DefaultTransport = srv.Transport()
	t.Cleanup(func() { http.DefaultTransport = saved })
	ctx := context.Background()

	client := resilient.NewClient(resilient.WithDedupingServer("api.example.com")) // the API dedupes by Idempotency-Key; or resilient.Wrap(existingClient, …)
	err := createCharge(ctx, client, "https://api.example.com", []byte(`{"amount":1000,"currency":"eur"}`))

	require.NoError(t, err)
	require.Equal(t, int64(2), srv.Stats().Requests, "the lost response's charge, re-sent")
	require.Equal(t, 1, srv.TotalEffects())
	require.Zero(t, srv.Stats().DuplicateEffects)
}
