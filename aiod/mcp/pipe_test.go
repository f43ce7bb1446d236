package mcp

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
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

	// A Read blocked on one end, and a Write blocked on a full queue,
	// return when the other end closes. synctest.Wait returns once the
	// goroutine is durably blocked, so the Close is seen by a blocked
	// call, never by one that has not started (a sleep could not tell);
	// a call that never returns is reported as a deadlock.
	synctest.Test(t, func(t *testing.T) {
		ct, st := newPipe() // in the bubble: its channels are the bubble's
		c, _ := ct.Connect(ctx)
		s, _ := st.Connect(ctx)
		got := make(chan error, 1)
		go func() { _, err := c.Read(ctx); got <- err }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("Read returned before Close: %v", err)
		default:
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != io.EOF {
			t.Fatalf("read after close: %v", err)
		}
		if err := c.Write(ctx, &jsonrpc.Request{Method: "x"}); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("write after close: %v", err)
		}
		if err := c.Close(); err != nil { // a second Close is harmless
			t.Fatal(err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ct, st := newPipe()
		c, _ := ct.Connect(ctx)
		s, _ := st.Connect(ctx)
		for range pipeDepth {
			if err := c.Write(ctx, &jsonrpc.Request{Method: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		got := make(chan error, 1)
		go func() { got <- c.Write(ctx, &jsonrpc.Request{Method: "x"}) }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("Write on a full queue returned before Close: %v", err)
		default:
		}
		s.Close()
		if err := <-got; !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("blocked write after close: %v", err)
		}
	})
}
