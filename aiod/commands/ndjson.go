package commands

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// frame is one NDJSON line of a streamed run. Fields a frame type does
// not use are omitted; seq numbers every frame in order.
type frame struct {
	Type         string `json:"type"`
	SessionID    string `json:"session_id,omitempty"`
	CommandID    string `json:"command_id,omitempty"`
	Stream       string `json:"stream,omitempty"`
	Data         string `json:"data,omitempty"`
	Offset       *int64 `json:"offset,omitempty"`
	LostFrom     *int64 `json:"lost_from,omitempty"`
	ResumeOffset *int64 `json:"resume_offset,omitempty"`
	Status       string `json:"status,omitempty"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	StdoutOffset *int64 `json:"stdout_offset,omitempty"`
	StderrOffset *int64 `json:"stderr_offset,omitempty"`
	Message      string `json:"message,omitempty"`
	Seq          int    `json:"seq"`
}

// streamPos tracks how far the client has read one stream.
type streamPos struct {
	name string
	at   int64
}

// frames turns a read of one stream into its gap and output frames.
func (s *streamPos) frames(data []byte, gap bool, start, end int64) []frame {
	var fs []frame
	if gap {
		lost, resume := s.at, start
		fs = append(fs, frame{Type: "gap", Stream: s.name, LostFrom: &lost, ResumeOffset: &resume})
		s.at = start
	}
	if len(data) > 0 {
		at := s.at
		fs = append(fs, frame{Type: "output", Stream: s.name, Data: base64.StdEncoding.EncodeToString(data), Offset: &at})
	}
	s.at = end
	return fs
}

// stream runs req and answers NDJSON frames until it exits: started,
// output (base64) and gap frames as bytes arrive, ping after pingEvery
// without a frame, then exit. A disconnect kills a sync command; an
// async one runs on. Failures before the start answer the JSON envelope.
func (p *Plane) stream(w http.ResponseWriter, r *http.Request, req Request) {
	ctx := r.Context()
	c, err := p.e.Start(ctx, req)
	if err != nil {
		api.WriteError(w, err, sessionsFull...)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	seq := 0
	emit := func(fs ...frame) bool {
		for _, f := range fs {
			seq++
			f.Seq = seq
			if enc.Encode(f) != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	gone := func() {
		if !req.Async {
			c.Kill(syscall.SIGKILL) //nolint:errcheck // it may have just exited
		}
	}
	if !emit(frame{Type: "started", SessionID: c.SessionID, CommandID: c.ID}) {
		gone()
		return
	}
	out, errs := streamPos{name: "stdout"}, streamPos{name: "stderr"}
	ping := time.NewTimer(p.e.pingEvery)
	defer ping.Stop()
	for {
		c.mu.Lock()
		wake := c.notify
		c.mu.Unlock()
		o := c.Read(out.at, errs.at)
		fs := append(out.frames(o.Stdout, o.StdoutGap, o.StdoutStart, o.StdoutOffset),
			errs.frames(o.Stderr, o.StderrGap, o.StderrStart, o.StderrOffset)...)
		if o.ExitCode != nil {
			so, se := o.StdoutOffset, o.StderrOffset
			fs = append(fs, frame{Type: "exit", Status: o.Status, ExitCode: o.ExitCode, StdoutOffset: &so, StderrOffset: &se})
		}
		if len(fs) > 0 {
			if !emit(fs...) {
				gone()
				return
			}
			ping.Reset(p.e.pingEvery)
		}
		if o.ExitCode != nil {
			return
		}
		select {
		case <-wake:
		case <-ping.C:
			if !emit(frame{Type: "ping"}) {
				gone()
				return
			}
			ping.Reset(p.e.pingEvery)
		case <-p.e.shutdown:
			emit(frame{Type: "error", Message: "aiod is shutting down"})
			return
		case <-ctx.Done():
			gone()
			return
		}
	}
}
