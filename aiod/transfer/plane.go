package transfer

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/fserr"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Plane serves the transfer routes over one [Engine].
type Plane struct {
	e   *Engine
	log *slog.Logger
}

// New returns a plane ready to [Plane.Mount], with cfg's zero fields set
// to their defaults.
func New(cfg Config) *Plane {
	e := NewEngine(cfg)
	return &Plane{e: e, log: e.log}
}

// Engine is the engine behind the routes, for other callers (MCP tools).
func (p *Plane) Engine() *Engine { return p.e }

// Close removes the staged files of transfers in flight (see
// [Engine.Close]).
func (p *Plane) Close(ctx context.Context) error { return p.e.Close(ctx) }

// Mount registers the plane's routes on mux. A GET pattern also serves
// HEAD.
func (p *Plane) Mount(mux *http.ServeMux) {
	mux.Handle("POST /v2/fs/upload", p.upload())
	mux.Handle("POST /v1/file/upload", p.upload(fserr.Failed200))
	download := api.Route[pathQuery, opened]{From: api.FromQuery, Op: p.open, Reply: p.serve, Fail: bareStatus}
	mux.Handle("GET /v2/fs/download", download)
	mux.Handle("GET /v1/file/download", download)
	mux.Handle("GET /v2/fs/tree", api.Route[pathQuery, tree]{From: api.FromQuery, Op: p.openTree, Reply: p.writeTree, Log: p.log})
	mux.Handle("PUT /v2/fs/tree", api.Route[pathQuery, *TreeResult]{From: api.FromQuery, Op: p.importTree, Log: p.log})
}

// upload serves POST /v2/fs/upload and /v1/file/upload: a multipart body
// with a "file" part and the target in a "path" field (or ?path=),
// answered with the [UploadResult]; over holds the route's exceptions
// to the status table (v1: file errors answer 200).
func (p *Plane) upload(over ...api.Override) http.Handler {
	return api.Route[uploadQuery, *UploadResult]{From: api.FromQuery, Override: over, Log: p.log,
		Op: func(r *http.Request, q uploadQuery) (*UploadResult, error) {
			path, user := deref(q.Path), deref(q.User)
			mr, err := multipartReader(r)
			if err != nil {
				return nil, fserr.New("upload", path, fserr.BadRequest, fserr.Phrase("upload")+": "+err.Error())
			}
			res, err := p.e.receive(r.Context(), mr, path, user)
			switch {
			case errors.Is(err, errNoFile):
				return nil, &serde.Error{Location: []string{"body", "file"}, Message: "missing field `file`", Type: serde.TypeMissing}
			case err != nil:
				return nil, fserr.From("upload", path, err)
			}
			return res, nil
		}}
}

// multipartReader is r.MultipartReader over a large read buffer, so the
// parser's small reads do not each become a socket read.
func multipartReader(r *http.Request) (*multipart.Reader, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil, http.ErrNotMultipart
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "multipart/form-data" && mt != "multipart/mixed") {
		return nil, http.ErrNotMultipart
	}
	if params["boundary"] == "" {
		return nil, http.ErrMissingBoundary
	}
	return multipart.NewReader(bufio.NewReaderSize(r.Body, 256<<10), params["boundary"]), nil
}

// opened is a download ready to stream.
type opened struct {
	src   *Source
	abort bool // change_policy=abort
}

// open opens a download. change_policy=abort refuses (409) a client
// whose If-Range or If-Match validator names an older state.
func (p *Plane) open(r *http.Request, q pathQuery) (opened, error) {
	src, err := p.e.Open(q.Path)
	if err != nil {
		return opened{}, fserr.From("download", q.Path, err)
	}
	abort := q.ChangePolicy != nil && *q.ChangePolicy == "abort"
	if abort && src.stale(r.Header) {
		src.Close()
		return opened{}, api.NewError(api.ErrConflict, "file changed since the client's validator")
	}
	return opened{src: src, abort: abort}, nil
}

// bareStatus answers a download failure: the bare status of its kind
// (404 missing, 400 directory or other non-regular file, 409 stale).
func bareStatus(w http.ResponseWriter, _ *http.Request, err error) { w.WriteHeader(api.Status(err)) }

// serve streams a download on GET and HEAD (/v2/fs/download,
// /v1/file/download): the raw bytes with Content-Type (by extension),
// Content-Disposition, ETag, Last-Modified and Accept-Ranges; Range,
// If-Range, If-Match, If-None-Match and If-Modified-Since as net/http's
// ServeContent honours them (206, 416 with "bytes */size", 304, 412).
// ServeContent's own failures are bare statuses too (416 keeps its
// "Content-Range: bytes */size", 412 and a read error's 500 carry
// nothing). With change_policy=abort the connection is aborted when the
// file changes while it streams.
func (p *Plane) serve(w http.ResponseWriter, r *http.Request, o opened) {
	src := o.src
	defer src.Close()
	h := w.Header()
	ct := mime.TypeByExtension(filepath.Ext(src.Name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	cd := mime.FormatMediaType("attachment", map[string]string{"filename": src.Name})
	if cd == "" {
		cd = "attachment"
	}
	h.Set("Content-Disposition", cd)
	h.Set("Etag", src.ETag)
	h.Set("Accept-Ranges", "bytes")
	bw := &bareErrors{ResponseWriter: w}
	if !o.abort {
		// The *os.File reaches the ResponseWriter's ReadFrom: sendfile.
		http.ServeContent(bw, r, src.Name, src.ModTime, src.File)
		return
	}
	g := &pinned{s: src}
	http.ServeContent(bw, r, src.Name, src.ModTime, g)
	if g.changed {
		// The deliberate way to cut a response net/http offers: the
		// client sees the transfer fail rather than end short but clean.
		panic(http.ErrAbortHandler)
	}
}

// tree is a directory open for export.
type tree struct {
	root *os.Root
	path string // as the client wrote it
}

func (p *Plane) openTree(_ *http.Request, q pathQuery) (tree, error) {
	root, err := p.e.openTree(q.Path)
	if err != nil {
		return tree{}, fserr.From("tree", q.Path, err)
	}
	return tree{root: root, path: q.Path}, nil
}

// writeTree serves GET /v2/fs/tree: the directory as application/x-tar.
// A failure after the stream started aborts the connection, so the
// client never mistakes a cut archive for a whole one.
func (p *Plane) writeTree(w http.ResponseWriter, r *http.Request, t tree) {
	defer t.root.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	if r.Method == http.MethodHead {
		return
	}
	if err := p.e.writeTree(r.Context(), t.root, w); err != nil {
		p.log.Warn("transfer: tree export cut", "path", t.path, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// importTree serves PUT /v2/fs/tree: extracts the tar body and answers
// the [TreeResult]; a body past the limit is 413.
func (p *Plane) importTree(r *http.Request, q pathQuery) (*TreeResult, error) {
	if r.ContentLength > p.e.cfg.MaxTreeBody {
		return nil, limitf(q.Path, "archive is larger than %d bytes", p.e.cfg.MaxTreeBody)
	}
	res, err := p.e.ImportTree(r.Context(), q.Path, deref(q.User), r.Body)
	if err != nil {
		return nil, fserr.From("tree", q.Path, err)
	}
	return res, nil
}
