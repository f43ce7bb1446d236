package commands

import (
	"context"
	"errors"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/sandbox/api"
)

// v1 shell (terminal) statuses; upstream these come from a PTY.
const (
	shellRunning   = "running"
	shellCompleted = "completed"
	shellNoChange  = "no_change_timeout"
	shellHard      = "hard_timeout"
	shellKilled    = "terminated"
)

const (
	defaultNoChange = 120 * time.Second
	shellTruncateAt = 30000
	shellMarker     = "\n[... Observation truncated due to length ...]\n"
	shellPS1        = "$ "
)

// shellResult is the published ShellCommandResult (also the view
// result, whose command is null between commands).
type shellResult struct {
	SessionID string          `json:"session_id"`
	Command   *string         `json:"command"`
	Status    string          `json:"status"`
	Output    string          `json:"output"`
	Console   []consoleRecord `json:"console"`
	ExitCode  *int            `json:"exit_code"`
}

type consoleRecord struct {
	PS1     string `json:"ps1"`
	Command string `json:"command"`
	Output  string `json:"output"`
}

// combined is a command's output as one stream: stdout, then stderr.
func combined(c *Command, truncate bool) string {
	o := c.Read(0, 0)
	s := string(o.Stdout) + string(o.Stderr)
	if truncate {
		s = truncateMiddle(s, shellTruncateAt, shellMarker)
	}
	return s
}

// shellState maps a command's state onto the terminal statuses; a hard
// timeout leaves exit_code null, as a PTY interrupt does.
func shellState(c *Command) (string, *int) {
	st, code := c.State()
	switch st {
	case StatusRunning:
		return shellRunning, nil
	case StatusTimedOut:
		return shellHard, nil
	}
	return shellCompleted, code
}

// result describes c in its session; status overrides the mapped one
// when non-empty.
func (p *Plane) result(sessionID string, c *Command, status string, truncate bool) shellResult {
	res := shellResult{SessionID: sessionID, Status: shellCompleted, Console: p.console(sessionID)}
	if c == nil {
		return res
	}
	res.Status, res.ExitCode = shellState(c)
	res.Output = combined(c, truncate)
	if res.Status == shellRunning {
		res.Command = &c.Text
	}
	if status != "" {
		res.Status, res.ExitCode = status, nil
	}
	return res
}

// console is the session's transcript of finished commands.
func (p *Plane) console(sessionID string) []consoleRecord {
	out := []consoleRecord{}
	for _, c := range p.e.history(sessionID) {
		if !c.running() {
			out = append(out, consoleRecord{PS1: shellPS1, Command: c.Text, Output: combined(c, true)})
		}
	}
	return out
}

// shellExecBody is the published v1 ShellExecRequest.
type shellExecBody struct {
	Command          string   `json:"command" serde:"required"`
	ID               string   `json:"id"`
	ExecDir          string   `json:"exec_dir"`
	AsyncMode        bool     `json:"async_mode"`
	Timeout          *float64 `json:"timeout"`
	HardTimeout      *float64 `json:"hard_timeout"`
	NoChangeTimeout  *uint64  `json:"no_change_timeout"`
	User             string   `json:"user"`
	PreserveSymlinks bool     `json:"preserve_symlinks"`
	Strict           bool     `json:"strict"`
	Truncate         *bool    `json:"truncate"`
}

func (p *Plane) shellExec(w http.ResponseWriter, r *http.Request) {
	var b shellExecBody
	if !api.Body(w, r, &b) {
		return
	}
	if !b.Strict && b.ExecDir != "" {
		if fi, err := os.Stat(b.ExecDir); err != nil || !fi.IsDir() {
			b.ExecDir = "" // not strict: an unusable exec_dir is ignored
		}
	}
	req := Request{Command: b.Command, Cwd: b.ExecDir, User: b.User, Session: b.ID, kind: kindShell}
	if err := timeouts(&req, b.Timeout, b.HardTimeout); err != nil {
		fail(w, err)
		return
	}
	c, err := p.e.Start(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	status := ""
	if !b.AsyncMode {
		quiet := defaultNoChange
		if info, err := p.e.Session(c.SessionID); err == nil && info.NoChangeTimeout > 0 {
			quiet = info.NoChangeTimeout
		}
		if b.NoChangeTimeout != nil {
			quiet = time.Duration(min(*b.NoChangeTimeout, 1<<32)) * time.Second
		}
		if c.waitFor(r.Context(), req.Timeout, quiet, -1, -1) == waitQuiet {
			c.interrupt()
			status = shellNoChange
		}
	}
	res := p.result(c.SessionID, c, status, b.Truncate == nil || *b.Truncate)
	res.Command = &c.Text
	api.OKMessage(w, "Command executed", res)
}

// interrupt sends SIGINT to the group without marking the command killed,
// as ^C typed into a terminal would.
func (c *Command) interrupt() {
	if st, _ := c.State(); st == StatusRunning {
		_ = syscall.Kill(-c.pgid, syscall.SIGINT)
	}
}

type shellIDBody struct {
	ID string `json:"id" serde:"required"`
}

// shellTarget decodes {id} and finds the session's newest command
// (newest running, when running); false when it has answered.
func (p *Plane) shellTarget(w http.ResponseWriter, r *http.Request, running bool) (string, *Command, bool) {
	var b shellIDBody
	if !api.Body(w, r, &b) {
		return "", nil, false
	}
	c, err := p.e.Latest(b.ID, running)
	if err != nil {
		fail(w, err)
		return "", nil, false
	}
	return b.ID, c, true
}

func (p *Plane) shellView(w http.ResponseWriter, r *http.Request) {
	if id, c, ok := p.shellTarget(w, r, false); ok {
		api.OK(w, p.result(id, c, "", true))
	}
}

// shellWaitBody is the published v1 ShellWaitRequest.
type shellWaitBody struct {
	ID             string  `json:"id" serde:"required"`
	Seconds        *uint64 `json:"seconds"`
	MaxWaitSeconds *uint64 `json:"max_wait_seconds"`
}

type statusResult struct {
	Status string `json:"status"`
}

func (p *Plane) shellWait(w http.ResponseWriter, r *http.Request) {
	var b shellWaitBody
	if !api.Body(w, r, &b) {
		return
	}
	c, err := p.e.Latest(b.ID, true)
	if err != nil {
		fail(w, err)
		return
	}
	if c == nil {
		api.OK(w, statusResult{shellCompleted})
		return
	}
	d := uint64(30)
	if b.Seconds != nil {
		d = *b.Seconds
	}
	if b.MaxWaitSeconds != nil {
		d = min(d, *b.MaxWaitSeconds)
	}
	if d > 0 { // 0: the state now
		c.Wait(r.Context(), time.Duration(min(d, 1<<32))*time.Second)
	}
	st, _ := shellState(c)
	api.OK(w, statusResult{st})
}

// shellWriteBody is the published v1 ShellWriteToProcessRequest.
type shellWriteBody struct {
	ID         string `json:"id" serde:"required"`
	Input      string `json:"input" serde:"required"`
	PressEnter *bool  `json:"press_enter"`
}

func (p *Plane) shellWrite(w http.ResponseWriter, r *http.Request) {
	var b shellWriteBody
	if !api.Body(w, r, &b) {
		return
	}
	if b.PressEnter == nil || *b.PressEnter {
		b.Input += "\n" // a pipe, not a tty: Enter is the newline a tty would make of CR
	}
	c, err := p.sessionCommand(b.ID, "", true)
	if err == nil {
		err = c.WriteStdin(r.Context(), []byte(b.Input))
	}
	if err != nil {
		fail(w, err)
		return
	}
	st, _ := shellState(c)
	api.OK(w, statusResult{st})
}

type shellKillResult struct {
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	ReturnCode *int   `json:"returncode"`
}

// shellKill SIGKILLs the running command's group and closes the session;
// a second call is a 404.
func (p *Plane) shellKill(w http.ResponseWriter, r *http.Request) {
	id, c, ok := p.shellTarget(w, r, true)
	if !ok {
		return
	}
	res := shellKillResult{Status: shellKilled}
	if c != nil {
		_ = c.Kill(syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(r.Context(), p.e.killGrace)
		c.Wait(ctx, 0)
		cancel()
		_, res.ExitCode = c.State()
		res.ReturnCode = res.ExitCode
	}
	if _, err := p.e.CloseSession(r.Context(), id); err != nil && !errors.Is(err, ErrNotFound) {
		fail(w, err)
		return
	}
	api.OK(w, res)
}

type shellSessionInfo struct {
	WorkingDir     string  `json:"working_dir"`
	CreatedAt      string  `json:"created_at"`
	LastUsedAt     string  `json:"last_used_at"`
	AgeSeconds     int64   `json:"age_seconds"`
	Status         string  `json:"status"`
	CurrentCommand *string `json:"current_command"`
}

func (p *Plane) shellSessions(w http.ResponseWriter, _ *http.Request) {
	out := map[string]shellSessionInfo{}
	for _, s := range p.e.sessionsOf(kindShell) {
		st := "idle"
		if s.CurrentCommand != nil {
			st = "active"
		}
		out[s.SessionID] = shellSessionInfo{WorkingDir: s.WorkingDir, CreatedAt: s.CreatedAt, LastUsedAt: s.LastUsedAt,
			AgeSeconds: int64(time.Since(s.Created).Seconds()), Status: st, CurrentCommand: s.CurrentCommand}
	}
	api.OK(w, map[string]any{"sessions": out})
}

type shellStats struct {
	TotalSessions  int     `json:"total_sessions"`
	ActiveSessions int     `json:"active_sessions"`
	IdleSessions   int     `json:"idle_sessions"`
	MaxSessions    int     `json:"max_sessions"`
	SessionTimeout int64   `json:"session_timeout"`
	UsageRatio     float64 `json:"usage_ratio"`
}

func (p *Plane) shellStats(w http.ResponseWriter, _ *http.Request) {
	ss := p.e.sessionsOf(kindShell)
	st := shellStats{TotalSessions: len(ss), MaxSessions: p.e.maxSessions, SessionTimeout: int64(p.e.idle.Seconds()),
		UsageRatio: float64(len(ss)) / float64(p.e.maxSessions)}
	for _, s := range ss {
		if s.CurrentCommand != nil {
			st.ActiveSessions++
		}
	}
	st.IdleSessions = st.TotalSessions - st.ActiveSessions
	api.OK(w, st)
}

// shellCreateBody is the published v1 ShellCreateSessionRequest.
type shellCreateBody struct {
	ID               string  `json:"id"`
	ExecDir          string  `json:"exec_dir"`
	NoChangeTimeout  *uint64 `json:"no_change_timeout"`
	PreserveSymlinks bool    `json:"preserve_symlinks"`
	User             string  `json:"user"`
}

func noChange(n *uint64) time.Duration {
	if n == nil {
		return 0
	}
	return time.Duration(min(*n, 1<<32)) * time.Second
}

func (p *Plane) shellCreate(w http.ResponseWriter, r *http.Request) {
	var b shellCreateBody
	if !api.Body(w, r, &b) {
		return
	}
	info, err := p.e.CreateSession(SessionOptions{ID: b.ID, Cwd: b.ExecDir, User: b.User, kind: kindShell, noChange: noChange(b.NoChangeTimeout)})
	if err != nil {
		fail(w, err)
		return
	}
	api.OK(w, map[string]string{"session_id": info.SessionID, "working_dir": info.WorkingDir})
}

type shellUpdateBody struct {
	ID              string  `json:"id" serde:"required"`
	NoChangeTimeout *uint64 `json:"no_change_timeout"`
}

func (p *Plane) shellUpdate(w http.ResponseWriter, r *http.Request) {
	var b shellUpdateBody
	if !api.Body(w, r, &b) {
		return
	}
	if err := p.e.setNoChange(b.ID, noChange(b.NoChangeTimeout)); err != nil {
		fail(w, err)
		return
	}
	api.OK(w, map[string]any{"session_id": b.ID, "no_change_timeout": b.NoChangeTimeout})
}

// shellClose closes one terminal; one already gone is a 200 with
// success false, as upstream answers.
func (p *Plane) shellClose(w http.ResponseWriter, r *http.Request) {
	if _, err := p.e.CloseSession(r.Context(), r.PathValue("session_id")); err != nil {
		api.Fail(w, http.StatusOK, err.Error(), nil)
		return
	}
	api.OK(w, nil)
}

func (p *Plane) shellCloseAll(w http.ResponseWriter, r *http.Request) {
	done(w, p.e.closeKind(r.Context(), kindShell))
}
