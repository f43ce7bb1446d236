package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Templates from snapshots: a name for a snapshot of a whole machine,
// which a create's template field starts a machine from (as
// from_snapshot does). A template is made from a snapshot there is, or
// built: a fresh machine runs the build commands one after the other,
// is snapshotted, and ends. A template's snapshot is in use while the
// template is (DELETE of the snapshot answers 409).

// TemplateRequest is the body of POST /v2/templates: a name and either
// FromSnapshot or Build.
type TemplateRequest struct {
	Name         string   `json:"name"`
	FromSnapshot string   `json:"from_snapshot,omitempty"`
	Build        []string `json:"build,omitempty"`
	// Network and Egress are the build machine's ("none" by default: a
	// build that fetches packages needs "egress").
	Network string  `json:"network,omitempty"`
	Egress  *Egress `json:"egress,omitempty"`
	// BuildTimeoutS bounds the whole build (default 600, at most 3600).
	BuildTimeoutS int `json:"build_timeout_s,omitempty"`
}

// Template is a template made from a snapshot.
type Template struct {
	Name       string    `json:"name"`
	SnapshotID string    `json:"snapshot_id"`
	CreatedAt  time.Time `json:"created_at"`
	// Build is the commands it was built with (absent: made from a
	// snapshot).
	Build []string `json:"build,omitempty"`
}

// TemplateList is the answer of GET /v2/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// Limits of a template's build.
const (
	maxBuildSteps       = 64
	maxBuildStep        = 16 << 10
	defaultBuildTimeout = 600
	maxBuildTimeout     = 3600
)

// CreateTemplate makes a template (see TemplateRequest). Errors are
// *Error: 400 for bad input, 409 for a name taken, 422 for a build
// command that failed (its output's end in the message).
func (p *Pool) CreateTemplate(ctx context.Context, req TemplateRequest) (Template, error) {
	if err := p.snapshotsOffered(); err != nil {
		return Template{}, err
	}
	if !templateName.MatchString(req.Name) || req.Name == BaseTemplate {
		return Template{}, badField("name", "1 to 64 of [a-z0-9_.-], and base is taken")
	}
	if (req.FromSnapshot == "") == (len(req.Build) == 0) {
		return Template{}, badField("build", "give from_snapshot or build (a list of commands), one of them")
	}
	if len(req.Build) > maxBuildSteps {
		return Template{}, badField("build", fmt.Sprintf("holds %d commands; at most %d", len(req.Build), maxBuildSteps))
	}
	for i, c := range req.Build {
		if strings.TrimSpace(c) == "" || len(c) > maxBuildStep || strings.IndexByte(c, 0) >= 0 {
			return Template{}, badField(fmt.Sprintf("build[%d]", i), fmt.Sprintf("must be a command of 1 to %d bytes with no NUL", maxBuildStep))
		}
	}
	if req.FromSnapshot != "" && (req.Network != "" || req.Egress != nil || req.BuildTimeoutS != 0) {
		return Template{}, badField("network", "network, egress and build_timeout_s apply to a build")
	}
	timeout := req.BuildTimeoutS
	if timeout == 0 {
		timeout = defaultBuildTimeout
	}
	if timeout < 0 || timeout > maxBuildTimeout {
		return Template{}, badField("build_timeout_s", fmt.Sprintf("must be a whole number of seconds from 1 to %d (0: %d)", maxBuildTimeout, defaultBuildTimeout))
	}
	if err := p.reserveTemplate(req.Name); err != nil {
		return Template{}, err
	}
	t := Template{Name: req.Name, SnapshotID: req.FromSnapshot, Build: req.Build}
	var err error
	if len(req.Build) > 0 {
		t.SnapshotID, err = p.build(ctx, req, time.Duration(timeout)*time.Second)
	} else if _, err = p.GetSnapshot(req.FromSnapshot); err != nil {
		err = badField("from_snapshot", fmt.Sprintf("no snapshot %q", clip(req.FromSnapshot, 64)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.snapshots[t.SnapshotID] == nil { // deleted meanwhile (checked, then taken, under one lock)
		err = &Error{Status: http.StatusConflict, Message: fmt.Sprintf("snapshot %s was deleted while the template was made", t.SnapshotID)}
	}
	if err != nil {
		delete(p.templates, req.Name)
		return Template{}, err
	}
	t.CreatedAt = time.Now().UTC()
	p.templates[req.Name] = &t
	p.wakeRefill()
	return t, nil
}

// reserveTemplate takes name for a template being made (a nil entry),
// or answers 409 when a template (of either kind) has it.
func (p *Pool) reserveTemplate(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.cfg.Templates[name]; ok {
		return &Error{Status: http.StatusConflict, Message: fmt.Sprintf("template %q is a directory template of this pool", name)}
	}
	if _, ok := p.templates[name]; ok {
		return &Error{Status: http.StatusConflict, Message: fmt.Sprintf("template %q exists (or is being built)", name)}
	}
	p.templates[name] = nil
	return nil
}

// build runs req's commands in a fresh machine, snapshots it and ends
// it; it returns the snapshot's id.
func (p *Pool) build(ctx context.Context, req TemplateRequest, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	zero, yes := 0, true
	s, err := p.Create(ctx, CreateRequest{Machine: &yes, Network: req.Network, Egress: req.Egress, TimeoutS: &zero,
		Metadata: map[string]string{"a2c-template-build": req.Name}}, "")
	if err != nil {
		return "", err
	}
	defer func() { _ = p.Delete(context.Background(), s.ID, false) }()
	b, ok := p.lookup(s.ID)
	if !ok {
		return "", &Error{Status: http.StatusInternalServerError, Message: "the build machine ended"}
	}
	for i, c := range req.Build {
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c)
		// A file, not a pipe: a daemon a step starts in the background
		// may keep its output open after the step is done.
		out, err := os.CreateTemp("", "a2c-build-")
		if err != nil {
			return "", &Error{Status: http.StatusInternalServerError, Message: "the build's output: " + err.Error()}
		}
		_ = os.Remove(out.Name())
		cmd.Stdout, cmd.Stderr = out, out
		cmd.Dir = b.dir
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "DEBIAN_FRONTEND=noninteractive", "LANG=C.UTF-8"}
		cmd.WaitDelay = time.Second
		b.mu.Lock()
		sb := b.sb
		b.mu.Unlock()
		err = sb.Wrap(cmd, cmd.Start)()
		if err == nil {
			err = cmd.Wait()
		}
		tail := lastBytes(out, 2048)
		out.Close()
		if err != nil {
			why := err.Error()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				why = fmt.Sprintf("exit status %d", ee.ExitCode())
			}
			if ctx.Err() != nil {
				why = "the build ran out of its time"
			}
			return "", &Error{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf("build[%d] failed (%s): %s", i, why, strings.ToValidUTF8(string(tail), "?"))}
		}
	}
	snap, err := p.TakeSnapshot(s.ID)
	if err != nil {
		return "", err
	}
	return snap.ID, nil
}

// lastBytes is up to n bytes of the end of f.
func lastBytes(f *os.File, n int64) []byte {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil
	}
	start := max(0, end-n)
	b := make([]byte, end-start)
	k, _ := f.ReadAt(b, start)
	return b[:k]
}

// Templates lists the pool's templates made from snapshots, by name.
func (p *Pool) Templates() []Template {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Template, 0, len(p.templates))
	for _, t := range p.templates {
		if t != nil {
			out = append(out, *t)
		}
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// DeleteTemplate deletes a template made from a snapshot (its snapshot
// stays, free to delete once no sandbox was made from it).
// Its warm machines end with it.
func (p *Pool) DeleteTemplate(name string) error {
	p.mu.Lock()
	if t, ok := p.templates[name]; !ok || t == nil {
		p.mu.Unlock()
		if ok {
			return &Error{Status: http.StatusConflict, Message: fmt.Sprintf("template %q is being built", clip(name, 64))}
		}
		return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no template %q", clip(name, 64))}
	}
	delete(p.templates, name)
	warm := p.warmT[name]
	delete(p.warmT, name)
	p.mu.Unlock()
	for _, b := range warm {
		b.close(context.Background(), false)
		p.releaseUID(b.uid)
	}
	return nil
}

// snapshotTemplate is the snapshot a template made from one names (nil:
// no such template).
func (p *Pool) snapshotTemplate(name string) *snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.templates[name]
	if t == nil {
		return nil
	}
	return p.snapshots[t.SnapshotID]
}
