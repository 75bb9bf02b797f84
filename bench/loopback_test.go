package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
)

// The loopback comparison: bare net/http and a second client take turns, in
// blocks of loopBlock requests, against one server on 127.0.0.1 and over one
// connection pool, and each request's time is added to its client's tally.
// Drift of the machine (other work on the same cores, frequency, the
// scheduler) lasting longer than a block falls on both clients alike, so
// their ratio holds still where separate sub-benchmarks of each client, run
// one after the other, do not.

// loopBlock is how many consecutive requests one client sends before the
// other takes its turn: about half a millisecond of loopback requests.
const loopBlock = 8

// loopClient is one side of an interleaved pair.
type loopClient struct {
	name string
	hc   *http.Client
	// keyed is true when the loop sets the Idempotency-Key of a POST
	// (resilient.NewKey, as BenchmarkOverhead does for the clients that
	// do not mint one).
	keyed bool
}

// interleaved is one interleaved run of a pair: what each client has sent
// and how long it took, and the ratios of the pairs of blocks. Safe for
// concurrent use; each goroutine sends through its own worker.
type interleaved struct {
	pair    [2]loopClient
	method  string
	url     string
	labels  [2]context.Context // pprof labels client=<name>, set per request
	workers atomic.Int64       // workers started
	n, ns   [2]atomic.Int64

	mu     sync.Mutex
	ratios []float64 // of every complete pair of blocks, from workers' done
}

func newInterleaved(method, url string, pair [2]loopClient) *interleaved {
	il := &interleaved{pair: pair, method: method, url: url}
	for i, c := range pair {
		il.labels[i] = pprof.WithLabels(context.Background(), pprof.Labels("client", c.name))
	}
	return il
}

// worker is one goroutine's turns: its requests go to the two clients in
// alternate blocks of loopBlock, and each pair of blocks (the first
// client's, then the second's) gives a ratio of their times. The g-th
// worker starts g blocks in, so that two goroutines are mostly each on a
// different client and each client shares the machine with the other
// alike. Not safe for concurrent use.
type worker struct {
	il     *interleaved
	t      int64    // the next request's ticket: it goes to pair[(t/loopBlock)%2]
	block  [2]int64 // the current pair's blocks: time
	count  [2]int   // … and requests
	ratios []float64
}

func (il *interleaved) worker() *worker {
	g := il.workers.Add(1) - 1
	return &worker{il: il, t: g * loopBlock}
}

// one sends the next request through the client whose turn it is and
// counts its time: building the request, the round trip, reading and
// closing the body. The goroutine carries the pprof label client=<name>
// while it does, so a CPU profile (-cpuprofile, then pprof -tagfocus)
// splits the callers' work between the two.
func (w *worker) one() error {
	il := w.il
	s := (w.t / loopBlock) % 2
	w.t++
	c := &il.pair[s]
	pprof.SetGoroutineLabels(il.labels[s])
	start := time.Now()
	err := send(c.hc, il.method, il.url, c.keyed)
	ns := int64(time.Since(start))
	pprof.SetGoroutineLabels(context.Background())
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	il.ns[s].Add(ns)
	il.n[s].Add(1)
	w.block[s] += ns
	w.count[s]++
	if s == 1 && w.count[1] == loopBlock {
		if w.count[0] == loopBlock {
			w.ratios = append(w.ratios, float64(w.block[0])/float64(w.block[1]))
		}
		w.block, w.count = [2]int64{}, [2]int{}
	}
	return nil
}

// done hands the worker's ratios to the run.
func (w *worker) done() {
	w.il.mu.Lock()
	w.il.ratios = append(w.il.ratios, w.ratios...)
	w.il.mu.Unlock()
}

// perRequest returns each client's mean time per request, in ns.
func (il *interleaved) perRequest() (a, z float64) {
	mean := func(i int) float64 {
		n := il.n[i].Load()
		if n == 0 {
			return 0
		}
		return float64(il.ns[i].Load()) / float64(n)
	}
	return mean(0), mean(1)
}

// medianRatio returns the median of the ratios of the pairs of blocks
// (the first client's time over the second's); 0 without one. Unlike the
// ratio of the means it ignores a pair in which a stall of the machine (a
// preemption, another process's burst) fell on one block.
func (il *interleaved) medianRatio() float64 {
	il.mu.Lock()
	defer il.mu.Unlock()
	if len(il.ratios) == 0 {
		return 0
	}
	r := slices.Clone(il.ratios)
	slices.Sort(r)
	return r[len(r)/2]
}

// report adds the run's metrics to b: each client's mean time per request;
// ratio, the first's mean over the second's, which is the second's
// throughput relative to the first's (a closed loop at a fixed
// concurrency: throughput is the concurrency over the mean time); and
// ratio-median, medianRatio, the same comparison robust to stalls.
func (il *interleaved) report(b *testing.B) {
	a, z := il.perRequest()
	b.ReportMetric(a, il.pair[0].name+"-ns/req")
	b.ReportMetric(z, il.pair[1].name+"-ns/req")
	if z > 0 {
		b.ReportMetric(a/z, "ratio")
	}
	b.ReportMetric(il.medianRatio(), "ratio-median")
}

// allocs measures, outside the timed loop, what one request through c
// allocates in this process (with an in-process server, the server's share
// included): mallocs and bytes per request over n sequential requests.
func allocs(c loopClient, method, url string, n int) (mallocs, bytes float64, err error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if err := send(c.hc, method, url, c.keyed); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n), float64(after.TotalAlloc-before.TotalAlloc) / float64(n), nil
}

// runInterleaved benchmarks pair against url: sequentially (b.Loop), or
// with b.RunParallel's GOMAXPROCS goroutines sharing the pair. Before the
// timed loop it warms both clients up (connections open) and measures each
// one's allocations per request (<name>-allocs/req, <name>-B/req).
func runInterleaved(b *testing.B, method, url string, pair [2]loopClient, parallel bool, dials *atomic.Int64) {
	il := newInterleaved(method, url, pair)
	var mallocs, bytes [2]float64
	for i, c := range pair {
		var err error
		if mallocs[i], bytes[i], err = allocs(c, method, url, 200); err != nil {
			b.Fatal(err)
		}
	}
	d0 := dials.Load()
	if parallel {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := il.worker()
			defer w.done()
			for pb.Next() {
				if err := w.one(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		w := il.worker()
		for b.Loop() {
			if err := w.one(); err != nil {
				b.Fatal(err)
			}
		}
		w.done()
	}
	b.StopTimer()
	il.report(b)
	for i, c := range pair { // after the loop: b.Loop's reset drops metrics reported before
		b.ReportMetric(mallocs[i], c.name+"-allocs/req")
		b.ReportMetric(bytes[i], c.name+"-B/req")
	}
	b.ReportMetric(float64(dials.Load()-d0), "dials")
}

// loopbackBase returns a base transport for both clients of a pair (one
// connection pool, as in BenchmarkOverhead's loopback) and the count of the
// connections it dials. Its idle connections are closed by b.Cleanup.
func loopbackBase(tb testing.TB) (*http.Transport, *atomic.Int64) {
	var dials atomic.Int64
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	d := &net.Dialer{Timeout: 5 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	tb.Cleanup(t.CloseIdleConnections)
	return t, &dials
}

// loopbackServers returns the two places the server can run, each as a
// function that starts it and returns its URL: "inproc", an httptest server
// in this process (as BenchmarkOverhead's), and "child", this test binary
// run again as a server process (TestLoopbackServerProcess), so that the
// server's goroutines, allocations and GC are not the client's.
func loopbackServers() []struct {
	name  string
	start func(testing.TB) string
} {
	return []struct {
		name  string
		start func(testing.TB) string
	}{
		{"inproc", func(tb testing.TB) string {
			srv := httptest.NewServer(http.HandlerFunc(okHandler))
			tb.Cleanup(srv.Close)
			return srv.URL
		}},
		{"child", startChildServer},
	}
}

// BenchmarkLoopback compares bare net/http and resilient (defaults) over
// loopback, interleaved: BenchmarkLoopback/{inproc,child}/{GET,POST}/
// {seq,parallel}. The POST is keyed: resilient mints its key, the loop
// gives bare net/http one per request (resilient.NewKey). Besides ns/op
// (both clients' requests together) it reports nethttp-ns/req,
// resilient-ns/req, ratio (resilient's throughput relative to bare's:
// 1 is parity), each client's allocs/req and B/req, and dials. Run with
// -cpu 2 for GOMAXPROCS 2.
func BenchmarkLoopback(b *testing.B) {
	for _, srv := range loopbackServers() {
		b.Run(srv.name, func(b *testing.B) {
			url := srv.start(b) + "/v1/charges"
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				for _, mode := range []string{"seq", "parallel"} {
					b.Run(method+"/"+mode, func(b *testing.B) {
						base, dials := loopbackBase(b)
						pair := [2]loopClient{
							{name: "nethttp", hc: NetHTTP(base), keyed: true},
							{name: "resilient", hc: Resilient(base)},
						}
						runInterleaved(b, method, url, pair, mode == "parallel", dials)
					})
				}
			}
		})
	}
}

// BenchmarkLoopbackCosts runs the same interleaving with pairs that isolate
// one cost each, against both servers (and, as stub/, BenchmarkLoopback's
// pair over the stub base transport):
//
//   - aa: bare net/http against itself, the noise floor of the ratio;
//   - bare-unkeyed: bare's keyed POST against its POST without a key (what
//     the key costs bare: minting it, the header, its bytes on the wire);
//   - attempt-header: bare against bare sending "Retry-Attempt: 0" too, as
//     resilient does on the first attempt of a keyed POST;
//   - trace: bare against bare with a ClientTrace whose WroteRequest hook
//     counts writes, as resilient's write watch of a keyed attempt does
//     (net/http's work for a traced request, plus the request copy and
//     context that carry the trace here);
//   - unkeyed: resilient sending the POST without a key
//     (WithKeyMethods()), so no key, no write watch, no request copy;
//   - peer: go-retryablehttp (its StandardClient, the key set by the loop
//     as for bare), the ratio that BenchmarkLoopback's resilient pair is
//     to be read against.
func BenchmarkLoopbackCosts(b *testing.B) {
	for _, srv := range loopbackServers() {
		b.Run(srv.name, func(b *testing.B) { loopbackCosts(b, srv.start(b)+"/v1/charges") })
	}
	// The same pair as BenchmarkLoopback's over the stub base transport:
	// resilient's own cost, measured the same way in the same run.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		b.Run("stub/"+method+"/seq", func(b *testing.B) {
			pair := [2]loopClient{
				{name: "nethttp", hc: NetHTTP(stubTransport{}), keyed: true},
				{name: "resilient", hc: Resilient(stubTransport{})},
			}
			runInterleaved(b, method, "http://api.test/v1/charges", pair, false, new(atomic.Int64))
		})
	}
}

func loopbackCosts(b *testing.B, url string) {
	cases := []struct {
		name   string
		method string
		second func(base http.RoundTripper) loopClient
	}{
		{"aa/GET", http.MethodGet, func(base http.RoundTripper) loopClient {
			return loopClient{name: "nethttp2", hc: NetHTTP(base)}
		}},
		{"aa/POST", http.MethodPost, func(base http.RoundTripper) loopClient {
			return loopClient{name: "nethttp2", hc: NetHTTP(base), keyed: true}
		}},
		{"bare-unkeyed/POST", http.MethodPost, func(base http.RoundTripper) loopClient {
			return loopClient{name: "unkeyed", hc: NetHTTP(base)}
		}},
		{"attempt-header/POST", http.MethodPost, func(base http.RoundTripper) loopClient {
			return loopClient{name: "attemptheader", hc: NetHTTP(attemptHeaderTransport{base}), keyed: true}
		}},
		{"trace/POST", http.MethodPost, func(base http.RoundTripper) loopClient {
			return loopClient{name: "traced", hc: NetHTTP(tracedTransport{base}), keyed: true}
		}},
		{"unkeyed/POST", http.MethodPost, func(base http.RoundTripper) loopClient {
			return loopClient{name: "unkeyed", hc: Resilient(base, resilientWithoutKeys...)}
		}},
		{"peer/GET", http.MethodGet, func(base http.RoundTripper) loopClient {
			return loopClient{name: "retryablehttp", hc: RetryableHTTP(base)}
		}},
		{"peer/POST", http.MethodPost, func(base http.RoundTripper) loopClient {
			return loopClient{name: "retryablehttp", hc: RetryableHTTP(base), keyed: true}
		}},
	}
	for _, tc := range cases {
		for _, mode := range []string{"seq", "parallel"} {
			b.Run(tc.name+"/"+mode, func(b *testing.B) {
				base, dials := loopbackBase(b)
				pair := [2]loopClient{{name: "nethttp", hc: NetHTTP(base), keyed: true}, tc.second(base)}
				runInterleaved(b, tc.method, url, pair, mode == "parallel", dials)
			})
		}
	}
}

// tracedTransport sends each request with a ClientTrace whose WroteRequest
// hook counts the writes, as resilient's write watch does.
type tracedTransport struct{ base http.RoundTripper }

func (t tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var wrote atomic.Int32
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) }}
	return t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}

// attemptHeaderTransport adds "Retry-Attempt: 0" to each request, as
// resilient's first attempt of a keyed POST carries. It writes the header
// of the request it is given, which the RoundTripper contract forbids in
// general: here each request is the loop's own, built for this one send.
type attemptHeaderTransport struct{ base http.RoundTripper }

func (t attemptHeaderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Header[resilient.DefaultAttemptHeader] = []string{"0"}
	return t.base.RoundTrip(req)
}

// BenchmarkLoopbackGC sends through one client at a time (not
// interleaved), sequentially, against the child server, so that the
// process's garbage collection is the client's alone, and reports from
// runtime/metrics what it costs per request: gc-cycles/kreq, gc-cpu-ns/req
// (the runtime's estimate of the CPU time of GC assists, dedicated mark
// workers and pauses) and gc-idle-ns/req (mark work done on otherwise idle
// Ps, which costs the process little). Read it with -benchmem.
func BenchmarkLoopbackGC(b *testing.B) {
	url := startChildServer(b) + "/v1/charges"
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, name := range []string{"nethttp", "resilient"} {
			b.Run(method+"/"+name, func(b *testing.B) {
				base, _ := loopbackBase(b)
				c := loopClient{name: "nethttp", hc: NetHTTP(base), keyed: true}
				if name == "resilient" {
					c = loopClient{name: "resilient", hc: Resilient(base)}
				}
				if err := send(c.hc, method, url, c.keyed); err != nil {
					b.Fatal(err)
				}
				var before, after gcStats
				runtime.GC()
				before.read()
				n := 0
				for b.Loop() {
					if err := send(c.hc, method, url, c.keyed); err != nil {
						b.Fatal(err)
					}
					n++
				}
				runtime.GC() // brings the /cpu/classes metrics up to date
				after.read()
				b.ReportMetric(float64(after.cycles-before.cycles-1)*1000/float64(n), "gc-cycles/kreq") // -1: the last runtime.GC
				b.ReportMetric((after.busy-before.busy)*1e9/float64(n), "gc-cpu-ns/req")
				b.ReportMetric((after.idle-before.idle)*1e9/float64(n), "gc-idle-ns/req")
			})
		}
	}
}

// gcStats is what BenchmarkLoopbackGC reads of runtime/metrics.
type gcStats struct {
	cycles     uint64
	busy, idle float64 // CPU-seconds
}

func (g *gcStats) read() {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
	}
	metrics.Read(s)
	g.cycles = s[0].Value.Uint64()
	g.idle = s[2].Value.Float64()
	g.busy = s[1].Value.Float64() - g.idle
}

// childServerEnv, set in its environment, makes the test binary a loopback
// server (TestLoopbackServerProcess).
const childServerEnv = "RESILIENT_BENCH_LOOPBACK_SERVER"

// childServerLifetime bounds a child server's life if its parent never
// closes its stdin.
const childServerLifetime = 30 * time.Minute

// startChildServer runs this test binary again as a loopback server
// (TestLoopbackServerProcess) and returns its URL. The child serves until
// its stdin is closed, which tb.Cleanup does (or its parent dies), or for
// childServerLifetime at most.
func startChildServer(tb testing.TB) string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoopbackServerProcess$", "-test.count=1",
		"-test.timeout="+(childServerLifetime+time.Minute).String())
	cmd.Env = append(os.Environ(), childServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		addr := strings.TrimSpace(s)
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			tb.Fatalf("child server said %q, want its 127.0.0.1 address", s)
		}
		return "http://" + addr
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-line
		tb.Fatal("child server did not start within 30s")
		return ""
	}
}

// TestLoopbackServerProcess is the child server of startChildServer; it
// does nothing unless childServerEnv is set. It serves okHandler on
// 127.0.0.1, prints its address on stdout, and exits when stdin is closed
// or after childServerLifetime.
func TestLoopbackServerProcess(t *testing.T) {
	if os.Getenv(childServerEnv) != "1" {
		t.Skip("only as the child server of the loopback benchmarks")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Println(ln.Addr())
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-time.After(childServerLifetime):
	}
	srv.Close()
	os.Exit(0)
}

// TestLoopbackInterleaves checks what the loopback benchmarks rely on,
// against both servers: the pair takes turns in blocks of loopBlock, every
// request succeeds, the connections are reused, and the child server goes
// away with the test. It asserts nothing about time.
func TestLoopbackInterleaves(t *testing.T) {
	for _, srv := range loopbackServers() {
		t.Run(srv.name, func(t *testing.T) {
			url := srv.start(t) + "/v1/charges"
			base, dials := loopbackBase(t)
			pair := [2]loopClient{
				{name: "nethttp", hc: NetHTTP(base), keyed: true},
				{name: "resilient", hc: Resilient(base)},
			}
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				// The first worker sends 4 blocks from the first client's:
				// 2 pairs; the second, 3 blocks from the second client's: its
				// first block has no pair before it, then 1 pair.
				il := newInterleaved(method, url, pair)
				for _, blocks := range []int{4, 3} {
					w := il.worker()
					for range blocks * loopBlock {
						if err := w.one(); err != nil {
							t.Fatal(err)
						}
					}
					w.done()
				}
				if a, z := il.n[0].Load(), il.n[1].Load(); a != 3*loopBlock || z != 4*loopBlock {
					t.Errorf("%s: %d and %d requests, want %d and %d", method, a, z, 3*loopBlock, 4*loopBlock)
				}
				if a, z := il.perRequest(); a <= 0 || z <= 0 {
					t.Errorf("%s: mean times %v and %v, want both counted", method, a, z)
				}
				if len(il.ratios) != 3 || il.medianRatio() <= 0 {
					t.Errorf("%s: pair ratios %v, want 3", method, il.ratios)
				}
			}
			if d := dials.Load(); d != 1 {
				t.Errorf("%d connections for sequential requests, want 1", d)
			}
		})
	}
}

// resilientWithoutKeys are the options of a resilient Transport that keys
// no method.
var resilientWithoutKeys = []resilient.Option{resilient.WithKeyMethods()}
