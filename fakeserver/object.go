package fakeserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeObject parses a request body that must be one JSON object (an empty body
// is the empty object). Numbers are kept as json.Number, so they are echoed as
// sent. The idempotency fingerprint is package idempotency's JSONBody.
func decodeObject(body []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("body is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("body has data after the JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("body must be a JSON object")
	}
	return obj, nil
}
