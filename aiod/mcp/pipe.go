package mcp

import (
	"context"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipeDepth is how many messages each direction of a pipe holds before a
// writer waits for the reader, so that a notification sent while the
// other side is busy does not stall the sender.
const pipeDepth = 16

// newPipe returns the two ends of an in-process connection that passes
// JSON-RPC messages as values. The Go SDK's in-memory transport writes
// every message as JSON into a net.Pipe and parses it again on the other
// side (twice: as a batch, then as one message), which measured a third
// of the CPU of an in-process tool call; here a message's params and
// result stay the raw JSON the sender encoded, and are decoded once, by
// the handler that needs them. Neither side changes a message after
// writing it (the SDK builds a new one for every call and answer), so
// handing over the pointer is safe.
func newPipe() (client, server sdk.Transport) {
	ab := make(chan jsonrpc.Message, pipeDepth)
	ba := make(chan jsonrpc.Message, pipeDepth)
	sh := &pipeShared{done: make(chan struct{})}
	return &pipeTransport{&pipeConn{in: ba, out: ab, sh: sh}}, &pipeTransport{&pipeConn{in: ab, out: ba, sh: sh}}
}

// pipeShared is what both ends share: closing either end closes both.
type pipeShared struct {
	once sync.Once
	done chan struct{}
}

// pipeTransport hands out its one connection.
type pipeTransport struct{ c *pipeConn }

// Connect returns the end's connection.
func (t *pipeTransport) Connect(context.Context) (sdk.Connection, error) { return t.c, nil }

// pipeConn is one end of a pipe.
type pipeConn struct {
	in  <-chan jsonrpc.Message
	out chan<- jsonrpc.Message
	sh  *pipeShared
}

// Read returns the next message from the other end; after Close (either
// end's) it returns io.EOF.
func (c *pipeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.sh.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write passes m to the other end, waiting while its queue is full.
func (c *pipeConn) Write(ctx context.Context, m jsonrpc.Message) error {
	select {
	case <-c.sh.done:
		return io.ErrClosedPipe
	default:
	}
	select {
	case c.out <- m:
		return nil
	case <-c.sh.done:
		return io.ErrClosedPipe
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends both directions; a blocked Read or Write returns at once.
func (c *pipeConn) Close() error {
	c.sh.once.Do(func() { close(c.sh.done) })
	return nil
}

// SessionID is empty: an in-process connection has no session id.
func (c *pipeConn) SessionID() string { return "" }
