package resilient_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/resilienthttp/resilient"
)

// BenchmarkResume64MiB downloads 64 MiB over loopback from http.ServeContent
// twice per iteration: unbroken with a bare client, and cut 3 times (after
// each 16 MiB) with a wrapped one, which resumes it. Each read must be
// byte-identical to the file. It reports the throughput of each (MB/s)
// and their ratio, cut ÷ unbroken, measured in the same run (ratio: of
// the totals; best-ratio: of the fastest read of each):
//
//	go test -run '^$' -bench BenchmarkResume64MiB -benchtime 10x .
func BenchmarkResume64MiB(b *testing.B) {
	const size = 64 << 20
	content := rsContent(size)
	cut := &rsServer{content: content, etag: `"v1"`, modtime: time.Now().Add(time.Hour)}
	whole := &rsServer{content: content, etag: `"v1"`, modtime: time.Now().Add(time.Hour)}
	mux := http.NewServeMux()
	mux.Handle("/cut", cut)
	mux.Handle("/whole", whole)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	// Every read starts on a new connection, as a download does: a
	// connection kept from the last read would have its TCP buffers grown
	// already, while each resume starts a new one.
	bareTr, wrapTr := &http.Transport{DisableKeepAlives: true}, &http.Transport{DisableKeepAlives: true}
	defer bareTr.CloseIdleConnections()
	defer wrapTr.CloseIdleConnections()
	bare := &http.Client{Transport: bareTr}
	wrapped := resilient.Wrap(&http.Client{Transport: wrapTr})
	buf := make([]byte, size)
	read := func(c *http.Client, url string) time.Duration {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.ReadFull(resp.Body, buf)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || !bytes.Equal(buf, content) {
			b.Fatalf("read %s: %v, identical %v", url, err, bytes.Equal(buf, content))
		}
		clear(buf)
		return took
	}
	var (
		tookWhole, tookCut time.Duration
		bestWhole, bestCut time.Duration = time.Hour, time.Hour
		i                  int
	)
	timed := func(sum, best *time.Duration, d time.Duration) {
		*sum += d
		*best = min(*best, d)
	}
	b.SetBytes(2 * size)
	for b.Loop() {
		cut.mu.Lock()
		cut.ranges, cut.cuts = nil, []int64{16 << 20, 16 << 20, 16 << 20}
		cut.mu.Unlock()
		if i++; i%2 == 0 { // in turns: neither read is always the first
			timed(&tookWhole, &bestWhole, read(bare, hs.URL+"/whole"))
			timed(&tookCut, &bestCut, read(wrapped, hs.URL+"/cut"))
		} else {
			timed(&tookCut, &bestCut, read(wrapped, hs.URL+"/cut"))
			timed(&tookWhole, &bestWhole, read(bare, hs.URL+"/whole"))
		}
		if n := len(cut.requests()); n != 4 {
			b.Fatalf("%d requests for the cut download, want 4", n)
		}
	}
	mb := func(d time.Duration) float64 { return float64(b.N) * size / 1e6 / d.Seconds() }
	b.ReportMetric(mb(tookWhole), "unbroken-MB/s")
	b.ReportMetric(mb(tookCut), "cut3-MB/s")
	b.ReportMetric(mb(tookCut)/mb(tookWhole), "ratio")
	// The ratio of the fastest of each: what a busy machine disturbs least.
	b.ReportMetric(bestWhole.Seconds()/bestCut.Seconds(), "best-ratio")
}
