package sim

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// network is an in-memory network with one server: a listener whose
// connections are net.Pipe halves, and a dialer that hands the other half
// to it. No socket is opened, so it runs inside a synctest bubble, whose
// virtual clock then drives every deadline of both ends.
type network struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	dials  atomic.Int64
	plan   *Plan
}

func newNetwork(p *Plan) *network {
	return &network{conns: make(chan net.Conn), closed: make(chan struct{}), plan: p}
}

// Accept implements net.Listener.
func (n *network) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: later dials are refused.
func (n *network) Close() error {
	n.once.Do(func() { close(n.closed) })
	return nil
}

// Addr implements net.Listener.
func (n *network) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "sim:80" }

// dial connects to the server, or fails as the plan says for this dial:
// refused (nothing sent, as a failed TCP dial), or a connection whose
// writes fail after some bytes (the request lost on its way).
func (n *network) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d := int(n.dials.Add(1))
	for _, r := range n.plan.DialRefused {
		if r == d {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: pipeAddr{}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
	}
	client, server := net.Pipe()
	select {
	case n.conns <- server:
	case <-n.closed:
		client.Close()
		server.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: pipeAddr{}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	for _, w := range n.plan.WriteFaults {
		if w.Dial == d {
			return &cutConn{Conn: client, left: w.After}, nil
		}
	}
	return client, nil
}

// cutConn is a connection that breaks after left more bytes are written:
// the write that crosses the limit sends what fits, then the connection
// is reset.
type cutConn struct {
	net.Conn
	mu   sync.Mutex
	left int
}

func (c *cutConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	left := c.left
	if len(b) <= left {
		c.left -= len(b)
		c.mu.Unlock()
		return c.Conn.Write(b)
	}
	c.left = 0
	c.mu.Unlock()
	n := 0
	if left > 0 {
		n, _ = c.Conn.Write(b[:left])
	}
	c.Conn.Close()
	return n, &net.OpError{Op: "write", Net: "tcp", Addr: pipeAddr{}, Err: os.NewSyscallError("write", syscall.ECONNRESET)}
}
