package wire

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// drainLimit and drainTimeout bound what discard reads of a response the
// caller will not see: enough to reuse a keep-alive connection after a
// short error page, never long enough to hold the retry loop. keep drains
// drainLimit too, in the background.
const (
	DrainLimit   = 64 << 10
	DrainTimeout = 100 * time.Millisecond
)

// Keep holds the response of an attempt that a retry may replace. Its body
// is drained in the background, at most drainLimit bytes. So a short error
// page frees its connection during the backoff. Nothing of it is lost. If
// the retry is then not sent, the caller reads the whole body: what was
// drained and then the rest, each byte as soon as it has come. If the retry
// is sent, drop closes it before the retry goes out (call.held). Its
// connection may be the one the retry needs.
func Keep(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	hb := &heldBody{rc: resp.Body, draining: true}
	hb.wake = sync.NewCond(&hb.mu)
	go hb.drain()
	resp.Body = hb
}

// Drop closes the body of a response kept (keep) for a retry that is
// sent: the caller will not see it.
func Drop(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

// heldBody is the body of a kept response. It is drained in the background
// up to drainLimit bytes while nobody reads it. Once the caller reads, the
// drain stops after the read it is in. The caller reads what was drained,
// then the rest.
type heldBody struct {
	rc   io.ReadCloser
	mu   sync.Mutex
	wake *sync.Cond // signalled when buf, err or draining change
	buf  []byte     // drained, not yet read by the caller
	err  error      // rc's end as the drain saw it (io.EOF, a read error)
	// draining: the drain is running; handed: the caller reads (the
	// drain stops); closed: Close was called.
	draining, handed, closed bool
}

func (b *heldBody) drain() {
	p := make([]byte, 16<<10)
	total := 0
	for {
		n, err := b.rc.Read(p)
		total += n
		b.mu.Lock()
		b.buf = append(b.buf, p[:n]...)
		if err != nil {
			b.err = err
		}
		stop := err != nil || b.handed || b.closed || total >= DrainLimit
		if stop {
			b.draining = false
		}
		b.wake.Broadcast()
		b.mu.Unlock()
		if stop {
			return
		}
	}
}

// Read returns what the drain read, then reads on from the body once the
// drain has stopped. Once the body is closed, it fails as net/http's does.
func (b *heldBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.handed = true
	for len(b.buf) == 0 && b.draining && !b.closed {
		b.wake.Wait()
	}
	if b.closed {
		b.mu.Unlock()
		return 0, errReadOnClosedBody
	}
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		b.mu.Unlock()
		return n, nil
	}
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return b.rc.Read(p) // the drain has stopped: the caller reads alone
}

// errReadOnClosedBody is what a read of a closed held body returns:
// net/http's words for a response body read after Close.
var errReadOnClosedBody = errors.New("http: read on closed response body")

// Close closes the body (a drain still reading ends); closing again does
// nothing.
func (b *heldBody) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.wake.Broadcast() // a Read waiting for the drain fails now
	b.mu.Unlock()
	return b.rc.Close()
}

// Discard drains (at most drainLimit bytes, for at most drainTimeout) and
// closes a response the caller will not see, so its connection can be
// reused. A body that stalls is closed when the timeout fires, which ends a
// read blocked on the network.
func Discard(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	stop := time.AfterFunc(DrainTimeout, func() { resp.Body.Close() })
	io.CopyN(io.Discard, resp.Body, DrainLimit)
	stop.Stop()
	resp.Body.Close()
}

// CancelOnClose returns body, which cancels the attempt's context when the
// caller closes it. The body of a 101 Switching Protocols answer is the
// upgraded connection, an io.ReadWriteCloser: it stays one.
func CancelOnClose(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{CancelBody{rw, cancel}, rw}
	}
	return &CancelBody{body, cancel}
}

// cancelRWBody is a cancelBody that can be written to.
type cancelRWBody struct {
	CancelBody
	w io.Writer
}

func (b *cancelRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// CancelBody cancels the attempt's context when the caller closes the body.
type CancelBody struct {
	io.ReadCloser
	Cancel context.CancelFunc
}

func (b *CancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.Cancel()
	return err
}
