package agent

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Chunk sizes of [Client.PutBlob], in raw bytes per client:put_blob event.
const (
	// DefaultPutChunk is the reference SDKs' chunk: as base64 in its
	// envelope it is about 350 KB, well under a server's default 1 MiB
	// message limit (maxHttpBufferSize).
	DefaultPutChunk = 256 << 10
	// MaxPutChunk is the largest chunk PutBlob sends (about 700 KB as
	// base64), so that a chunk still fits that limit.
	MaxPutChunk = 512 << 10
)

// ErrPutBlobUnsupported is returned (wrapped) by [Client.PutBlob] when the
// first chunk gets no answer in time: the Computer does not implement
// client:put_blob. The specification has no capability flag for it; an
// Agent finds out this way, and should then keep the bytes in its own
// context.
var ErrPutBlobUnsupported = errors.New("a2c: the Computer does not support client:put_blob (no answer to the first chunk)")

// PutOptions tune [Client.PutBlob].
type PutOptions struct {
	// NameHint suggests the landed file's name; the Computer sanitises it
	// and may ignore it. [Client.PutFile] defaults it to the file's name.
	NameHint string
	// ChunkSize is the raw bytes per chunk, 1..[MaxPutChunk]. Default
	// [DefaultPutChunk].
	ChunkSize int
}

// PutFile uploads the file at path to computer with [Client.PutBlob];
// o.NameHint defaults to the file's base name.
func (c *Client) PutFile(ctx context.Context, computer, path string, o PutOptions) (*smcp.PutBlobRet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("a2c: put_blob: %w", err)
	}
	defer f.Close()
	if o.NameHint == "" {
		o.NameHint = filepath.Base(path)
	}
	return c.PutBlob(ctx, computer, f, o)
}

// PutBlob uploads the bytes of r, from its current position to its end,
// to the landing root of computer through client:put_blob (A2C-SMCP
// 0.4.0), and returns the final ack: LandingPath (absolute, on the
// Computer's disk), TotalSize and SHA256.
//
// r is read twice: once to hash it (the first chunk declares the size and
// SHA-256), then, after seeking back, to send it in chunks, one at a
// time, each after the previous one's ack. The final ack's size and hash
// are checked against what was declared. Nothing resumes: a failed upload
// is started again from the beginning, under a new upload_id.
//
// Errors: a refusal by the Computer is its *smcp.Error (4019, with
// [smcp.Error.Reason] one of the smcp.Reason* values, or a server's
// 4103/404/...); no answer to the first chunk within the request timeout
// is [ErrPutBlobUnsupported]; an empty r is refused before anything is
// sent (the protocol has no empty upload); an Agent speaking a version
// without client:put_blob (0.3.x) fails with [errors.ErrUnsupported].
func (c *Client) PutBlob(ctx context.Context, computer string, r io.ReadSeeker, o PutOptions) (*smcp.PutBlobRet, error) {
	if !c.profile.PutBlob {
		return nil, fmt.Errorf("a2c: put_blob needs protocol 0.4 or later, this Agent speaks %s: %w", c.profile.Version, errors.ErrUnsupported)
	}
	chunk := o.ChunkSize
	switch {
	case chunk == 0:
		chunk = DefaultPutChunk
	case chunk < 0 || chunk > MaxPutChunk:
		return nil, fmt.Errorf("a2c: put_blob: chunk size %d is not in 1..%d", chunk, MaxPutChunk)
	}
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("a2c: put_blob: %w", err)
	}
	h := sha256.New()
	size, err := io.Copy(h, r)
	if err != nil {
		return nil, fmt.Errorf("a2c: put_blob: read: %w", err)
	}
	if size == 0 {
		return nil, errors.New("a2c: put_blob: nothing to upload (the protocol has no empty upload)")
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return nil, fmt.Errorf("a2c: put_blob: %w", err)
	}
	u := upload{c: c, computer: computer, size: size, sum: sum}
	if o.NameHint != "" {
		u.hint = &o.NameHint
	}
	u.agentJSON, u.computerJSON = jsonString(c.opts.Name), jsonString(computer)
	// Two chunk buffers: while one chunk is out and its ack awaited, the
	// next is read and encoded into the other (see prepare). One chunk is
	// in flight on the wire at a time, as the protocol wants.
	u.reserve = 256 + len(u.agentJSON) + len(u.computerJSON)
	if u.hint != nil {
		u.reserve += len(jsonString(*u.hint))
	}
	raw := make([]byte, chunk)
	var bufs [2][]byte
	cur := u.prepare(r, raw, &bufs[0], 0, chunk)
	for i := 1; ; i++ {
		if cur.err != nil {
			return nil, cur.err
		}
		end := cur.off + int64(cur.n)
		var next chan chunkBody
		if end < size {
			next = make(chan chunkBody, 1)
			go func(buf *[]byte) { next <- u.prepare(r, raw, buf, end, chunk) }(&bufs[i%2])
		}
		ret, err := u.send(ctx, cur)
		if next != nil {
			cur = <-next // the reader is never left running
		}
		switch {
		case err != nil:
			return nil, err
		case end == size:
			return ret, nil
		}
	}
}

// upload is one PutBlob in progress.
type upload struct {
	c        *Client
	computer string
	size     int64
	sum      string
	hint     *string
	id       string // assigned by the first ack

	// agentJSON and computerJSON are the names as JSON strings, escaped
	// as encoding/json does.
	agentJSON, computerJSON []byte
	// reserve is the room left before a chunk's blob for the fields
	// that precede it, which are written once the chunk is sent (the
	// upload_id of the second chunk is not known while it is prepared).
	reserve int
}

// chunkBody is a chunk read and encoded, waiting to be sent: buf holds
// `"blob":"<base64>"}` from index reserve (the payload's tail), with room
// before it for the fields that precede the blob.
type chunkBody struct {
	off int64
	n   int
	buf []byte
	err error
}

// prepare reads the chunk at off (at most chunk bytes) from r and encodes
// it, base64 straight into *buf (grown once, then reused): the payload
// is built with no copy of the chunk beyond that one encoding.
func (u *upload) prepare(r io.Reader, raw []byte, buf *[]byte, off int64, chunk int) chunkBody {
	n, err := io.ReadFull(r, raw[:min(int64(chunk), u.size-off)])
	if err != nil {
		return chunkBody{err: fmt.Errorf("a2c: put_blob: read at %d: %w (did the file change?)", off, err)}
	}
	const open, end = `"blob":"`, `"}`
	need := u.reserve + len(open) + base64.StdEncoding.EncodedLen(n) + len(end)
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	b := append((*buf)[:u.reserve], open...)
	b = base64.StdEncoding.AppendEncode(b, raw[:n]) // the alphabet needs no JSON escaping
	b = append(b, end...)
	return chunkBody{off: off, n: n, buf: b}
}

// payload completes the chunk's JSON: the fields before the blob, in the
// order encoding/json writes smcp.PutBlobReq, are written into the room
// left before it (or, should they not fit, ahead of a copy).
func (u *upload) payload(c chunkBody, reqID string, eof bool) []byte {
	p := make([]byte, 0, u.reserve)
	p = append(p, `{"agent":`...)
	p = append(p, u.agentJSON...)
	p = append(p, `,"req_id":`...)
	p = append(p, jsonString(reqID)...)
	p = append(p, `,"computer":`...)
	p = append(p, u.computerJSON...)
	if u.id != "" {
		p = append(p, `,"upload_id":`...)
		p = append(p, jsonString(u.id)...)
	}
	p = append(p, `,"chunk_offset":`...)
	p = strconv.AppendInt(p, c.off, 10)
	p = append(p, `,"eof":`...)
	p = strconv.AppendBool(p, eof)
	if u.id == "" {
		p = append(p, `,"total_size":`...)
		p = strconv.AppendInt(p, u.size, 10)
		p = append(p, `,"sha256":`...)
		p = append(p, jsonString(u.sum)...)
		if u.hint != nil {
			p = append(p, `,"name_hint":`...)
			p = append(p, jsonString(*u.hint)...)
		}
	}
	p = append(p, ',')
	if len(p) > u.reserve {
		return append(p, c.buf[u.reserve:]...)
	}
	start := u.reserve - len(p)
	copy(c.buf[start:], p)
	return c.buf[start:]
}

// jsonString is s as a JSON string, escaped as encoding/json does.
func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// send sends a prepared chunk and checks its ack.
func (u *upload) send(ctx context.Context, c chunkBody) (*smcp.PutBlobRet, error) {
	off := c.off
	eof := off+int64(c.n) == u.size
	args, err := u.c.callRaw(ctx, smcp.EventPutBlob, u.payload(c, NewReqID(), eof), u.c.opts.RequestTimeout)
	if err != nil {
		if u.id == "" && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %s did not answer within %s", ErrPutBlobUnsupported, u.computer, u.c.opts.RequestTimeout)
		}
		return nil, fmt.Errorf("a2c: put_blob at offset %d: %w", off, err)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("a2c: put_blob at offset %d: empty answer", off)
	}
	if e, ok := smcp.DecodeError(args[0]); ok {
		if u.id == "" && e.Code == smcp.CodeTimeout {
			return nil, fmt.Errorf("%w: %s did not answer in time (%w)", ErrPutBlobUnsupported, u.computer, e)
		}
		return nil, e
	}
	var ret smcp.PutBlobRet
	if err := json.Unmarshal(args[0], &ret); err != nil {
		return nil, fmt.Errorf("a2c: put_blob at offset %d: undecodable answer: %w", off, err)
	}
	switch {
	case u.id == "" && ret.UploadID == "", u.id != "" && ret.UploadID != u.id:
		return nil, fmt.Errorf("a2c: put_blob at offset %d: answer for upload %q, not %q", off, ret.UploadID, u.id)
	case ret.ChunkOffset != off:
		return nil, fmt.Errorf("a2c: put_blob: answer for offset %d, not %d", ret.ChunkOffset, off)
	}
	u.id = ret.UploadID
	if !eof {
		return &ret, nil
	}
	switch {
	case ret.LandingPath == "":
		return nil, errors.New("a2c: put_blob: the final answer has no landing_path")
	case ret.TotalSize == nil || *ret.TotalSize != u.size:
		return nil, fmt.Errorf("a2c: put_blob: the Computer stored %v bytes, not %d", ptrValue(ret.TotalSize), u.size)
	case !strings.EqualFold(ret.SHA256, u.sum):
		return nil, fmt.Errorf("a2c: put_blob: the Computer stored sha256 %.64q, not %s", ret.SHA256, u.sum)
	}
	return &ret, nil
}

func ptrValue(p *int64) any {
	if p == nil {
		return "no"
	}
	return *p
}
