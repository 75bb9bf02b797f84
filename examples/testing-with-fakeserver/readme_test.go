package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/require"
)

// TestChargeIsAppliedOnce is the snippet of docs/testing.md, as written
// there: keep the two the same (examples/quickstart's TestReadmeSnippets
// and docs' TestGoBlocksRun check it).
func TestChargeIsAppliedOnce(t *testing.T) {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{
		Match:  "POST /v1/charges",
		Script: []fakeserver.Fault{{Kind: fakeserver.FaultLostResponse}}, // commit, then drop the connection
	}))
	defer srv.Close()
	client := resilient.Wrap(srv.Client(), resilient.WithDedupingServer("127.0.0.1")) // fakeserver dedupes by key, as your API does

	var rep resilient.Report // what the Transport did, with the key it sent
	ctx := resilient.ContextWithReport(context.Background(), &rep)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{"amount":1000}`))
	require.NoError(t, err)
	resp, err := client.Do(req) // or exercise your own code, built on client
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, 1, srv.Effects(rep.Key)) // two attempts, exactly one effect
}
