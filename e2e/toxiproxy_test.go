package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/require"
)

// startToxiproxy starts toxiproxy-server on a free loopback port and returns
// a client of its API. The server is stopped when the test ends.
func startToxiproxy(t *testing.T) *toxiproxy.Client {
	t.Helper()
	bin := findBinary(t, "E2E_TOXIPROXY_SERVER", "toxiproxy-server", "go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0, renamed toxiproxy-server", goBin())
	addr := "127.0.0.1:" + itoa(freePort(t))
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(bin, "-host", host, "-port", port)
	cmd.Env = append(cmd.Environ(), "LOG_LEVEL=warn")
	dir := t.TempDir()
	startProcess(t, cmd, dir, "toxiproxy.log")
	client := toxiproxy.NewClient(addr)
	// The client's API calls go through http.DefaultTransport.
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	err := waitFor(context.Background(), 10*time.Second, func() error {
		_, err := client.Version()
		return err
	})
	require.NoError(t, err, "toxiproxy-server did not answer on %s (log in %s)", addr, dir)
	return client
}

// toxic is one toxic to add to a proxy (client.AddToxic's arguments).
type toxic struct {
	kind, stream string
	toxicity     float32
	attrs        toxiproxy.Attributes
}

// TestToxiproxyMatrix runs the fault matrix through toxiproxy, whose toxics
// are the faults: every operation crosses a real TCP proxy that delays,
// stalls, resets, slowly closes or cuts the connections.
func TestToxiproxyMatrix(t *testing.T) {
	tp := startToxiproxy(t)
	cases, toxics := toxiproxyRows()
	rows := runMatrix(t, cases, func(t *testing.T, c *faultCase) (*fakeserver.Server, string) {
		return startThroughToxiproxy(t, tp, c, toxics[c.name], nil)
	})
	t.Log(table("fault matrix through toxiproxy", rows))
}

// toxiproxyRows returns the rows of TestToxiproxyMatrix and, by row name,
// the toxics each adds to its proxy.
func toxiproxyRows() ([]faultCase, map[string][]toxic) {
	type toxCase struct {
		faultCase
		toxics []toxic
	}
	cases := []toxCase{
		{
			// Requests held 200 ms on a quarter of the connections, longer
			// than the attempt timeout: some reach the server after the
			// client gave up on them.
			faultCase: faultCase{name: "latency (upstream, past the attempt timeout)",
				load:     load{ops: 1000, concurrency: 32, fresh: true, options: retrying(resilient.WithAttemptTimeout(150 * time.Millisecond))},
				deadline: 150 * time.Millisecond},
			toxics: []toxic{{"latency", "upstream", 0.25, toxiproxy.Attributes{"latency": 200, "jitter": 50}}},
		},
		{
			// Responses never come back on a fifth of the connections, which
			// toxiproxy closes after 100 ms: the effect is committed.
			faultCase: faultCase{name: "timeout (downstream)", load: load{ops: 1000, concurrency: 32, fresh: true, options: retrying()}},
			toxics:    []toxic{{"timeout", "downstream", 0.2, toxiproxy.Attributes{"timeout": 100}}},
		},
		{
			// RST on the request (before the server sees it) or on the
			// response (after the effect).
			faultCase: faultCase{name: "reset_peer (both ways)", load: load{ops: 1000, concurrency: 32, fresh: true, options: retrying()}},
			toxics: []toxic{
				{"reset_peer", "upstream", 0.1, toxiproxy.Attributes{"timeout": 0}},
				{"reset_peer", "downstream", 0.15, toxiproxy.Attributes{"timeout": 0}},
			},
		},
		{
			// The server drops a fifth of the connections after the effect;
			// toxiproxy delays the close past the attempt timeout.
			faultCase: faultCase{name: "slow_close (with lost responses)",
				scenario: chargesRoute(fakeserver.Fault{Kind: fakeserver.FaultLostResponse, Probability: 0.2}),
				load:     load{ops: 1000, concurrency: 32, fresh: true, options: retrying(resilient.WithAttemptTimeout(150 * time.Millisecond))}},
			toxics: []toxic{{"slow_close", "downstream", 1, toxiproxy.Attributes{"delay": 300}}},
		},
		{
			// Most connections are cut after 800 or 1500 bytes of responses:
			// a keep-alive connection dies in the middle of the headers or
			// the body of its third or sixth response.
			faultCase: faultCase{name: "limit_data (downstream)", load: load{ops: 1000, concurrency: 32, options: retrying()}},
			toxics: []toxic{
				{"limit_data", "downstream", 0.5, toxiproxy.Attributes{"bytes": 800}},
				{"limit_data", "downstream", 0.7, toxiproxy.Attributes{"bytes": 1500}},
			},
		},
		{
			// The proxy is disabled (listener closed, connections dropped)
			// for 100 ms, first after 30 ms, then every 250 ms.
			faultCase: faultCase{name: "proxy disabled and re-enabled", load: load{ops: 1000, concurrency: 32, pace: 20 * time.Millisecond,
				options: retrying(resilient.WithBackoff(resilient.FullJitter(10*time.Millisecond, 150*time.Millisecond)))}},
		},
	}
	var fc []faultCase
	toxics := map[string][]toxic{}
	for _, c := range cases {
		fc = append(fc, c.faultCase)
		toxics[c.name] = c.toxics
	}
	return fc, toxics
}

// proxies numbers the toxiproxy proxies of the test binary.
var proxies atomic.Int64

// startThroughToxiproxy starts the fake server of c (its handler wrapped by
// wrap, then by c.wrap, when set) behind a new toxiproxy proxy with toxics,
// and returns the server and the proxy's URL. The proxy flaps during the
// load of the row that says so.
func startThroughToxiproxy(t *testing.T, tp *toxiproxy.Client, c *faultCase, toxics []toxic, wrap func(http.Handler) http.Handler) (*fakeserver.Server, string) {
	t.Helper()
	srv, upstream := startAPI(t, c.scenario, chain(wrap, c.wrap))
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	proxy, err := tp.CreateProxy(fmt.Sprintf("api%d", proxies.Add(1)), "127.0.0.1:0", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Delete() })
	for i, x := range toxics {
		_, err := proxy.AddToxic(fmt.Sprintf("%s_%s_%d", x.kind, x.stream, i), x.kind, x.stream, x.toxicity, x.attrs)
		require.NoError(t, err)
	}
	if c.name == "proxy disabled and re-enabled" {
		c.load.during = func(ctx context.Context) { flapProxy(ctx, t, proxy) }
	}
	return srv, "http://" + proxy.Listen
}

// flapProxy disables the proxy for 100 ms, first after 30 ms, then every
// 250 ms, until ctx is done.
func flapProxy(ctx context.Context, t *testing.T, proxy *toxiproxy.Proxy) {
	for up := 30 * time.Millisecond; ; up = 150 * time.Millisecond {
		select {
		case <-ctx.Done():
			return
		case <-time.After(up):
		}
		if err := proxy.Disable(); err != nil {
			t.Errorf("disabling the proxy: %v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
		if err := proxy.Enable(); err != nil {
			t.Errorf("enabling the proxy: %v", err)
			return
		}
	}
}
