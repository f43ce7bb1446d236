package blob

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Defaults of [UploadOptions], those of the reference Python SDK.
const (
	DefaultUploadMaxBytes      = 100 << 20
	DefaultUploadMaxConcurrent = 4
	DefaultUploadIdleTimeout   = 120 * time.Second
)

// PartDir is the folder, directly under a landing root, that holds the
// uploads in progress as <upload_id>.part files.
const PartDir = ".a2c-upload"

// maxNameFragment bounds the sanitised name_hint in a landed file's name.
const maxNameFragment = 64

// UploadOptions bound the client:put_blob sessions of a [Landing]; zero
// values take the defaults.
type UploadOptions struct {
	// MaxBytes is the largest upload accepted (its declared total_size).
	// Default [DefaultUploadMaxBytes].
	MaxBytes int64
	// MaxConcurrent is how many uploads may be open at once. Default
	// [DefaultUploadMaxConcurrent].
	MaxConcurrent int
	// IdleTimeout ends an upload that receives no chunk for this long.
	// Default [DefaultUploadIdleTimeout].
	IdleTimeout time.Duration
	// Do, when set, runs every path operation of the landing: making the
	// root and its .a2c-upload folder, resolving the root, creating,
	// renaming and removing .part files, and the janitor's listing,
	// stat-ing and removal of orphans. Nil runs them in place. A
	// sandboxed aiod sets it to its sandbox's Do: its landing root lies
	// in the workspace, which the sandbox can write, so path work done
	// there by the daemon (root, on the host) would follow any symbolic
	// link a sandbox process plants and could write anywhere on the
	// host; under the sandbox's Do, paths, links included, resolve in
	// the sandbox's view, permissions are the sandbox account's, and the
	// files are born that account's, for the sandbox's processes to use.
	// Content is written outside Do, through the file it opened, so no
	// Do thread is held while an upload streams.
	//
	// A landing under Do trusts the sandbox with its own uploads: the
	// .part of an upload in progress is the sandbox account's file, so a
	// sandbox process may change it while the Computer writes it (the
	// SHA-256 checked is that of the bytes the Computer wrote, not of
	// what lands), as it may change the landed file afterwards anyway.
	Do func(func() error) error
}

func (o UploadOptions) withDefaults() UploadOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultUploadMaxBytes
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultUploadMaxConcurrent
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultUploadIdleTimeout
	}
	return o
}

// Landing receives client:put_blob uploads into a landing root on the
// Computer's disk. It is the Computer side of the write channel:
//
//   - An upload is a session named by a random upload_id (32 hex digits)
//     and bound to the Agent that opened it: a chunk naming another
//     Agent's upload, an unknown one or an expired one is refused with
//     invalid_upload and leaves the session alone.
//   - Bytes go to <root>/.a2c-upload/<upload_id>.part as they arrive,
//     hashed and counted on the way, so memory is bounded by one chunk
//     per open session, never by the file. Chunks must come in order
//     (chunk_offset equal to the bytes received).
//   - After the last chunk the size and SHA-256 are checked and the file
//     is renamed, without ever replacing a file, to
//     <root>/<upload_id>[_<name>], where name is the sanitised name_hint
//     ([SanitizeName]). The landing path is absolute and inside the real
//     root by construction: the name has no separator and the root is
//     resolved through its symbolic links first. Every path operation
//     runs through [UploadOptions.Do], so on a sandboxed Computer that
//     resolution, and the path itself, are in the sandbox's view.
//   - Any 4019 answer to a chunk of an open upload ends that upload and
//     removes its .part: nothing resumes, the Agent starts again with a
//     new upload_id. After integrity, too_large or forbidden no partial
//     file is visible.
//   - Sessions are bounded: IdleTimeout, MaxConcurrent (busy) and
//     MaxBytes (too_large); a janitor goroutine, stopped by Close, expires
//     idle sessions and removes orphaned .part files (those of no open
//     session, untouched for IdleTimeout, such as a crashed process
//     left). Landed files are never collected: they are the user's.
//
// A Landing with no root refuses every upload with forbidden and writes
// nothing, as the specification fails closed. Its methods are safe for
// concurrent use.
type Landing struct {
	root string // absolute, as configured; "" refuses everything
	opts UploadOptions
	log  *slog.Logger
	now  func() time.Time

	mu       sync.Mutex
	sessions map[string]*session // by upload_id
	closed   bool
	inflight sync.WaitGroup // Pending.Finish calls running

	stop chan struct{}
	done chan struct{}
}

// session is one open upload. Its mutable fields (file, hash, received,
// buf, pending, werr) are used only by the one chunk that holds it busy
// and by the background write that chunk may leave behind (see
// Pending.Stage), which the next chunk waits for before it touches them;
// busy, writing and last are guarded by Landing.mu.
type session struct {
	id, agent string
	total     int64
	sum       string // declared, lower case
	name      string // landed file name
	busy      bool   // a chunk is admitted and not yet answered
	writing   bool   // a chunk answered early is still being written
	last      time.Time

	// pending is closed once the background write of the previous chunk
	// is over (nil when there is none); werr is then its failure.
	pending chan struct{}
	werr    *smcp.Error

	dir      string // the real root, once the .part is open
	part     string
	file     *os.File
	hash     hash.Hash
	received int64
	buf      []byte
}

// NewLanding returns a landing for root, which is made absolute (it is
// created, mode 0700, at the first upload if missing). An empty root
// refuses every upload. log may be nil. A janitor goroutine runs until
// [Landing.Close]; it first removes the orphaned .part files of earlier
// runs.
func NewLanding(root string, o UploadOptions, log *slog.Logger) (*Landing, error) {
	return newLanding(root, o, log, time.Now)
}

func newLanding(root string, o UploadOptions, log *slog.Logger, now func() time.Time) (*Landing, error) {
	if root != "" {
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, fmt.Errorf("blob: landing root: %w", err)
		}
		root = abs
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Landing{root: root, opts: o.withDefaults(), log: log, now: now,
		sessions: make(map[string]*session), stop: make(chan struct{}), done: make(chan struct{})}
	if root == "" {
		close(l.done)
		return l, nil
	}
	go l.janitor()
	return l, nil
}

// Root is the landing root as configured (absolute), or "".
func (l *Landing) Root() string { return l.root }

// Options are the landing's bounds, defaults applied.
func (l *Landing) Options() UploadOptions { return l.opts }

// Close stops the janitor, waits for the chunks being written and ends
// every open upload (their .part files are removed). Later chunks are
// refused with io_error.
func (l *Landing) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.inflight.Wait()
	l.mu.Lock()
	open := make([]*session, 0, len(l.sessions))
	for _, s := range l.sessions {
		open = append(open, s)
	}
	clear(l.sessions)
	l.mu.Unlock()
	for _, s := range open {
		l.discard(s)
	}
}

// janitor expires idle sessions and collects orphaned .part files, at
// start and then every half IdleTimeout (between 1 s and 1 min).
func (l *Landing) janitor() {
	defer close(l.done)
	every := min(max(l.opts.IdleTimeout/2, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		l.Sweep()
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

// Sweep ends the sessions idle for longer than IdleTimeout and removes
// the orphaned .part files: regular files named <upload_id>.part directly
// in <root>/.a2c-upload, of no open session, last modified more than
// IdleTimeout ago. Nothing outside that folder is touched. The janitor
// calls it; it is exported for tests and tools.
func (l *Landing) Sweep() {
	if l.root == "" {
		return
	}
	now := l.now()
	l.mu.Lock()
	var idle []*session
	for id, s := range l.sessions {
		if !s.busy && !s.writing && now.Sub(s.last) > l.opts.IdleTimeout {
			idle = append(idle, s)
			delete(l.sessions, id)
		}
	}
	l.mu.Unlock()
	for _, s := range idle {
		l.log.Info("put_blob: upload expired", "upload_id", s.id, "agent", s.agent, "received", s.received)
		l.discard(s)
	}
	var dir string
	var old []string // orphans by file name
	err := l.do(func() error {
		real, err := filepath.EvalSymlinks(l.root)
		if err != nil {
			return nil // no root yet: nothing to collect
		}
		dir = filepath.Join(real, PartDir)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return nil
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			id, ok := strings.CutSuffix(e.Name(), ".part")
			if !ok || !smcp.ValidUploadID(id) || !e.Type().IsRegular() {
				continue
			}
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > l.opts.IdleTimeout {
				old = append(old, e.Name())
			}
		}
		return nil
	})
	if err != nil {
		l.log.Warn("put_blob: cannot list the uploads in progress", "dir", dir, "err", err)
		return
	}
	l.mu.Lock()
	old = slices.DeleteFunc(old, func(name string) bool {
		_, open := l.sessions[strings.TrimSuffix(name, ".part")]
		return open
	})
	l.mu.Unlock()
	if len(old) == 0 {
		return
	}
	errs := make([]error, len(old))
	if err := l.do(func() error {
		for i, name := range old {
			errs[i] = os.Remove(filepath.Join(dir, name))
		}
		return nil
	}); err != nil {
		l.log.Warn("put_blob: cannot remove the orphaned uploads", "dir", dir, "err", err)
		return
	}
	for i, name := range old {
		if err := errs[i]; err == nil {
			l.log.Info("put_blob: removed an orphaned upload", "file", name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("put_blob: cannot remove an orphaned upload", "file", name, "err", err)
		}
	}
}

// do runs f, a landing's path work, through [UploadOptions.Do] if set.
func (l *Landing) do(f func() error) error {
	if l.opts.Do == nil {
		return f()
	}
	return l.opts.Do(f)
}

// Pending is a chunk [Landing.Accept] admitted; [Pending.Finish] writes
// it. Exactly one Finish must follow every successful Accept.
type Pending struct {
	l   *Landing
	s   *session
	req *smcp.PutBlobReq
}

// Put handles one chunk: [Landing.Accept], then [Pending.Finish]. It
// returns the ack or the 4019 answer.
func (l *Landing) Put(req *smcp.PutBlobReq) (*smcp.PutBlobRet, *smcp.Error) {
	p, err := l.Accept(req)
	if err != nil {
		return nil, err
	}
	return p.Finish()
}

// Accept judges a chunk against the landing's state without writing it
// (at most it removes the .part of an upload it ends), so that it may run
// on a connection's reader: it refuses the chunk
// (the 4019 answer) or admits it and holds its upload busy until
// [Pending.Finish]. A chunk of an upload that is still busy (sent before
// the previous chunk's ack) is refused with range.
//
// A first chunk is judged in this order: no root (forbidden), its fields
// ([smcp.PutBlobReq.Check]: invalid_declaration, or range for an offset
// other than 0), its size (too_large, details.total_size the declared
// size), the concurrency cap (busy). A later chunk: the upload_id
// (invalid_upload: malformed, unknown, expired or another Agent's), its
// fields (invalid_declaration), its offset (range, details.chunk_offset
// the bytes received).
func (l *Landing) Accept(req *smcp.PutBlobReq) (*Pending, *smcp.Error) {
	l.mu.Lock()
	p, ended, err := l.acceptLocked(req)
	var writing chan struct{}
	if ended != nil {
		// The session is not busy (acceptLocked checked), so its last
		// chunk's Stage is over, but the background write that Stage
		// started may not be: its file must not be closed under it. The
		// discard then waits for that write, off the caller's goroutine
		// (the connection's reader), and Close waits for the discard.
		writing = ended.pending
		if writing != nil {
			l.inflight.Add(1)
		}
	}
	l.mu.Unlock()
	switch {
	case writing != nil:
		go func() {
			defer l.inflight.Done()
			<-writing
			l.discard(ended)
		}()
	case ended != nil:
		l.discard(ended)
	}
	return p, err
}

// acceptLocked is Accept under l.mu; ended is a session it ended, whose
// file the caller discards once the lock is released.
func (l *Landing) acceptLocked(req *smcp.PutBlobReq) (p *Pending, ended *session, err *smcp.Error) {
	if l.closed {
		return nil, nil, smcp.BlobWriteFailed(smcp.ReasonIOError, nil)
	}
	if req.First() {
		p, err = l.acceptFirst(req)
		return p, nil, err
	}
	if err := req.Check(); err != nil && err.Reason() == smcp.ReasonInvalidUpload {
		return nil, nil, err
	}
	id := *req.UploadID
	idDetail := map[string]any{"upload_id": id}
	s := l.sessions[id]
	if s == nil || s.agent != req.Agent {
		return nil, nil, smcp.BlobWriteFailed(smcp.ReasonInvalidUpload, idDetail)
	}
	if s.busy {
		return nil, nil, smcp.BlobWriteFailed(smcp.ReasonRange, map[string]any{"upload_id": id, "chunk_offset": s.received})
	}
	if !s.writing && l.now().Sub(s.last) > l.opts.IdleTimeout {
		delete(l.sessions, id)
		return nil, s, smcp.BlobWriteFailed(smcp.ReasonInvalidUpload, idDetail)
	}
	if err := req.Check(); err != nil {
		delete(l.sessions, id)
		return nil, s, err
	}
	if *req.ChunkOffset != s.received {
		delete(l.sessions, id)
		return nil, s, smcp.BlobWriteFailed(smcp.ReasonRange, map[string]any{"upload_id": id, "chunk_offset": s.received})
	}
	s.busy = true
	l.inflight.Add(1)
	return &Pending{l: l, s: s, req: req}, nil, nil
}

func (l *Landing) acceptFirst(req *smcp.PutBlobReq) (*Pending, *smcp.Error) {
	if l.root == "" {
		return nil, smcp.BlobWriteFailed(smcp.ReasonForbidden, nil)
	}
	if err := req.Check(); err != nil {
		return nil, err
	}
	if *req.TotalSize > l.opts.MaxBytes {
		return nil, smcp.BlobWriteFailed(smcp.ReasonTooLarge, map[string]any{"total_size": *req.TotalSize})
	}
	now := l.now()
	n := 0
	for _, s := range l.sessions {
		if s.busy || s.writing || now.Sub(s.last) <= l.opts.IdleTimeout {
			n++ // an expired session (the janitor's to end) holds no place
		}
	}
	if n >= l.opts.MaxConcurrent {
		return nil, smcp.BlobWriteFailed(smcp.ReasonBusy, nil)
	}
	id := newUploadID()
	name := id
	if frag := SanitizeName(derefString(req.NameHint)); frag != "" {
		name += "_" + frag
	}
	s := &session{id: id, agent: req.Agent, total: *req.TotalSize, sum: strings.ToLower(*req.SHA256),
		name: name, busy: true, last: now, hash: sha256.New()}
	l.sessions[id] = s
	l.inflight.Add(1)
	return &Pending{l: l, s: s, req: req}, nil
}

// discard closes and removes the .part of a session no longer listed.
func (l *Landing) discard(s *session) {
	if s.file != nil {
		_ = s.file.Close()
		s.file = nil
	}
	if s.part != "" {
		part := s.part
		if err := l.do(func() error { return os.Remove(part) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("put_blob: cannot remove an upload in progress", "file", s.part, "err", err)
		}
		s.part = ""
	}
}

// Finish writes the admitted chunk and returns its ack: for the last
// chunk, once the file is checked and landed, with landing_path,
// total_size and sha256. Its refusals are invalid_declaration (blob not
// valid base64), range (past total_size, or a last chunk that does not
// end there), integrity (sha256 mismatch), forbidden (the root or its
// .a2c-upload folder cannot be made or written, at the first chunk) and
// io_error (any other disk failure); each ends the upload.
func (p *Pending) Finish() (*smcp.PutBlobRet, *smcp.Error) { return p.finish(false) }

// Stage is Finish for a Computer that answers as early as it can. The
// chunk is decoded and judged (invalid_declaration, range) at once, but
// a chunk that is not the last is answered before it is on disk: its
// write and hashing go on in the background, behind the ack, while the
// ack travels to the Agent and the next chunk comes back. So:
//
//   - the next chunk of the upload waits for that write before it is
//     itself written (Stage blocks until then), and a failure of it is
//     that chunk's answer: io_error, which ends the upload;
//   - the last chunk (eof) is answered only once every byte is written,
//     the size and SHA-256 checked and the file landed, as with Finish;
//   - memory stays bounded: the Agent sends a chunk only after the
//     previous ack, and that ack waits for the write before it, so an
//     upload holds at most one chunk being written and one waiting.
//
// The answers and their 4019 reasons are those of Finish; only an
// io_error of a write may come one chunk late.
func (p *Pending) Stage() (*smcp.PutBlobRet, *smcp.Error) { return p.finish(true) }

func (p *Pending) finish(early bool) (*smcp.PutBlobRet, *smcp.Error) {
	l, s, req := p.l, p.s, p.req
	defer l.inflight.Done()
	ret, err := l.write(s, req, early)
	if err != nil {
		l.discard(s) // s is still busy: no one else touches its file
	}
	l.mu.Lock()
	s.busy = false
	s.last = l.now()
	if err != nil || ret.LandingPath != "" {
		delete(l.sessions, s.id)
	}
	l.mu.Unlock()
	return ret, err
}

// write is Finish's and Stage's disk work; s is busy, so only this
// goroutine uses its file fields (once the background write of the
// previous chunk, if any, is over). With early, a chunk that is not the
// last is written in the background and answered now.
func (l *Landing) write(s *session, req *smcp.PutBlobReq, early bool) (*smcp.PutBlobRet, *smcp.Error) {
	idDetail := map[string]any{"upload_id": s.id}
	if s.pending != nil {
		<-s.pending
		s.pending = nil
		if s.werr != nil {
			return nil, s.werr
		}
	}
	// A view of the string's bytes (read only) saves a copy of the chunk.
	b64 := unsafe.Slice(unsafe.StringData(*req.Blob), len(*req.Blob))
	if bytes.IndexByte(b64, '\r') >= 0 || bytes.IndexByte(b64, '\n') >= 0 {
		// encoding/base64 would skip them; the specification's senders
		// never send them.
		return nil, smcp.BlobWriteFailed(smcp.ReasonInvalidDeclaration, idDetail)
	}
	need := decodedLen(len(b64))
	if cap(s.buf) < need || cap(s.buf) > 4*need+4096 { // near the chunk size
		s.buf = make([]byte, need)
	}
	n, ok := decodeBase64(s.buf[:need], b64)
	if !ok {
		return nil, smcp.BlobWriteFailed(smcp.ReasonInvalidDeclaration, idDetail)
	}
	chunk := s.buf[:n]
	end := s.received + int64(n)
	if end > s.total || (*req.EOF && end != s.total) {
		return nil, smcp.BlobWriteFailed(smcp.ReasonRange, map[string]any{"upload_id": s.id, "chunk_offset": s.received})
	}
	if s.file == nil {
		if err := l.open(s); err != nil {
			return nil, err
		}
	}
	ret := &smcp.PutBlobRet{UploadID: s.id, ChunkOffset: *req.ChunkOffset, ReqID: req.ReqID}
	if early && !*req.EOF {
		s.received = end
		done := make(chan struct{})
		s.pending, s.werr = done, nil
		l.mu.Lock()
		s.writing = true
		l.mu.Unlock()
		l.inflight.Add(1) // Close waits for it
		go func() {
			defer l.inflight.Done()
			werr := l.writeChunk(s, chunk)
			if werr != nil {
				l.discard(s) // the next chunk answers io_error and ends the upload
			}
			s.werr = werr
			l.mu.Lock()
			s.writing = false
			s.last = l.now()
			l.mu.Unlock()
			close(done)
		}()
		return ret, nil
	}
	if err := l.writeChunk(s, chunk); err != nil {
		return nil, err
	}
	s.received = end
	if !*req.EOF {
		return ret, nil
	}
	sum := hex.EncodeToString(s.hash.Sum(nil))
	if sum != s.sum {
		l.log.Warn("put_blob: sha256 mismatch; upload discarded", "upload_id", s.id, "agent", s.agent)
		return nil, smcp.BlobWriteFailed(smcp.ReasonIntegrity, idDetail)
	}
	err := s.file.Close()
	s.file = nil
	if err != nil {
		l.log.Warn("put_blob: close failed", "upload_id", s.id, "err", err)
		return nil, smcp.BlobWriteFailed(smcp.ReasonIOError, idDetail)
	}
	path, werr := l.land(s)
	if werr != nil {
		return nil, werr
	}
	s.part = "" // renamed: nothing left to discard
	s.buf = nil
	total := s.total
	ret.LandingPath, ret.TotalSize, ret.SHA256 = path, &total, sum
	l.log.Info("put_blob: upload landed", "upload_id", s.id, "agent", s.agent, "path", path, "bytes", total)
	return ret, nil
}

// writeChunk appends chunk to the session's .part and its hash.
func (l *Landing) writeChunk(s *session, chunk []byte) *smcp.Error {
	if _, err := s.file.Write(chunk); err != nil {
		l.log.Warn("put_blob: write failed", "upload_id", s.id, "err", err)
		return smcp.BlobWriteFailed(smcp.ReasonIOError, map[string]any{"upload_id": s.id})
	}
	s.hash.Write(chunk)
	return nil
}

// open creates the root (mode 0700) and its .a2c-upload folder if
// missing, resolves the root's real path and creates the session's .part
// file (exclusive, not following a link), all of it in one
// [UploadOptions.Do]. Failure is forbidden: the root is not writable.
func (l *Landing) open(s *session) *smcp.Error {
	forbidden := func(what string, err error) *smcp.Error {
		l.log.Warn("put_blob: landing root not writable", "root", l.root, "step", what, "err", err)
		return smcp.BlobWriteFailed(smcp.ReasonForbidden, map[string]any{"upload_id": s.id})
	}
	step := "reach the root"
	var real, part string
	var f *os.File
	err := l.do(func() error {
		step = "create root"
		if err := os.MkdirAll(l.root, 0o700); err != nil {
			return err
		}
		step = "resolve root"
		var err error
		if real, err = filepath.EvalSymlinks(l.root); err != nil {
			return err
		}
		dir := filepath.Join(real, PartDir)
		step = "create " + PartDir
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		step = PartDir + " is not a folder"
		if fi, err := os.Lstat(dir); err != nil {
			return err
		} else if !fi.IsDir() {
			return errNotDir
		}
		step = "create .part"
		part = filepath.Join(dir, s.id+".part")
		f, err = os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
		return err
	})
	if err != nil {
		if f != nil { // f ran to its end, but Do failed after it
			_ = f.Close()
			_ = l.do(func() error { return os.Remove(part) })
		}
		return forbidden(step, err)
	}
	s.dir, s.part, s.file = real, part, f
	return nil
}

// errNotDir says a path is not a directory.
var errNotDir = errors.New("not a directory")

// land moves the finished .part to its name in the real root, never
// replacing a file: when the name is taken it tries <id>-1[_name], then
// -2, up to -99. The renames run in one [UploadOptions.Do].
func (l *Landing) land(s *session) (string, *smcp.Error) {
	base, frag, _ := strings.Cut(s.name, "_")
	var dst string
	err := l.do(func() error {
		for i := 0; i < 100; i++ {
			name := base
			if i > 0 {
				name += "-" + strconv.Itoa(i)
			}
			if frag != "" {
				name += "_" + frag
			}
			to := filepath.Join(s.dir, name)
			if filepath.Dir(to) != s.dir { // the fence; cannot fail for a name without separators
				break
			}
			err := renameNoReplace(s.part, to)
			if err == nil {
				dst = to
				return nil
			}
			if !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		return errNoFreeName
	})
	if err != nil {
		l.log.Warn("put_blob: cannot land the upload", "upload_id", s.id, "err", err)
		return "", smcp.BlobWriteFailed(smcp.ReasonIOError, map[string]any{"upload_id": s.id})
	}
	return dst, nil
}

// errNoFreeName: every name land tries is taken.
var errNoFreeName = errors.New("no free name to land the upload")

// SanitizeName turns a name_hint into a file name fragment: every run of
// characters outside [A-Za-z0-9._-] (separators and "..", spaces,
// non-ASCII) becomes one "_", leading and trailing ".", "_" and "-" are
// trimmed and the result is cut to 64 bytes (and trimmed again). It may
// return "" (the hint is then ignored). The fragment never contains a
// separator and never starts with a dot.
func SanitizeName(hint string) string {
	var b strings.Builder
	run := false
	for _, r := range hint {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.WriteRune(r)
			run = false
			continue
		}
		if !run {
			b.WriteByte('_')
			run = true
		}
	}
	s := strings.Trim(b.String(), "._-")
	if len(s) > maxNameFragment {
		s = strings.Trim(s[:maxNameFragment], "._-")
	}
	return s
}

func newUploadID() string {
	var b [smcp.UploadIDLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// linkNoReplace moves src to dst with a hard link, which fails when dst
// exists, and removes src.
func linkNoReplace(src, dst string) error {
	if err := os.Link(src, dst); err != nil {
		return err
	}
	return os.Remove(src)
}
