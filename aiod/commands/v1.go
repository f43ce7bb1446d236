package commands

import (
	"net/http"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

// mountV1 registers the 1.x compatibility routes /v1/bash/* with their
// v1 field names. /v1/shell/* (terminals) belong to aiod/pty.
func (p *Plane) mountV1(mux *http.ServeMux) {
	mux.Handle("POST /v1/bash/exec", api.Route[bashExecBody, ran]{Op: p.bashExec, Reply: p.reply, Override: sessionsFull})
	mux.Handle("POST /v1/bash/output", api.Route[bashOutputBody, outputResult]{Op: p.bashOutput})
	mux.Handle("POST /v1/bash/write", api.Route[bashWriteBody, any]{Op: p.bashWrite})
	mux.Handle("POST /v1/bash/kill", api.Route[bashKillBody, any]{Op: p.bashKill})
	mux.Handle("GET /v1/bash/sessions", api.Route[struct{}, []SessionInfo]{From: api.FromNothing, Op: p.listSessions})
	mux.Handle("POST /v1/bash/sessions/create", api.Route[bashCreateBody, SessionInfo]{Op: p.bashCreate, Override: sessionsFull})
	mux.Handle("POST /v1/bash/sessions/{session_id}/close", api.Route[struct{}, any]{From: api.FromNothing, Op: p.bashClose})
}

// bashExecBody is the published v1 BashExecRequest.
type bashExecBody struct {
	Command         string            `json:"command" serde:"required"`
	SessionID       string            `json:"session_id"`
	ExecDir         string            `json:"exec_dir"`
	Env             map[string]string `json:"env"`
	User            string            `json:"user"`
	AsyncMode       bool              `json:"async_mode"`
	Timeout         *float64          `json:"timeout"`
	HardTimeout     *float64          `json:"hard_timeout"`
	MaxOutputLength *uint64           `json:"max_output_length"`
}

func (p *Plane) bashExec(r *http.Request, b bashExecBody) (ran, error) {
	req := Request{Command: b.Command, Cwd: b.ExecDir, Env: b.Env, User: b.User, Session: b.SessionID,
		CreateSession: true, Async: b.AsyncMode}
	if err := timeouts(&req, b.Timeout, b.HardTimeout); err != nil {
		return ran{}, err
	}
	return p.exec(r, req, execOpts{maxOutput: maxOutput(b.MaxOutputLength), v1: true})
}

// sessionCommand finds the command a v1 call addresses: by id when
// given, else the session's newest (newest running, when running).
func (p *Plane) sessionCommand(sessionID, commandID string, running bool) (*Command, error) {
	if commandID != "" {
		return p.e.Command(commandID)
	}
	c, err := p.e.Latest(sessionID, running)
	if err == nil && c == nil && running {
		err = invalid("No command is running in session "+sessionID, "")
	}
	return c, err
}

// bashOutputBody is the published v1 BashOutputRequest.
type bashOutputBody struct {
	SessionID    string   `json:"session_id" serde:"required"`
	CommandID    string   `json:"command_id"`
	Offset       uint64   `json:"offset"`
	StderrOffset *uint64  `json:"stderr_offset"`
	Wait         bool     `json:"wait"`
	WaitTimeout  *float64 `json:"wait_timeout"`
}

func (p *Plane) bashOutput(r *http.Request, b bashOutputBody) (outputResult, error) {
	c, err := p.sessionCommand(b.SessionID, b.CommandID, false)
	if err != nil {
		return outputResult{}, err
	}
	return p.output(r.Context(), b.SessionID, c, readQuery{Offset: b.Offset, StderrOffset: b.StderrOffset, Wait: b.Wait, WaitTimeout: b.WaitTimeout})
}

// bashWriteBody is the published v1 BashWriteRequest.
type bashWriteBody struct {
	SessionID string `json:"session_id" serde:"required"`
	CommandID string `json:"command_id"`
	Input     string `json:"input" serde:"required"`
}

func (p *Plane) bashWrite(r *http.Request, b bashWriteBody) (any, error) {
	c, err := p.sessionCommand(b.SessionID, b.CommandID, true)
	if err == nil {
		err = c.WriteStdin(r.Context(), []byte(b.Input))
	}
	return nil, err
}

// bashKillBody is the published v1 BashKillRequest.
type bashKillBody struct {
	SessionID string `json:"session_id" serde:"required"`
	CommandID string `json:"command_id"`
	Signal    string `json:"signal"`
}

func (p *Plane) bashKill(_ *http.Request, b bashKillBody) (any, error) {
	c, err := p.sessionCommand(b.SessionID, b.CommandID, true)
	return killCommand(c, err, b.Signal)
}

// bashCreateBody is the published v1 BashSessionCreateRequest.
type bashCreateBody struct {
	SessionID    string `json:"session_id"`
	ExecDir      string `json:"exec_dir"`
	SnapshotPath string `json:"snapshot_path"`
	User         string `json:"user"`
}

func (p *Plane) bashCreate(_ *http.Request, b bashCreateBody) (SessionInfo, error) {
	return p.e.CreateSession(SessionOptions{ID: b.SessionID, Cwd: b.ExecDir, User: b.User, BashEnv: b.SnapshotPath})
}

// bashClose closes a session; unlike DELETE /v2/commands/sessions/{id}
// its answer's data is null.
func (p *Plane) bashClose(r *http.Request, _ struct{}) (any, error) {
	_, err := p.e.CloseSession(r.Context(), r.PathValue("session_id"))
	return nil, err
}
