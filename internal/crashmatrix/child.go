package crashmatrix

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/persist"
)

// The environment of a matrix child.
const (
	urlEnv   = "RESILIENT_CRASH_URL"   // set: this process is a matrix child; the API's base URL
	storeEnv = "RESILIENT_CRASH_STORE" // the Opener's argument
	opsEnv   = "RESILIENT_CRASH_OPS"   // operations 0..N-1 exist
	skipEnv  = "RESILIENT_CRASH_SKIP"  // operations already completed, comma-separated
	killEnv  = "RESILIENT_CRASH_KILL"  // "phase:op": where the parent will kill it
	opHeader = "X-Crash-Op"            // the operation a request belongs to
)

// Opener opens, in a child, the Store its parent named with arg (a file; an
// address and a key prefix); close releases it.
type Opener func(arg string) (store persist.Store, close func(), err error)

// Main runs a matrix child, with the Store open gives it, and exits with
// its status if this process is one; otherwise it returns. Call it first in
// TestMain.
func Main(open Opener) {
	if os.Getenv(urlEnv) != "" {
		os.Exit(child(open))
	}
}

// redirectPath is the path that redirects to /v1/charges with the status
// given in its code parameter.
const redirectPath = "/v1/redirect/charges"

// redirectCode is the status of the redirect that operation n goes through
// before it reaches POST /v1/charges (307, 308), or 0 if it goes there
// directly: a quarter of the operations each way, half directly.
func redirectCode(n int) int {
	switch n % 4 {
	case 1:
		return http.StatusTemporaryRedirect
	case 3:
		return http.StatusPermanentRedirect
	}
	return 0
}

// opURL is the URL operation n is first sent to.
func opURL(base string, n int) string {
	if c := redirectCode(n); c != 0 {
		return base + redirectPath + "?code=" + strconv.Itoa(c)
	}
	return base + "/v1/charges"
}

// opName is the Store's name of operation n.
func opName(n int) string { return "charge:" + strconv.Itoa(n) }

// chargeBody is the body of operation n; the fake server keeps "op" in the
// object it creates, for the oracle.
func chargeBody(n int) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"usd","op":%d}`, 100+n, n)
}

// child is the client process of the matrix. It opens the Store, resumes
// every pending operation (Store.Pending, each re-issued with
// ContextWithOperation), then issues the other operations one by one, and
// prints a line per event: "ready", "resume OP KEY STATUS", "done OP KEY
// STATUS", "at PHASE OP" (then waits to be killed), "pending N" at the end.
func child(open Opener) int {
	fail := func(format string, args ...any) int {
		fmt.Printf("error "+format+"\n", args...)
		return 1
	}
	n, err := strconv.Atoi(os.Getenv(opsEnv))
	if err != nil {
		return fail("%v", err)
	}
	skip := map[int]bool{}
	for _, f := range strings.FieldsFunc(os.Getenv(skipEnv), func(r rune) bool { return r == ',' }) {
		k, err := strconv.Atoi(f)
		if err != nil {
			return fail("%s: %v", skipEnv, err)
		}
		skip[k] = true
	}
	phase, killOp := "", -1
	if k := os.Getenv(killEnv); k != "" {
		p, o, _ := strings.Cut(k, ":")
		phase = p
		killOp, _ = strconv.Atoi(o)
	}
	store, closeStore, err := open(os.Getenv(storeEnv))
	if err != nil {
		return fail("open: %v", err)
	}
	defer closeStore()
	store = planted(store) // none, but in this package's own tests
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := newClient(store, &base{next: tr, phase: phase, op: killOp}, phase, killOp)
	issue := func(n int) (string, int, error) {
		var rep resilient.Report
		ctx := resilient.ContextWithReport(resilient.ContextWithOperation(context.Background(), opName(n)), &rep)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, opURL(os.Getenv(urlEnv), n), strings.NewReader(chargeBody(n)))
		if err != nil {
			return "", 0, err
		}
		req.Header.Set(opHeader, strconv.Itoa(n))
		resp, err := client.Do(req)
		if err != nil {
			return rep.Key, 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return rep.Key, resp.StatusCode, nil
	}

	fmt.Println("ready")
	pending, err := store.Pending(context.Background())
	if err != nil {
		return fail("pending: %v", err)
	}
	resumed := map[int]bool{}
	for _, rec := range pending {
		k, err := strconv.Atoi(strings.TrimPrefix(rec.Operation, "charge:"))
		if err != nil {
			return fail("pending operation %q", rec.Operation)
		}
		key, status, err := issue(k)
		if err != nil {
			return fail("resume %d: %v", k, err)
		}
		if key != rec.Key {
			return fail("resume %d: sent key %s, the Store holds %s", k, key, rec.Key)
		}
		if phase != "" && os.Getenv(windowEnv) != "" {
			At("unprinted", k) // the Store holds it done; its line is never printed
		}
		fmt.Printf("resume %d %s %d\n", k, key, status)
		resumed[k] = true
	}
	for k := range n {
		if resumed[k] || skip[k] {
			continue
		}
		key, status, err := issue(k)
		if err != nil {
			return fail("op %d: %v", k, err)
		}
		fmt.Printf("done %d %s %d\n", k, key, status)
	}
	pending, err = store.Pending(context.Background())
	if err != nil {
		return fail("pending: %v", err)
	}
	fmt.Printf("pending %d\n", len(pending))
	return 0
}

// newClient is the child's client: the Transport with the Store, a short
// backoff (a long one for a backoff kill point: the parent kills the child
// during it), and a retry observer that stops at a backoff kill point.
func newClient(store persist.Store, b http.RoundTripper, phase string, killOp int) *http.Client {
	backoff := resilient.Exponential(5*time.Millisecond, 20*time.Millisecond)
	if strings.Contains(phase, "backoff") {
		backoff = resilient.Exponential(5*time.Second, 5*time.Second) // the parent kills it meanwhile
	}
	return &http.Client{Transport: resilient.NewTransport(b,
		resilient.WithStore(store), resilient.WithBackoff(backoff),
		resilient.WithObserver(func(ctx context.Context, e resilient.Event) {
			if e.Kind == resilient.EventRetry && e.Operation == opName(killOp) && strings.Contains(phase, "backoff") {
				fmt.Printf("at %s %d\n", phase, killOp) // the backoff sleep follows
			}
		}))}
}

// base is the child's base transport: it stops at the kill point of its
// phase for operation op (the X-Crash-Op header): at its attempt 0, or for
// a hop phase at the first request of its second hop (POST /v1/charges
// after the redirect).
type base struct {
	next  http.RoundTripper
	phase string
	op    int
	hop   atomic.Bool // the second hop's first request was seen
}

func (b *base) RoundTrip(req *http.Request) (*http.Response, error) {
	mine := req.Header.Get(opHeader) == strconv.Itoa(b.op)
	if hopPhase(b.phase) {
		mine = mine && req.URL.Path == "/v1/charges" && b.hop.CompareAndSwap(false, true)
	} else {
		mine = mine && req.Header.Get("Retry-Attempt") == "" // a first attempt
	}
	if !mine {
		return b.next.RoundTrip(req)
	}
	switch strings.TrimPrefix(b.phase, "hop-") {
	case Claimed:
		At(b.phase, b.op)
	case BackoffBeforeEffect:
		if req.Body != nil {
			req.Body.Close()
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch strings.TrimPrefix(b.phase, "hop-") {
	case Sent:
		At(b.phase, b.op)
	case BackoffAfterEffect:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	return resp, nil
}
