package fakeserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIDPrefix(t *testing.T) {
	for in, want := range map[string]string{"refunds": "rf", "charges": "ch", "orders": "or", "a": "a", "ae": "ae", "x1": "x1"} {
		assert.Equal(t, want, idPrefix(in), in)
	}
}
