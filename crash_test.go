package resilient_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist/bolt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	crashChildEnv = "RESILIENT_CRASH_CHILD"
	crashURLEnv   = "RESILIENT_CRASH_URL"
	crashDBEnv    = "RESILIENT_CRASH_DB"
)

// crashChild is the client process of TestCrashResume: it creates a refund
// as operation "refund:ch_123" with its key in a bolt file, prints the key
// and the outcome, and exits.
func crashChild() int {
	store, err := bolt.Open(os.Getenv(crashDBEnv))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer store.Close()
	client := resilient.NewClient(resilient.WithStore(store), resilient.WithBackoff(resilient.Exponential(10*time.Millisecond, 100*time.Millisecond)))
	ctx := resilient.ContextWithOperation(context.Background(), "refund:ch_123")
	rep := new(resilient.Report)
	ctx = resilient.ContextWithReport(ctx, rep)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv(crashURLEnv)+"/v1/refunds", strings.NewReader(`{"charge":"ch_123","amount":1000}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	resp.Body.Close()
	fmt.Println("done", rep.Key, resp.StatusCode, resp.Header.Get("Idempotency-Status"))
	return 0
}

// commitThenHang is an idempotent endpoint whose first request commits its
// effect and then never answers, so the client is stuck mid-operation.
type commitThenHang struct {
	mu      sync.Mutex
	effects map[string]int // key → effects
	seen    chan string    // keys, as requests arrive
	release chan struct{}
}

func (h *commitThenHang) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	h.mu.Lock()
	first := len(h.effects) == 0
	replay := h.effects[key] > 0
	if !replay {
		h.effects[key]++
	}
	h.mu.Unlock()
	h.seen <- key
	switch {
	case first:
		select { // committed; the response is never sent
		case <-r.Context().Done():
		case <-h.release:
		}
	case replay:
		w.Header().Set("Idempotency-Status", "replayed")
		w.WriteHeader(http.StatusCreated)
	default:
		w.Header().Set("Idempotency-Status", "stored")
		w.WriteHeader(http.StatusCreated)
	}
}

func TestCrashResumeWithBolt(t *testing.T) {
	h := &commitThenHang{effects: map[string]int{}, seen: make(chan string, 16), release: make(chan struct{})}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer close(h.release)
	db := filepath.Join(t.TempDir(), "keys.db")
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashURLEnv+"="+srv.URL, crashDBEnv+"="+db)
		return cmd
	}

	// First process: claims the operation, sends, the server commits, and
	// the process is killed while it waits for the answer.
	first := child()
	out, err := first.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, first.Start())
	var key string
	select {
	case key = <-h.seen:
	case <-time.After(20 * time.Second):
		first.Process.Kill()
		t.Fatal("the first process never reached the server")
	}
	require.NoError(t, first.Process.Kill()) // SIGKILL
	first.Wait()
	rest, _ := io.ReadAll(out)
	assert.Empty(t, strings.TrimSpace(string(rest)), "killed before it could finish")

	// Second process: same bolt file, same operation → same key → replay.
	second := child()
	stdout, err := second.Output()
	require.NoError(t, err, "second process: %s", stdout)
	line, _ := bufio.NewReader(strings.NewReader(string(stdout))).ReadString('\n')
	assert.Equal(t, fmt.Sprintf("done %s 201 replayed", key), strings.TrimSpace(line))
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, map[string]int{key: 1}, h.effects, "exactly one effect")
}
