package servercrash

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// FileEffect returns an Effect that appends "OP ID" to the file at path,
// one write per effect (it survives a SIGKILL of the process), for a store
// whose effect is elsewhere; close closes the file.
func FileEffect(path string) (effect Effect, close func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	return func(_ context.Context, op, id string) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(f, "%s %s\n", op, id)
		return err
	}, func() { _ = f.Close() }, nil
}

// FileEffects reads the effects FileEffect appended to path: operation →
// effect ids.
func FileEffects(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		op, id, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, "effects: %q", sc.Text())
		out[op] = append(out[op], id)
	}
	require.NoError(t, sc.Err())
	return out
}
