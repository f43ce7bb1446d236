package files

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
)

// Encodings of a write's content.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
	EncodingRaw    = "raw"
)

// Encodings lists the accepted encodings in the published order.
var Encodings = []string{EncodingUTF8, EncodingBase64, EncodingRaw}

// FsWriteRequest is a write: POST /v2/fs/write's body, and /v1/file/write
// once its `file` is mapped to Path.
type FsWriteRequest struct {
	Path    string `json:"path" serde:"required"`
	Content string `json:"content" serde:"required"`
	// Encoding is utf-8 (default), base64 (decoded to bytes) or raw (each
	// character one byte).
	Encoding *string `json:"encoding"`
	// Append adds to the file in place instead of replacing it.
	Append bool `json:"append"`
	// LeadingNewline and TrailingNewline add "\n" around utf-8 content.
	LeadingNewline  bool `json:"leading_newline"`
	TrailingNewline bool `json:"trailing_newline"`
	Ownership       `json:"-"`
}

// FileWriteResult is a write's answer.
type FileWriteResult struct {
	File         string  `json:"file"`
	BytesWritten *uint64 `json:"bytes_written"`
}

// Write decodes the content and writes it, creating missing parent
// directories. A replace is atomic: the bytes go to a
// .aiod-write-<id>.part file next to the target, are synced and renamed
// over it, keeping the old file's mode (and, as root, its owner unless an
// owner was named), so a failure leaves the old content. Append writes in
// place. Content that does not decode is bad_request and touches nothing.
//
// A symbolic link is written through, whether its target exists or not:
// the chain of links is followed to its end (at most 40 links, else ELOOP,
// invalid_path), that path's missing parents are created, and the file is
// staged and renamed there; the links stay links. A hard link, though, is
// broken by a replace: the rename gives the written name a new inode, and
// the file's other names keep the old content (append, writing in place,
// keeps the link). A FIFO, socket or block device is refused as
// invalid_target "not a regular file", without an open that could block;
// an existing character device (/dev/null, /dev/full) is written in place.
func (e *Engine) Write(ctx context.Context, req FsWriteRequest) (*FileWriteResult, *fserr.Error) {
	const op = "write"
	abs, own, ferr := e.prepare(ctx, op, req.Path, req.Ownership)
	if ferr != nil {
		return nil, ferr
	}
	data, ferr := decodeContent(op, req)
	if ferr != nil {
		return nil, ferr
	}
	return inView(e, op, req.Path, func() (*FileWriteResult, *fserr.Error) {
		target, err := writeTarget(abs, own)
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		if req.Append {
			err = appendFile(target, data, own)
		} else {
			err = replaceFile(target, data, own, e.keepOwner())
		}
		if err != nil {
			return nil, fserr.From(op, req.Path, err)
		}
		return &FileWriteResult{File: req.Path, BytesWritten: ptr(uint64(len(data)))}, nil
	})
}

// decodeContent turns the request's content into the bytes to write.
func decodeContent(op string, req FsWriteRequest) ([]byte, *fserr.Error) {
	enc := EncodingUTF8
	if req.Encoding != nil {
		enc = *req.Encoding
	}
	switch enc {
	case EncodingUTF8:
		s := req.Content
		if req.LeadingNewline {
			s = "\n" + s
		}
		if req.TrailingNewline {
			s += "\n"
		}
		return []byte(s), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(req.Content)
		if err != nil {
			if b, err2 := base64.RawStdEncoding.DecodeString(req.Content); err2 == nil {
				return b, nil
			}
			return nil, fserr.New(op, req.Path, fserr.BadRequest, fmt.Sprintf("%s: invalid base64 content: %v", fserr.Phrase(op), err))
		}
		return b, nil
	case EncodingRaw:
		b := make([]byte, 0, len(req.Content))
		for i, r := range []rune(req.Content) {
			if r > 0xff {
				return nil, fserr.New(op, req.Path, fserr.BadRequest,
					fmt.Sprintf("%s: raw content character %d (U+%04X) does not fit in a byte", fserr.Phrase(op), i, r))
			}
			b = append(b, byte(r))
		}
		return b, nil
	}
	return nil, fserr.New(op, req.Path, fserr.BadRequest,
		fmt.Sprintf("%s: unknown encoding %q: expected utf-8, base64 or raw", fserr.Phrase(op), enc))
}

// appendFile adds data at the end of path, creating it (owned by o). A
// character device is written to; a FIFO or socket is ErrNotRegular.
func appendFile(path string, data []byte, o *owner) error {
	_, statErr := os.Lstat(path)
	f, _, err := openContent(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666, true)
	if err == nil {
		err = writeClose(f, data)
	}
	if err == nil && statErr != nil {
		err = o.chown(path)
	}
	return err
}

// openTemp creates the staging file of a replace; tests swap it to make
// staging fail.
var openTemp = func(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, ".aiod-write-"+newID()+".part"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
}

// replaceFile atomically replaces path's content with data: staged next
// to it and renamed over it. A chain of symbolic links is followed to its
// end, existing or not (the caller has created the parents, see
// writeTarget). Renaming gives path a new inode, so a hard link to the old
// file keeps the old content. A character device is written in place; a
// FIFO, socket or block device is ErrNotRegular. With keep and no o, the
// new file gets the old one's owner.
func replaceFile(path string, data []byte, o *owner, keep bool) error {
	target, err := linkTarget(path)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(target)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err == nil && fi.IsDir():
		return &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	case err == nil && fi.Mode()&fs.ModeCharDevice != 0:
		return writeInPlace(target, data)
	case err == nil && !fi.Mode().IsRegular():
		return &fs.PathError{Op: "open", Path: path, Err: fserr.ErrNotRegular}
	case err != nil:
		fi = nil
	}
	f, err := openTemp(filepath.Dir(target))
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := fillTemp(f, data, fi, o, keep); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// fillTemp writes, syncs and closes the staging file, giving it the old
// file's mode and the owner it should end with: o, else with keep the old
// file's.
func fillTemp(f *os.File, data []byte, old fs.FileInfo, o *owner, keep bool) error {
	err := func() error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		if old != nil {
			if err := f.Chmod(old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
				return err
			}
			if st, ok := old.Sys().(*syscall.Stat_t); ok && o == nil && keep {
				if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
		}
		if o != nil {
			if err := f.Chown(o.uid, o.gid); err != nil {
				return err
			}
		}
		return f.Sync()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeInPlace truncates and writes a character device.
func writeInPlace(path string, data []byte) error {
	f, _, err := openContent(path, os.O_WRONLY|os.O_TRUNC, 0, true)
	if err != nil {
		return err
	}
	return writeClose(f, data)
}

// writeClose writes data to f and closes it, reporting the first error.
func writeClose(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
