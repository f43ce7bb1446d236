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
	buf := make([]byte, chunk)
	for off := int64(0); ; {
		n, err := io.ReadFull(r, buf[:min(int64(chunk), size-off)])
		if err != nil {
			return nil, fmt.Errorf("a2c: put_blob: read at %d: %w (did the file change?)", off, err)
		}
		ret, err := u.send(ctx, off, buf[:n])
		if err != nil {
			return nil, err
		}
		if off += int64(n); off == size {
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
}

// send sends the chunk at off and checks its ack.
func (u *upload) send(ctx context.Context, off int64, data []byte) (*smcp.PutBlobRet, error) {
	eof := off+int64(len(data)) == u.size
	blob := base64.StdEncoding.EncodeToString(data)
	req := smcp.PutBlobReq{Agent: u.c.opts.Name, ReqID: NewReqID(), Computer: u.computer,
		ChunkOffset: &off, EOF: &eof, Blob: &blob}
	if u.id == "" {
		req.TotalSize, req.SHA256, req.NameHint = &u.size, &u.sum, u.hint
	} else {
		req.UploadID = &u.id
	}
	args, err := u.c.call(ctx, smcp.EventPutBlob, req, u.c.opts.RequestTimeout)
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
