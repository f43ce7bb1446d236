//go:build linux

package sio

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// TestWriteClientFrame writes messages of several sizes, owned or not, on
// a TCP connection and a pipe: each arrives as exactly one masked frame
// with the payload sent, and data not owned is left as it was.
func TestWriteClientFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	tcp, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	srv := <-accepted
	if srv == nil {
		t.Fatal("no connection")
	}
	defer srv.Close()
	pa, pb := net.Pipe()
	defer pa.Close()
	defer pb.Close()

	for _, conn := range []struct {
		name string
		w, r net.Conn
	}{{"tcp", tcp, srv}, {"pipe", pa, pb}} {
		for _, n := range []int{0, 1, 125, 126, 4095, 4096, 65535, 65536, 350 << 10} {
			for _, owned := range []bool{false, true} {
				for _, binary := range []bool{false, true} {
					data := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
					orig := bytes.Clone(data)
					f := frame{data: data, binary: binary, owned: owned}
					errc := make(chan error, 1)
					go func() { errc <- writeClientFrame(conn.w, f) }()
					hdr := 2
					switch {
					case n >= 1<<16:
						hdr = 10
					case n >= 126:
						hdr = 4
					}
					raw := make([]byte, hdr+4+n)
					if _, err := io.ReadFull(conn.r, raw); err != nil {
						t.Fatalf("%s n=%d: read: %v", conn.name, n, err)
					}
					if err := <-errc; err != nil {
						t.Fatalf("%s n=%d: write: %v", conn.name, n, err)
					}
					fin, op, payload, used, code := parseWSFrame(raw, 1<<20)
					wantOp := byte(opText)
					if binary {
						wantOp = opBinary
					}
					if code != 0 || !fin || op != wantOp || used != len(raw) || !bytes.Equal(payload, orig) {
						t.Fatalf("%s n=%d owned=%v: fin %v op %d used %d/%d code %d equal %v",
							conn.name, n, owned, fin, op, used, len(raw), code, bytes.Equal(payload, orig))
					}
					if !owned && !bytes.Equal(data, orig) {
						t.Fatalf("%s n=%d: data not owned was modified", conn.name, n)
					}
				}
			}
		}
	}
}
