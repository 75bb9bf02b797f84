package e2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/require"
)

// upstream serves a fake server's handler on a fixed loopback address with
// an http.Server that can be stopped (listener and every connection closed,
// requests in flight included, as when a process dies) and started again on
// the same address. The fake server — its idempotency records and ledger —
// outlives the restarts, like a database behind an API process.
type upstream struct {
	fs   *fakeserver.Server
	addr string
	wrap func(http.Handler) http.Handler // nil: the fake server's handler as is

	mu  sync.Mutex
	srv *http.Server // nil while stopped
	wg  sync.WaitGroup
}

// newUpstream starts the upstream of a fake server with sc, its handler
// wrapped by wrap when set.
func newUpstream(t *testing.T, sc fakeserver.Scenario, wrap func(http.Handler) http.Handler) *upstream {
	t.Helper()
	u := &upstream{fs: fakeserver.NewUnstarted(fakeserver.WithScenario(sc)), addr: "127.0.0.1:" + itoa(freePort(t)), wrap: wrap}
	require.NoError(t, u.start())
	require.NoError(t, u.fs.SetScenario(sc)) // outage windows count from now
	t.Cleanup(func() {
		u.stop()
		u.fs.Close()
		u.wg.Wait()
	})
	return u
}

// start listens on u.addr again and serves; it retries the bind for a second.
func (u *upstream) start() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv != nil {
		return nil
	}
	var ln net.Listener
	err := waitFor(context.Background(), time.Second, func() (err error) {
		ln, err = net.Listen("tcp", u.addr)
		return err
	})
	if err != nil {
		return err
	}
	h := u.fs.Handler()
	if u.wrap != nil {
		h = u.wrap(h)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	u.srv = srv
	u.wg.Go(func() { _ = srv.Serve(ln) })
	return nil
}

// stop closes the listener and every connection at once.
func (u *upstream) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv != nil {
		_ = u.srv.Close()
		u.srv = nil
	}
}

// restartEvery stops the upstream for down, first after 50 ms, then every
// period, until ctx is done.
func (u *upstream) restartEvery(ctx context.Context, t *testing.T, period, down time.Duration) {
	for up := 50 * time.Millisecond; ; up = period - down {
		select {
		case <-ctx.Done():
			return
		case <-time.After(up):
		}
		u.stop()
		time.Sleep(down)
		if err := u.start(); err != nil {
			t.Errorf("restarting the upstream: %v", err)
			return
		}
	}
}

// nginxConf is the configuration of a non-daemon, single-process nginx that
// keeps everything in dir and proxies 127.0.0.1:port to the upstream.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	upstream api {
		server %[3]s;
		keepalive 32;
	}
	server {
		listen 127.0.0.1:%[2]d;
		location / {
			proxy_pass http://api;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_connect_timeout 1s;
			proxy_send_timeout 1s;
			proxy_read_timeout %[4]dms;
		}
	}
}
`

// startNginx starts nginx as a reverse proxy to upstream (read timeout
// readTimeout, so a slower upstream gets 504) and returns its base URL.
func startNginx(t *testing.T, upstream string, readTimeout time.Duration) string {
	t.Helper()
	bin := findBinary(t, "E2E_NGINX", "nginx", "apt-get install nginx", "/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin")
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, port, upstream, readTimeout.Milliseconds()), 0o600))
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	startProcess(t, cmd, dir, "nginx.out")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitFor(context.Background(), 10*time.Second, func() error { return dialable(addr) }); err != nil {
		out, _ := os.ReadFile(filepath.Join(dir, "nginx.out"))
		elog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx did not listen on %s: %v\n%s\n%s", addr, err, out, elog)
	}
	return "http://" + addr
}

// TestNginxMatrix runs the fault matrix through nginx as a reverse proxy, so
// that the SDK meets nginx's real 502 and 504 pages and its connection
// handling: the upstream process is stopped and started again mid-run, dies
// after committing, resets, or is slower than nginx's read timeout.
func TestNginxMatrix(t *testing.T) {
	rows := runMatrix(t, nginxRows(), func(t *testing.T, c *faultCase) (*fakeserver.Server, string) {
		return startThroughNginx(t, c, nil)
	})
	t.Log(table("fault matrix through nginx (reverse proxy, proxy_read_timeout 300ms)", rows))
}

// nginxRows are the rows of TestNginxMatrix.
func nginxRows() []faultCase {
	return []faultCase{
		{
			// Down 150 ms, first after 50 ms, then every 400 ms: requests in
			// flight are cut (502, maybe after the effect), requests meanwhile
			// are refused (502).
			name: "upstream stopped and restarted",
			load: load{ops: 1500, concurrency: 32, pace: 30 * time.Millisecond,
				options: retrying(resilient.WithBackoff(resilient.FullJitter(10*time.Millisecond, 150*time.Millisecond)))},
		},
		{
			name: "upstream faults: 502 and 504 pages",
			scenario: chargesRoute(
				fakeserver.Fault{Kind: fakeserver.FaultLostResponse, Probability: 0.15},
				fakeserver.Fault{Kind: fakeserver.FaultReset, Probability: 0.1},
				fakeserver.Fault{Kind: fakeserver.FaultLatency, Latency: fakeserver.Duration(600 * time.Millisecond), Probability: 0.05},
				fakeserver.Fault{Kind: fakeserver.FaultHang, Probability: 0.03},
			),
			load: load{ops: 1500, concurrency: 48, options: retrying()},
		},
	}
}

// startThroughNginx starts the fake server of c (its handler wrapped by
// wrap, when set) as an upstream behind nginx and returns the server and
// nginx's URL. The upstream restarts during the load of the row that says so.
func startThroughNginx(t *testing.T, c *faultCase, wrap func(http.Handler) http.Handler) (*fakeserver.Server, string) {
	t.Helper()
	up := newUpstream(t, c.scenario, chain(wrap, c.wrap))
	url := startNginx(t, up.addr, 300*time.Millisecond)
	if c.name == "upstream stopped and restarted" {
		c.load.during = func(ctx context.Context) { up.restartEvery(ctx, t, 400*time.Millisecond, 150*time.Millisecond) }
	}
	return up.fs, url
}
