package code

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
)

//go:embed harness.js
var harnessJS string

// nodeSpec is how to start one node harness.
type nodeSpec struct {
	node  string
	cwd   string
	cred  *syscall.Credential
	env   []string
	grace time.Duration // how long past the deadline before the kill
	log   *slog.Logger
	sb    *sandbox.Sandbox // where the process runs (nil: on the host)
}

// nodeProc is one node process running the harness: requests on its
// stdin, answers on fd 3. Its reader goroutine ends when the process
// does; kill ends it.
type nodeProc struct {
	spec       nodeSpec
	cmd        *exec.Cmd
	in         io.WriteCloser
	answers    chan harnessAnswer
	exited     chan struct{}
	readerDone chan struct{}
}

// harnessAnswer is one answer line of the harness.
type harnessAnswer struct {
	Streams [][2]string `json:"streams"`
	Result  *string     `json:"result"`
	Error   *struct {
		Ename     string   `json:"ename"`
		Evalue    string   `json:"evalue"`
		Traceback []string `json:"traceback"`
	} `json:"error"`
	TimedOut bool `json:"timed_out"`
}

// startNode starts a harness process. It needs no file: the harness is
// its -e argument and answers on an inherited pipe, so it runs the same
// in a sandbox.
func startNode(spec nodeSpec) (*nodeProc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("harness pipe: %w", err)
	}
	p := &nodeProc{spec: spec, answers: make(chan harnessAnswer, 1), exited: make(chan struct{}), readerDone: make(chan struct{})}
	p.cmd = exec.Command(spec.node, "-e", harnessJS)
	p.cmd.Dir, p.cmd.Env, p.cmd.ExtraFiles, p.cmd.WaitDelay = spec.cwd, spec.env, []*os.File{w}, time.Second
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.cred}
	if p.in, err = p.cmd.StdinPipe(); err == nil {
		err = child.Start(p.cmd, spec.sb.Wrap(p.cmd, p.cmd.Start))
	}
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start node: %w", err)
	}
	go p.read(r)
	go func() { _ = p.cmd.Wait(); child.Forget(p.cmd.Process.Pid); close(p.exited) }()
	return p, nil
}

// read decodes answer lines until the pipe closes (the process exited).
func (p *nodeProc) read(r *os.File) {
	defer close(p.readerDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var a harnessAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			p.spec.log.Warn("code: unreadable node harness answer", "error", err.Error())
			continue
		}
		select {
		case p.answers <- a:
		case <-p.exited:
			return
		}
	}
}

// execute runs code; past timeout plus the grace it kills the process.
// A timeout always resets the session (outcome.Reset).
func (p *nodeProc) execute(ctx context.Context, code string, timeout time.Duration, maxChars int) outcome {
	line, _ := json.Marshal(map[string]any{"code": code, "timeout_ms": timeout.Milliseconds(), "max_chars": maxChars + truncationSlack})
	c := collector{max: maxChars}
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return outcome{Status: StatusError, Outputs: []Output{errorOutput("ProcessError", "the node process is not running; session state was reset")}, Reset: true}
	}
	t := time.NewTimer(timeout + p.spec.grace)
	defer t.Stop()
	var a harnessAnswer
	select {
	case a = <-p.answers:
	case <-t.C:
		a.TimedOut = true
	case <-ctx.Done():
		a.TimedOut = true
	case <-p.readerDone:
		c.add(errorOutput("ProcessError", "the node process exited; session state was reset"))
		return outcome{Status: StatusError, Outputs: c.outputs, Reset: true}
	}
	for _, s := range a.Streams {
		c.stream(s[0], s[1])
	}
	o := outcome{Status: StatusOK}
	switch {
	case a.TimedOut:
		msg := fmt.Sprintf("execution timed out after %dms; session state was reset", timeout.Milliseconds())
		c.add(errorOutput("TimeoutError", msg))
		o.Status, o.Reset, o.Stderr = StatusTimeout, true, msg+"\n"
	case a.Error != nil:
		c.add(Output{OutputType: OutputError, Ename: a.Error.Ename, Evalue: a.Error.Evalue, Traceback: a.Error.Traceback})
		o.Status = StatusError
	case a.Result != nil:
		text, _ := json.Marshal(*a.Result)
		c.add(Output{OutputType: OutputExecuteResult, Data: map[string]json.RawMessage{"text/plain": text}})
	}
	o.Outputs = c.outputs
	return o
}

// kill ends the process group and waits for the reader.
func (p *nodeProc) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = p.in.Close()
	select {
	case <-p.readerDone:
	case <-time.After(5 * time.Second):
		p.spec.log.Warn("code: node harness did not exit after SIGKILL", "pid", p.cmd.Process.Pid)
	}
}

func (p *nodeProc) exitedNow() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}
