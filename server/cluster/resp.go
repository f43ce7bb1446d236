package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// This file reads RESP, the Redis protocol, for the subscriber: the
// replies and pushes of a subscription connection (RESP2 arrays, RESP3
// '>' push frames) and the one CLUSTER SLOTS reply it needs on a Redis
// Cluster. It also holds the connection setup shared by the publisher
// and the subscriber (dialRedis).
//
// Redis is not trusted: a reader never panics on any input, bounds every
// length it is told before it reads (one reply at most respMaxReply
// bytes, at most maxElems array elements, respMaxDepth levels of arrays)
// and grows its buffer with the bytes that actually arrive, so a header
// that announces 64 MiB and then stops costs nothing. In steady state it
// allocates nothing: one reply at a time is decoded into a value list and
// a byte buffer that the next reply reuses.

const (
	// respMaxReply bounds the bytes of one reply (its strings together).
	respMaxReply = 64 << 20
	// respMaxDepth bounds the nesting of arrays (CLUSTER SLOTS needs 3).
	respMaxDepth = 8
	// respBufSize is the size of the input buffer, and so bounds the
	// longest header line (a simple string or an error reply).
	respBufSize = 64 << 10
	// respKeepBuf is the largest string buffer kept from one reply to the
	// next: a rare huge payload does not pin its memory on the connection.
	respKeepBuf = 1 << 20
	// respPubSubElems bounds the elements of one reply on a subscription
	// connection: a message is 3 (4 for a pattern's), a confirmation 3.
	respPubSubElems = 16
)

// errProtocol is a reply that is not RESP, or breaks a bound: the
// connection that sent it is out of step and must be closed.
var errProtocol = errors.New("cluster: malformed RESP reply")

// respValue is one value of a reply. A reply is a list of values in
// pre-order: an array ('*', '>') is followed by its n elements.
type respValue struct {
	// kind is the RESP type byte: '+' simple string, '-' error, ':'
	// integer, '$' bulk string, '*' array, '>' push; '_' is a null (RESP3
	// '_', or RESP2's $-1 and *-1).
	kind byte
	// n is an integer's value, or an array's element count.
	n int64
	// off and end delimit a string's bytes in the reader's buffer.
	off, end int
}

// respReader parses replies one at a time from the bytes of a
// connection. It is a push parser: fill hands it what one read of the
// connection gave, and parse takes from those bytes as much of the next
// reply as they hold, keeping its place (the arrays open, the bulk string
// being copied) until the rest arrives. next wraps the two for a
// connection read by its own goroutine; a connection read by an event
// loop calls fill and parse itself, on each readiness (see
// subscriber.readPolled), without ever blocking.
type respReader struct {
	rd       io.Reader // where next reads; nil for a reader fed by fill only
	in       []byte    // bytes received, in[off:] not parsed yet; cap respBufSize
	off      int
	maxElems int
	buf      []byte      // the strings of the current reply
	vals     []respValue // the values of the current reply

	// The place in the reply being parsed.
	done  bool                // vals holds a whole reply (or nothing yet): the next byte starts a new one
	left  [respMaxDepth]int64 // left[d]: elements still expected by the array open at depth d
	depth int
	elems int64 // array elements announced in the reply so far
	bulk  int   // bytes of the bulk string being copied still to come (its CRLF included); 0: none
}

// newRESPReader reads from rd; one reply may hold at most maxElems array
// elements in all. rd may be nil for a reader fed by fill.
func newRESPReader(rd io.Reader, maxElems int) *respReader {
	return &respReader{rd: rd, maxElems: maxElems, done: true}
}

// reset makes r read from rd (a new connection), dropping what was
// received and the reply begun, and keeps its buffers.
func (r *respReader) reset(rd io.Reader) {
	r.rd, r.in, r.off, r.bulk, r.done = rd, r.in[:0], 0, 0, true
}

// text is the bytes of a string value of the last reply; valid until the
// next call of next or parse.
func (r *respReader) text(v respValue) []byte { return r.buf[v.off:v.end] }

// next reads one whole reply from rd. The values and their bytes are
// valid until the next call. Any error leaves the stream at an unknown
// place: the caller closes the connection.
func (r *respReader) next() ([]respValue, error) {
	for empty := 0; ; {
		vals, err := r.parse()
		if err != nil || vals != nil {
			return vals, err
		}
		n, err := r.fill(r.rd.Read)
		switch {
		case n > 0:
			empty = 0
		case err == io.EOF && r.inReply():
			return nil, io.ErrUnexpectedEOF // the stream ends within a reply
		case err != nil:
			return nil, err
		default:
			if empty++; empty == 100 {
				return nil, io.ErrNoProgress
			}
		}
	}
}

// inReply reports whether part of a reply was received.
func (r *respReader) inReply() bool { return !r.done && len(r.vals) > 0 || r.off < len(r.in) }

// fill calls read once with the free space of the input buffer, and keeps
// what it gives; it returns read's results. The space is never empty:
// what parse leaves unparsed is at most a part of one line, shorter than
// respBufSize.
func (r *respReader) fill(read func([]byte) (int, error)) (int, error) {
	if r.in == nil {
		r.in = make([]byte, 0, respBufSize)
	}
	if r.off > 0 {
		r.in = r.in[:copy(r.in[:cap(r.in)], r.in[r.off:])]
		r.off = 0
	}
	n, err := read(r.in[len(r.in):cap(r.in)])
	if n > 0 {
		r.in = r.in[:len(r.in)+n]
	}
	return n, err
}

// parse continues the current reply with the bytes received. It returns
// the reply's values once it is whole (valid until the next call), nil
// while more bytes are needed, or an error: then the stream is at an
// unknown place and the caller closes the connection.
func (r *respReader) parse() ([]respValue, error) {
	if r.done {
		if cap(r.buf) > respKeepBuf {
			r.buf = nil
		}
		r.buf, r.vals = r.buf[:0], r.vals[:0]
		r.depth, r.elems, r.done = 0, 0, false
	}
	for {
		avail := r.in[r.off:]
		if r.bulk > 0 {
			// A bulk string's bytes are copied as they arrive: its header
			// was bounded, and the buffer grows with what is received.
			take := min(r.bulk, len(avail))
			if take == 0 {
				return nil, nil
			}
			r.buf = append(r.buf, avail[:take]...)
			r.off += take
			if r.bulk -= take; r.bulk > 0 {
				return nil, nil
			}
			if r.buf[len(r.buf)-2] != '\r' || r.buf[len(r.buf)-1] != '\n' {
				return nil, fmt.Errorf("%w: bulk string without CRLF", errProtocol)
			}
			r.buf = r.buf[:len(r.buf)-2]
			r.vals[len(r.vals)-1].end = len(r.buf)
			if r.closeValue() {
				return r.vals, nil
			}
			continue
		}
		i := bytes.IndexByte(avail, '\n')
		if i >= respBufSize || i < 0 && len(avail) >= respBufSize {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errProtocol, respBufSize)
		}
		if i < 0 {
			return nil, nil
		}
		line := avail[:i+1]
		r.off += i + 1
		if len(line) < 3 || line[len(line)-2] != '\r' {
			return nil, fmt.Errorf("%w: bad line", errProtocol)
		}
		kind, body := line[0], line[1:len(line)-2]
		v := respValue{kind: kind}
		var err error
		switch kind {
		case '+', '-':
			if len(r.buf)+len(body) > respMaxReply {
				return nil, fmt.Errorf("%w: reply too long", errProtocol)
			}
			v.off = len(r.buf)
			r.buf = append(r.buf, body...)
			v.end = len(r.buf)
		case ':':
			if v.n, err = parseRESPInt(body); err != nil {
				return nil, err
			}
		case '_':
			if len(body) != 0 {
				return nil, fmt.Errorf("%w: bad null", errProtocol)
			}
		case '$':
			n, err := parseRESPInt(body)
			switch {
			case err != nil:
				return nil, err
			case n == -1:
				v.kind = '_'
			case n < 0 || n > int64(respMaxReply-len(r.buf)):
				return nil, fmt.Errorf("%w: bulk length %d", errProtocol, n)
			default:
				// Its bytes come next; the value ends when they are in.
				v.off = len(r.buf)
				r.vals = append(r.vals, v)
				r.bulk = int(n) + 2
				continue
			}
		case '*', '>':
			n, err := parseRESPInt(body)
			switch {
			case err != nil:
				return nil, err
			case n == -1 && kind == '*':
				v.kind = '_'
			case n < 0 || n > int64(r.maxElems)-r.elems:
				return nil, fmt.Errorf("%w: array of %d", errProtocol, n)
			}
			if v.kind != '_' {
				r.elems += n
				v.n = n
			}
		default:
			return nil, fmt.Errorf("%w: type %q", errProtocol, kind)
		}
		r.vals = append(r.vals, v)
		if (v.kind == '*' || v.kind == '>') && v.n > 0 {
			// An array opens: its elements come next.
			if r.depth == respMaxDepth {
				return nil, fmt.Errorf("%w: nested too deep", errProtocol)
			}
			r.left[r.depth] = v.n
			r.depth++
			continue
		}
		if r.closeValue() {
			return r.vals, nil
		}
	}
}

// closeValue ends a value: it completes its array, which may complete the
// one around it, up to the reply. It reports whether the reply is whole.
func (r *respReader) closeValue() bool {
	for {
		if r.depth == 0 {
			r.done = true
			return true
		}
		if r.left[r.depth-1]--; r.left[r.depth-1] > 0 {
			return false
		}
		r.depth--
	}
}

// parseRESPInt parses a RESP integer: an optional '-' and 1 to 18
// digits (no overflow possible, and more than any length we accept).
func parseRESPInt(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, fmt.Errorf("%w: bad integer", errProtocol)
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: bad integer", errProtocol)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// respSkip returns the index of the value after vals[i] and everything
// in it (an array's elements), or len(vals).
func respSkip(vals []respValue, i int) int {
	for todo := int64(1); todo > 0 && i < len(vals); i++ {
		todo--
		if k := vals[i].kind; k == '*' || k == '>' {
			todo += vals[i].n
		}
	}
	return i
}

// authArgs is the AUTH command's arguments for a username and password:
// none without a password and a username, just the password for the
// default user.
func authArgs(username, password string) []string {
	switch {
	case username != "":
		return []string{username, password}
	case password != "":
		return []string{password}
	}
	return nil
}

// longAgo is a deadline in the past: it ends a blocked read at once.
var longAgo = time.Unix(1, 0)

// dialRedis connects to the Redis at addr (TLS when tlsCfg is not nil),
// authenticates (auth: AUTH's arguments, or nil) and names the connection
// (CLIENT SETNAME, unless name is ""), all within timeout and ctx: a
// cancelled ctx ends the setup at once. It returns the connection with no
// deadline and nothing buffered. The publisher and the subscriber both
// connect with it.
func dialRedis(ctx context.Context, addr string, tlsCfg *tls.Config, auth []string, name string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 15 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(longAgo) })
	defer stop()
	fail := func(err error) (net.Conn, error) {
		nc.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connection setup: %w", context.Cause(ctx))
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(timeout))
	if tlsCfg != nil {
		cfg := tlsCfg
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		nc = tc
	}
	var setup []byte
	replies := 0
	if auth != nil {
		setup = appendCommand(setup, append([]string{"AUTH"}, auth...)...)
		replies++
	}
	if name != "" {
		setup = appendCommand(setup, "CLIENT", "SETNAME", name)
		replies++
	}
	if replies > 0 {
		if _, err := nc.Write(setup); err != nil {
			return fail(err)
		}
	}
	// The replies are single lines (+OK or -ERR ...); nothing follows
	// them, so nothing read here belongs to the caller.
	buf := make([]byte, 0, 512)
	tmp := make([]byte, 512)
	for replies > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			k, err := nc.Read(tmp)
			if err != nil {
				return fail(err)
			}
			if buf = append(buf, tmp[:k]...); len(buf) > pubMaxReply {
				return fail(fmt.Errorf("%w: connection setup: reply too long", errReply))
			}
			continue
		}
		if buf[0] == '-' {
			return fail(fmt.Errorf("%w: connection setup: %s", errReply, bytes.TrimSpace(buf[1:i])))
		}
		buf = buf[i+1:]
		replies--
	}
	if len(buf) > 0 {
		return fail(fmt.Errorf("%w: connection setup: unexpected data", errReply))
	}
	if !stop() {
		// ctx ended just now and its deadline may be set: too late.
		return fail(context.Cause(ctx))
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, nil
}
