package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/resilienthttp/resilient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nginxStaticConf is the configuration of a non-daemon, single-process
// nginx that keeps everything in dir and serves dir/www on 127.0.0.1:port:
// static files with a strong ETag, Last-Modified, Content-Length and
// Accept-Ranges: bytes.
const nginxStaticConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen 127.0.0.1:%[2]d;
		root %[1]s/www;
	}
}
`

// startStaticNginx starts nginx serving the files of the returned
// directory, and returns its address too.
func startStaticNginx(t *testing.T) (www, addr string) {
	t.Helper()
	bin := findBinary(t, "E2E_NGINX", "nginx", "apt-get install nginx", "/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin")
	dir := t.TempDir()
	www = filepath.Join(dir, "www")
	require.NoError(t, os.Mkdir(www, 0o700))
	port := freePort(t)
	conf := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, nginxStaticConf, dir, port), 0o600))
	startProcess(t, exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")), dir, "nginx.out")
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitFor(context.Background(), 10*time.Second, func() error { return dialable(addr) }); err != nil {
		elog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx did not listen on %s: %v\n%s", addr, err, elog)
	}
	return www, addr
}

// writeFile writes content to www/name, replacing the file at once
// (rename): a reader of the old file reads it to its end.
func writeFile(t *testing.T, www, name string, content []byte) {
	t.Helper()
	tmp := filepath.Join(www, "."+name)
	require.NoError(t, os.WriteFile(tmp, content, 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(www, name)))
}

// TestResumeNginxThroughToxiproxy: nginx serves an 8 MiB file through a
// toxiproxy proxy that closes each connection after 2 MiB (limit_data).
// A bare client's read fails after 2 MiB; a wrapped client's reads the file
// byte-identical, resumed 4 times. When the file changes between the cut
// and the resume, nginx answers the If-Range with a 200, which is never
// spliced: the wrapped read fails as the bare one does.
func TestResumeNginxThroughToxiproxy(t *testing.T) {
	www, addr := startStaticNginx(t)
	tp := startToxiproxy(t)
	proxy, err := tp.CreateProxy(fmt.Sprintf("files%d", proxies.Add(1)), "127.0.0.1:0", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Delete() })
	_, err = proxy.AddToxic("limit", "limit_data", "downstream", 1, toxiproxy.Attributes{"bytes": 2 << 20})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(3, 4))
	content := make([]byte, 8<<20)
	for i := range content {
		content[i] = byte(r.Uint32())
	}
	u := (&url.URL{Scheme: "http", Host: proxy.Listen, Path: "/big.bin"}).String()

	get := func(wrap bool, change bool) (got []byte, resumes int64, err error) {
		writeFile(t, www, "big.bin", content)
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: time.Minute}
		var n atomic.Int64
		if wrap {
			c = resilient.Wrap(c, resilient.WithObserver(func(_ context.Context, e resilient.Event) {
				if e.Kind == resilient.EventResume {
					n.Add(1)
				}
			}))
		}
		resp, err := c.Get(u)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		if change {
			// Another size: another ETag (nginx's is of the mtime and size).
			writeFile(t, www, "big.bin", append(bytes.Clone(content), 'x'))
		}
		got, err = io.ReadAll(resp.Body)
		return got, n.Load(), err
	}

	t.Run("resumed", func(t *testing.T) {
		bare, _, bareErr := get(false, false)
		require.ErrorIs(t, bareErr, io.ErrUnexpectedEOF, "the bare client's read is cut")
		assert.Less(t, len(bare), 2<<20)
		got, resumes, err := get(true, false)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(content, got), "byte-identical")
		assert.Equal(t, int64(4), resumes, "2 MiB per connection, its header included: 5 answers")
	})
	t.Run("changed file never spliced", func(t *testing.T) {
		bare, _, bareErr := get(false, true)
		require.ErrorIs(t, bareErr, io.ErrUnexpectedEOF)
		got, resumes, err := get(true, true)
		require.Error(t, err)
		assert.ErrorIs(t, err, bareErr, "errors.Is finds the bare client's error")
		assert.Equal(t, len(bare), len(got), "the bare client's bytes, no more")
		assert.True(t, bytes.Equal(content[:len(got)], got))
		assert.Equal(t, int64(1), resumes, "one resume, answered 200")
	})
}
