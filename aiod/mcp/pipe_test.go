package mcp

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestPipe holds the in-process pipe to what the SDK asks of a
// Connection: messages arrive in order and unchanged, either end's Close
// ends both directions and unblocks a waiting Read and Write, and a
// cancelled context ends a wait.
func TestPipe(t *testing.T) {
	ctx := context.Background()
	ct, st := newPipe()
	c, _ := ct.Connect(ctx)
	s, _ := st.Connect(ctx)
	for i := range 3 {
		id, _ := jsonrpc.MakeID(float64(i))
		if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "ping"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		m, err := s.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := m.(*jsonrpc.Request); !ok || r.Method != "ping" || r.ID.Raw() != int64(i) {
			t.Fatalf("message %d: %#v", i, m)
		}
	}

	// A cancelled wait returns the context's error.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.Read(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read with a deadline: %v", err)
	}

	// A Read blocked on one end returns when the other end closes.
	got := make(chan error, 1)
	go func() { _, err := c.Read(ctx); got <- err }()
	time.Sleep(10 * time.Millisecond) // let the Read block (it also passes if it has not yet)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != io.EOF {
			t.Fatalf("read after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if err := c.Write(ctx, &jsonrpc.Request{Method: "x"}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write after close: %v", err)
	}
	if err := c.Close(); err != nil { // a second Close is harmless
		t.Fatal(err)
	}

	// A Write waiting on a full queue returns at Close too.
	ct, st = newPipe()
	c, _ = ct.Connect(ctx)
	s, _ = st.Connect(ctx)
	for range pipeDepth {
		if err := c.Write(ctx, &jsonrpc.Request{Method: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	go func() { got <- c.Write(ctx, &jsonrpc.Request{Method: "x"}) }()
	time.Sleep(10 * time.Millisecond)
	s.Close()
	select {
	case err := <-got:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("blocked write after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Write")
	}
}
