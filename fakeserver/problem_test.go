package fakeserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/resilienthttp/resilient"
)

// TestProblemTypesAreTheClients: the types of the idempotency answers are the
// ones the resilient client recognises (its DefaultClassifier's doc spells
// them out).
func TestProblemTypesAreTheClients(t *testing.T) {
	assert.Equal(t, "https://github.com/resilienthttp/resilient/problems/in-progress", ProblemTypeBase+"in-progress")
	assert.Equal(t, "https://github.com/resilienthttp/resilient/problems/payload-mismatch", ProblemTypeBase+"payload-mismatch")
}

// TestClientClassifiesIdempotencyAnswers: the idempotency answers carry the
// IETF draft's statuses and titles, and resilient.DefaultClassifier reads each
// as what it is for a keyed request, and none of them as an idempotency
// answer for an unkeyed one.
func TestClientClassifiesIdempotencyAnswers(t *testing.T) {
	tests := []struct {
		name       string
		answer     *response
		status     int
		title      string // the draft's, which the answer's title starts with
		action     resilient.Action
		category   resilient.Category
		retryAfter time.Duration
	}{
		{"409 in progress", problemInProgress(1500 * time.Millisecond), http.StatusConflict,
			"A request is outstanding for this Idempotency-Key", resilient.Retry, resilient.CategoryInProgress, 2 * time.Second},
		{"422 payload mismatch", problemMismatch(http.StatusUnprocessableEntity), http.StatusUnprocessableEntity,
			"Idempotency-Key is already used", resilient.Terminal, resilient.CategoryPayloadMismatch, 0},
		{"409 payload mismatch", problemMismatch(http.StatusConflict), http.StatusConflict,
			"Idempotency-Key is already used", resilient.Terminal, resilient.CategoryPayloadMismatch, 0},
		{"400 missing key", problemMissingKey(), http.StatusBadRequest,
			"Idempotency-Key is missing", resilient.Terminal, resilient.CategoryValidation, 0},
		{"400 invalid key", problemInvalidKey(errors.New("bad")), http.StatusBadRequest,
			"Idempotency-Key is invalid", resilient.Terminal, resilient.CategoryValidation, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.status, tt.answer.status)
			assert.Equal(t, "application/problem+json", tt.answer.header.Get("Content-Type"))
			var p problem
			require.NoError(t, json.Unmarshal(tt.answer.body, &p))
			assert.Equal(t, tt.status, p.Status)
			assert.Contains(t, p.Title, tt.title)

			for _, keyed := range []bool{true, false} {
				req, err := http.NewRequest(http.MethodPost, "http://api.test/v1/charges", nil)
				require.NoError(t, err)
				resp := &http.Response{StatusCode: tt.answer.status, Header: tt.answer.header.Clone(),
					Body: io.NopCloser(bytes.NewReader(tt.answer.body)), ContentLength: int64(len(tt.answer.body)), Request: req}
				d := resilient.DefaultClassifier(resilient.Outcome{Request: req, Response: resp, Keyed: keyed, Now: time.Now()})
				if keyed {
					assert.Equal(t, tt.action, d.Action)
					assert.Equal(t, tt.category, d.Category)
					assert.Equal(t, tt.retryAfter, d.Delay)
				} else {
					assert.NotEqual(t, resilient.CategoryPayloadMismatch, d.Category, "unkeyed")
					assert.NotEqual(t, resilient.CategoryInProgress, d.Category, "unkeyed")
				}
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, tt.answer.body, body, "the classifier leaves the body intact")
			}
		})
	}
}
