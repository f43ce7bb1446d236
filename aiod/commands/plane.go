package commands

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/janitor"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sessions"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// Plane is the commands plane's HTTP surface over one [Engine]. It owns
// the engine's idle-session janitor.
type Plane struct {
	e       *Engine
	janitor *janitor.Janitor
}

// subreaper makes the process a child subreaper once (see setSubreaper).
var subreaper struct {
	once sync.Once
	err  error
}

// New returns a plane with its engine and a running janitor; stop both
// with [Plane.Close]. On Linux it makes the process a child subreaper,
// so that the processes a command detaches (setsid, double fork) stay
// below the daemon, where a kill, a hard timeout, a session close and
// Close still find them, and where their zombies are reaped.
func New(cfg Config) *Plane {
	subreaper.once.Do(func() { subreaper.err = setSubreaper() })
	p := &Plane{e: NewEngine(cfg)}
	if subreaper.err != nil {
		errno, _ := subreaper.err.(syscall.Errno)
		p.e.log.Warn("commands: cannot become a child subreaper; detached processes escape kills",
			"errno", int(errno), "error", subreaper.err.Error())
	}
	p.janitor = janitor.Start(p.e.janitor)
	return p
}

// Engine returns the engine behind the routes, for other callers (the
// MCP tool, the Computer).
func (p *Plane) Engine() *Engine { return p.e }

// Close refuses new commands, ends every process tree the engine
// started (SIGTERM, then SIGKILL after a grace period bounded by ctx)
// and stops the janitor. It returns when they are reaped or ctx ends.
func (p *Plane) Close(ctx context.Context) error {
	err := p.e.Close(ctx) // the janitor reaps orphans meanwhile
	if jerr := p.janitor.Stop(ctx); jerr != nil {
		return errors.Join(err, fmt.Errorf("commands: janitor: %w", jerr))
	}
	return err
}

// Mount registers the v2 routes and the v1 compatibility routes. The
// routes that may create a session answer "all sessions busy" with 400
// ([sessionsFull]); every other status is api's table.
func (p *Plane) Mount(mux *http.ServeMux) {
	mux.Handle("POST /v2/commands", api.Route[runBody, ran]{Op: p.run, Reply: p.reply, Override: sessionsFull})
	mux.Handle("GET /v2/commands/{command_id}", api.Route[readQuery, outputResult]{From: api.FromQuery, Op: p.get})
	mux.Handle("POST /v2/commands/{command_id}/stdin", api.Route[stdinBody, any]{Op: p.stdin})
	mux.Handle("POST /v2/commands/{command_id}/kill", api.Route[killBody, any]{Op: p.kill})
	mux.Handle("POST /v2/commands/sessions", api.Route[sessionBody, SessionInfo]{Op: p.createSession, Override: sessionsFull})
	mux.Handle("GET /v2/commands/sessions", api.Route[struct{}, []SessionInfo]{From: api.FromNothing, Op: p.listSessions})
	mux.Handle("DELETE /v2/commands/sessions/{session_id}", api.Route[struct{}, SessionInfo]{From: api.FromNothing, Op: p.deleteSession})
	p.mountV1(mux)
}

// seconds converts an optional seconds field through the shared
// parsing (sessions.Seconds), with the commands plane's published
// reading around it: absent is 0 (no bound); a present 0 is the
// shortest bound; there is no upper limit (past what a Duration holds
// it is the longest); negative (or NaN) is ErrInvalid.
func seconds(field string, f *float64) (time.Duration, error) {
	if f != nil && *f*1e9 >= math.MaxInt64 {
		return math.MaxInt64, nil
	}
	d, err := sessions.Seconds(f, 0, 0, math.MaxInt64)
	switch {
	case err != nil:
		return 0, invalid(field+" must not be negative", "")
	case f == nil:
		return 0, nil
	}
	return max(d, 1), nil
}

// runBody is POST /v2/commands.
type runBody struct {
	Command         string            `json:"command" serde:"required"`
	Args            []string          `json:"args"`
	Shell           *string           `json:"shell" serde:"enum=auto|bash|sh|powershell|cmd|none"`
	Cwd             string            `json:"cwd"`
	Env             map[string]string `json:"env"`
	User            string            `json:"user"`
	Session         string            `json:"session"`
	Timeout         *float64          `json:"timeout"`
	HardTimeout     *float64          `json:"hard_timeout"`
	MaxOutputLength *uint64           `json:"max_output_length"`
	Mode            *string           `json:"mode" serde:"enum=sync|async"`
}

// execOpts is what a run route adds to the engine request.
type execOpts struct {
	maxOutput int  // max_output_length; 0 = unlimited
	v1        bool // stdout/stderr/output null while empty
}

func maxOutput(n *uint64) int {
	if n == nil {
		return DefaultMaxOutputLength
	}
	return int(min(*n, math.MaxInt32))
}

// timeouts fills req's timeouts from the optional seconds fields.
func timeouts(req *Request, timeout, hard *float64) error {
	var err error
	if req.Timeout, err = seconds("timeout", timeout); err != nil {
		return err
	}
	req.HardTimeout, err = seconds("hard_timeout", hard)
	return err
}

func (p *Plane) run(r *http.Request, b runBody) (ran, error) {
	shell := ShellAuto
	if b.Shell != nil {
		shell = *b.Shell
	}
	req := Request{Command: b.Command, Args: b.Args, Shell: shell, Cwd: b.Cwd, Env: b.Env, User: b.User,
		Session: b.Session, Async: b.Mode != nil && *b.Mode == "async"}
	if err := timeouts(&req, b.Timeout, b.HardTimeout); err != nil {
		return ran{}, err
	}
	return p.exec(r, req, execOpts{maxOutput: maxOutput(b.MaxOutputLength)})
}

// ran is what a run route answers: the command and how to word it, or
// the request to stream.
type ran struct {
	c      *Command
	o      execOpts
	stream *Request // NDJSON: the reply starts it
}

// exec runs req, or leaves it to the reply to stream when the client
// accepts NDJSON. A client that goes away while it waits for a sync
// command (before its exit or its timeout) kills it, as a streamed one
// does, and is not answered; an async command, or one already answered
// as running, runs on.
func (p *Plane) exec(r *http.Request, req Request, o execOpts) (ran, error) {
	if strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		return ran{stream: &req}, nil
	}
	c, err := p.e.Start(r.Context(), req)
	if err != nil {
		return ran{}, err
	}
	if !req.Async && c.waitFor(r.Context(), req.Timeout, -1, -1) == waitCanceled {
		c.Kill(syscall.SIGKILL)        //nolint:errcheck // it may have just exited
		return ran{}, context.Canceled // the client left: api.Route answers nothing
	}
	return ran{c: c, o: o}, nil
}

// reply answers a run: the BashExecResult, or the NDJSON stream.
func (p *Plane) reply(w http.ResponseWriter, r *http.Request, out ran) {
	if out.stream != nil {
		p.stream(w, r, *out.stream)
		return
	}
	api.OK(w, execResultOf(out.c, out.o))
}

// execResult is the published BashExecResult.
type execResult struct {
	SessionID    string  `json:"session_id"`
	CommandID    string  `json:"command_id"`
	Command      string  `json:"command"`
	Status       string  `json:"status"`
	Stdout       *string `json:"stdout"`
	Stderr       *string `json:"stderr"`
	Output       *string `json:"output"`
	ExitCode     *int    `json:"exit_code"`
	Offset       int64   `json:"offset"`
	StderrOffset int64   `json:"stderr_offset"`
}

func execResultOf(c *Command, o execOpts) execResult {
	out := c.Read(0, 0)
	stdout := truncateMiddle(string(out.Stdout), o.maxOutput, truncMarker)
	stderr := truncateMiddle(string(out.Stderr), o.maxOutput, truncMarker)
	both := stdout + stderr
	opt := func(s string) *string {
		if s == "" && o.v1 {
			return nil
		}
		return &s
	}
	return execResult{SessionID: c.SessionID, CommandID: c.ID, Command: c.Text, Status: out.Status,
		Stdout: opt(stdout), Stderr: opt(stderr), Output: opt(both), ExitCode: out.ExitCode,
		Offset: out.StdoutOffset, StderrOffset: out.StderrOffset}
}

// readQuery is GET /v2/commands/{id}'s query (and /v1/bash/output's
// body fields of the same names).
type readQuery struct {
	Offset       uint64   `json:"offset"`
	StderrOffset *uint64  `json:"stderr_offset"`
	Wait         bool     `json:"wait"`
	WaitTimeout  *float64 `json:"wait_timeout"`
}

// outputResult is the published BashOutputResult.
type outputResult struct {
	SessionID         string       `json:"session_id"`
	Stdout            string       `json:"stdout"`
	Stderr            string       `json:"stderr"`
	Offset            int64        `json:"offset"`
	StderrOffset      int64        `json:"stderr_offset"`
	StdoutStartOffset int64        `json:"stdout_start_offset"`
	StderrStartOffset int64        `json:"stderr_start_offset"`
	StdoutGap         bool         `json:"stdout_gap"`
	StderrGap         bool         `json:"stderr_gap"`
	Command           *commandInfo `json:"command"`
}

type commandInfo struct {
	CommandID string `json:"command_id"`
	Command   string `json:"command"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code"`
}

func offset(u uint64) int64 { return int64(min(u, math.MaxInt64)) }

// output answers a read of c (nil: a session without commands) from the
// query's offsets, long-polling when it asks to.
//
// A wait ends at the command's exit, at the wait bound, or with output
// past the offsets the client follows. stdout is always followed (its
// offset defaults to 0). A client that sends no stderr_offset does not
// follow stderr: it is still answered stderr from 0, but only stderr
// written during the wait ends it. Otherwise a program that prompts on
// stderr (python3 -i writes ">>> " there) would end every wait of a
// client reading stdout at once, with nothing new, and such a client's
// bounded loop of waits could run out before the output it waits for.
func (p *Plane) output(ctx context.Context, sessionID string, c *Command, q readQuery) (outputResult, error) {
	res := outputResult{SessionID: sessionID, Stdout: "", Stderr: ""}
	if c == nil {
		return res, nil
	}
	from, errFrom := offset(q.Offset), int64(0)
	if q.StderrOffset != nil {
		errFrom = offset(*q.StderrOffset)
	}
	if q.Wait {
		d := 30 * time.Second
		if q.WaitTimeout != nil {
			var err error
			if d, err = seconds("wait_timeout", q.WaitTimeout); err != nil {
				return outputResult{}, err
			}
		}
		// stderr_offset defaults to 0 (the published rule), so stderr
		// already written ends a wait that names no stderr_offset: a
		// client that follows stderr passes its offset.
		c.WaitOutput(ctx, from, errFrom, d)
	}
	out := c.Read(from, errFrom)
	res.Stdout, res.Stderr = string(out.Stdout), string(out.Stderr)
	res.Offset, res.StderrOffset = out.StdoutOffset, out.StderrOffset
	res.StdoutStartOffset, res.StderrStartOffset = out.StdoutStart, out.StderrStart
	res.StdoutGap, res.StderrGap = out.StdoutGap, out.StderrGap
	res.Command = &commandInfo{CommandID: c.ID, Command: c.Text, Status: out.Status, ExitCode: out.ExitCode}
	return res, nil
}

func (p *Plane) get(r *http.Request, q readQuery) (outputResult, error) {
	c, err := p.e.Command(r.PathValue("command_id"))
	if err != nil {
		return outputResult{}, err
	}
	return p.output(r.Context(), c.SessionID, c, q)
}

type stdinBody struct {
	Input string `json:"input" serde:"required"`
}

// stdin writes to a command's stdin; the answer's data is null.
func (p *Plane) stdin(r *http.Request, b stdinBody) (any, error) {
	c, err := p.e.Command(r.PathValue("command_id"))
	if err == nil {
		err = c.WriteStdin(r.Context(), []byte(b.Input))
	}
	return nil, err
}

type killBody struct {
	Signal string `json:"signal"`
}

// ParseSignal maps a kill route's signal name (SIGTERM, SIGKILL, SIGINT,
// with or without the SIG prefix, any case; "" is SIGTERM).
func ParseSignal(name string) (syscall.Signal, error) {
	switch strings.TrimPrefix(strings.ToUpper(name), "SIG") {
	case "", "TERM":
		return syscall.SIGTERM, nil
	case "KILL":
		return syscall.SIGKILL, nil
	case "INT":
		return syscall.SIGINT, nil
	}
	return 0, invalid(fmt.Sprintf("unknown signal %q: expected SIGTERM, SIGKILL or SIGINT", name), "")
}

// killCommand signals c (or returns err from finding it); the answer's
// data is null.
func killCommand(c *Command, err error, signal string) (any, error) {
	var sig syscall.Signal
	if err == nil {
		sig, err = ParseSignal(signal)
	}
	if err == nil {
		err = c.Kill(sig)
	}
	return nil, err
}

func (p *Plane) kill(r *http.Request, b killBody) (any, error) {
	c, err := p.e.Command(r.PathValue("command_id"))
	return killCommand(c, err, b.Signal)
}

type sessionBody struct {
	ID   string            `json:"id"`
	Cwd  string            `json:"cwd"`
	Env  map[string]string `json:"env"`
	User string            `json:"user"`
}

func (p *Plane) createSession(_ *http.Request, b sessionBody) (SessionInfo, error) {
	return p.e.CreateSession(SessionOptions{ID: b.ID, Cwd: b.Cwd, Env: b.Env, User: b.User})
}

func (p *Plane) listSessions(*http.Request, struct{}) ([]SessionInfo, error) {
	return p.e.Sessions(), nil
}

func (p *Plane) deleteSession(r *http.Request, _ struct{}) (SessionInfo, error) {
	return p.e.CloseSession(r.Context(), r.PathValue("session_id"))
}
