package computer

import (
	"github.com/a2c-smcp/a2c-go/blob"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// startUploads makes the Computer's landing for client:put_blob
// (Options.LandingRoot, Options.Uploads) when its protocol has uploads,
// so that the orphaned .part files of an earlier run are collected at
// start. Called once by New.
func (c *Computer) startUploads() {
	if !c.profile.PutBlob {
		return
	}
	l, err := blob.NewLanding(c.opts.LandingRoot, c.opts.Uploads, c.log)
	if err != nil {
		// Only a root that cannot be made absolute fails: refuse every
		// upload (forbidden), as with no root.
		c.log.Error("put_blob: landing root unusable; uploads are refused", "root", c.opts.LandingRoot, "err", err)
		l, _ = blob.NewLanding("", c.opts.Uploads, c.log)
	}
	c.uploads.Store(l)
}

// stopUploads closes the landing: its janitor stops and the uploads in
// progress end (their .part files removed). A chunk that arrives later
// finds the closed landing and is refused. Called by Close, and by New
// when it fails.
func (c *Computer) stopUploads() {
	if l := c.uploads.Load(); l != nil {
		l.Close()
	}
}

// putBlob handles one client:put_blob chunk (dispatched only when the
// profile has put_blob). It runs on the connection's reader: the chunk is
// decoded and judged against the landing's state here, in memory, and
// the rest runs on a goroutine of its own with blob.Pending.Stage: the
// base64 is decoded and judged at once, and a chunk that is not the last
// is answered before it is on disk, its write and hashing overlapping
// the ack's way to the Agent and the next chunk's way back. The final
// chunk is answered only once the file is written, checked and landed; a
// write that fails behind an early answer is the next chunk's answer
// (4019 io_error). The Agent sends a chunk only after the previous ack,
// the landing refuses a chunk of an upload whose previous chunk is not
// yet answered, and Stage makes a chunk wait for the write before it, so
// an upload's chunks are written in order and at most two of them (one
// being written, one waiting) are in memory per open upload
// (Options.Uploads.MaxConcurrent).
func (c *Computer) putBlob(e *sio.Event, raw []byte) {
	var req smcp.PutBlobReq
	// DecodePutBlob answers as c.decode's DecodeRequest would, in one pass
	// over a payload that is mostly its blob (which it does not copy: raw
	// is the event's, never modified).
	if err := smcp.DecodePutBlob(raw, &req); err != nil {
		answer(e, err)
		return
	}
	if req.Computer != c.opts.Name {
		answer(e, smcp.NewError(smcp.CodeNotFound, "request addressed to another Computer"))
		return
	}
	l := c.uploads.Load()
	if l == nil { // not reached: put_blob is dispatched only when startUploads made one
		answer(e, smcp.BlobWriteFailed(smcp.ReasonForbidden, nil))
		return
	}
	p, err := l.Accept(&req)
	if err != nil {
		c.log.Debug("put_blob: chunk refused", "agent", req.Agent, "req_id", req.ReqID, "reason", err.Reason())
		answer(e, err)
		return
	}
	go func() {
		ret, err := p.Stage()
		if err != nil {
			c.log.Debug("put_blob: chunk refused", "agent", req.Agent, "req_id", req.ReqID, "reason", err.Reason())
			answer(e, err)
			return
		}
		answer(e, ret)
	}()
}
