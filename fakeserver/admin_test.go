package fakeserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient/fakeserver"
)

// admin sends an admin request and returns the status and body.
func admin(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := c.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestAdminEndpoints(t *testing.T) {
	s := fakeserver.New()
	defer s.Close()
	c := s.Client()

	code, body := admin(t, c, http.MethodPut, s.URL+"/_fake/scenario",
		`{"seed": 3, "routes": [{"match": "POST /v1/charges", "script": [{"kind": "status", "status": 502}]}]}`)
	require.Equal(t, http.StatusNoContent, code, body)
	code, body = admin(t, c, http.MethodGet, s.URL+"/_fake/scenario", "")
	require.Equal(t, http.StatusOK, code)
	sc, err := fakeserver.ParseScenario([]byte(body))
	require.NoError(t, err)
	assert.EqualValues(t, 3, sc.Seed)

	code, body = admin(t, c, http.MethodPost, s.URL+"/_fake/enqueue",
		`{"match": "POST /v1/charges", "faults": [{"kind": "status", "status": 504}]}`)
	require.Equal(t, http.StatusNoContent, code, body)

	assert.Equal(t, 502, mustDo(t, c, s.URL, req{key: "k"}).status)
	assert.Equal(t, 504, mustDo(t, c, s.URL, req{key: "k"}).status)
	assert.Equal(t, 201, mustDo(t, c, s.URL, req{key: "k", headers: map[string]string{"Retry-Attempt": "2"}}).status)

	code, body = admin(t, c, http.MethodGet, s.URL+"/_fake/stats", "")
	require.Equal(t, http.StatusOK, code)
	var st fakeserver.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.EqualValues(t, 3, st.Requests, "admin requests are not counted")
	assert.EqualValues(t, 1, st.Retries)
	assert.Equal(t, 1, st.Effects)
	assert.Equal(t, map[string]int64{"status": 2}, st.Faults)

	code, body = admin(t, c, http.MethodGet, s.URL+"/_fake/effects?key=k", "")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"key":"k","effects":1}`, body)

	code, body = admin(t, c, http.MethodGet, s.URL+"/_fake/ledger", "")
	require.Equal(t, http.StatusOK, code)
	var led []fakeserver.Entry
	require.NoError(t, json.Unmarshal([]byte(body), &led))
	require.Len(t, led, 1)
	assert.Equal(t, "k", led[0].Key)
	assert.JSONEq(t, `{"amount":100}`, mustDrop(t, led[0].Object, "id", "object", "created"))

	code, _ = admin(t, c, http.MethodPost, s.URL+"/_fake/reset", "")
	require.Equal(t, http.StatusNoContent, code)
	assert.Zero(t, s.Stats().Requests)
	assert.Zero(t, s.TotalEffects())
}

func TestAdminErrors(t *testing.T) {
	s := fakeserver.NewUnstarted()
	defer s.Close()
	c := s.Client()
	tests := []struct {
		method, path, body string
		status             int
	}{
		{http.MethodPut, "/_fake/scenario", `{"mode":"x"}`, http.StatusBadRequest},
		{http.MethodPut, "/_fake/scenario", `not json`, http.StatusBadRequest},
		{http.MethodPost, "/_fake/enqueue", `{"match":"*","faults":[{"kind":"x"}]}`, http.StatusBadRequest},
		{http.MethodPost, "/_fake/enqueue", `{"match":"*","fault":[]}`, http.StatusBadRequest},
		{http.MethodDelete, "/_fake/stats", ``, http.StatusNotFound},
		{http.MethodGet, "/_fake/nothing", ``, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" "+tt.body, func(t *testing.T) {
			code, body := admin(t, c, tt.method, inProcessURL+tt.path, tt.body)
			assert.Equal(t, tt.status, code)
			assert.Contains(t, body, fakeserver.ProblemTypeBase)
		})
	}
}

// mustDrop returns the JSON object b without the named members.
func mustDrop(t *testing.T, b []byte, names ...string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, n := range names {
		require.Contains(t, m, n)
		delete(m, n)
	}
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return string(out)
}
