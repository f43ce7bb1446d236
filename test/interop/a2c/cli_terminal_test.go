package a2c

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// ptyProc is the a2c binary running with a pseudo-terminal as its
// controlling terminal (and as stdin, stdout and stderr): what a person at
// a terminal would see and type.
type ptyProc struct {
	cmd    *exec.Cmd
	tty    *os.File // the master side
	mu     sync.Mutex
	out    bytes.Buffer
	more   chan struct{} // pinged on every read
	exited chan struct{}
}

// startPTY runs "a2c args..." on a new pseudo-terminal. At cleanup the
// process gets SIGTERM and must exit within 40 s (then it is killed).
func startPTY(t *testing.T, args ...string) *ptyProc {
	t.Helper()
	p := &ptyProc{cmd: exec.Command(harness.Bin(t, "a2c"), args...), more: make(chan struct{}, 1), exited: make(chan struct{})}
	tty, err := pty.Start(p.cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.tty = tty
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
			if err != nil {
				return // EIO once the last process holding the terminal has gone
			}
		}
	}()
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(40 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("a2c did not stop on SIGTERM; terminal:\n%s", p.output())
		}
		tty.Close()
		<-read
	})
	return p
}

func (p *ptyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitText waits (up to 40 s) for want to appear at or after offset from
// in the terminal's output, and returns the offset just past it.
func (p *ptyProc) waitText(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.After(40 * time.Second)
	for {
		out := p.output()
		if i := strings.Index(out[min(from, len(out)):], want); i >= 0 {
			return from + i + len(want)
		}
		select {
		case <-p.more:
		case <-p.exited:
			t.Fatalf("a2c exited before printing %q; terminal:\n%s", want, p.output())
		case <-deadline:
			t.Fatalf("timed out waiting for %q; terminal:\n%s", want, out)
		}
	}
}

// typeLine types s and Enter.
func (p *ptyProc) typeLine(t *testing.T, s string) {
	t.Helper()
	if _, err := p.tty.Write([]byte(s + "\r")); err != nil {
		t.Fatal(err)
	}
}

// TestCLITerminalPrompts drives "a2c computer --approve ask" through a
// real pseudo-terminal: a password input (not echoed), a pickString
// (numbered choices showing the options' labels; the chosen option's value
// is injected), and the approval prompt answered y and n.
func TestCLITerminalPrompts(t *testing.T) {
	entry := everythingEntry(t)
	cfg := writeConfig(t, fmt.Sprintf(`{
  "inputs": [
    {"id": "pw", "type": "promptString", "description": "Token for ev", "password": true},
    {"id": "region", "type": "pickString", "description": "Pick a region", "options": [
      {"label": "Europe", "value": "eu"}, {"label": "United States", "value": "us"}, {"label": "Asia Pacific", "value": "ap"}]}
  ],
  "servers": {"ev": {"name": "ev", "type": "stdio", "server_parameters": {"command": "node", "args": [%q, "stdio"],
    "env": {"SECRET": "${input:pw}", "REGION": "${input:region}"}}}}
}`, entry))
	srv := startServer(t)
	office := agent.NewReqID()
	p := startPTY(t, "computer", "--server", srv.URL, "--office", office, "--name", "pc", "--config", cfg, "--approve", "ask")

	// The inputs are asked in the order the server's env names sort:
	// REGION, then SECRET.
	at := p.waitText(t, 0, "Pick a region\r\n  1) Europe\r\n  2) United States\r\n  3) Asia Pacific\r\nchoice: ")
	p.typeLine(t, "2")
	at = p.waitText(t, at, "2\r\n") // echoed: an ordinary input
	at = p.waitText(t, at, "Token for ev: ")
	p.typeLine(t, "hunter2")
	p.waitText(t, at, "a2c computer starting")
	if strings.Contains(p.output(), "hunter2") {
		t.Fatalf("the password was echoed; terminal:\n%s", p.output())
	}

	a := dialAgent(t, srv.URL, "agent", agent.Options{})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "ev__get-env", "ev__echo")

	// call runs one tool call while the test answers the prompt.
	call := func(t *testing.T, tool string, params map[string]any, answer string) *smcp.CallToolResult {
		t.Helper()
		type result struct {
			res *smcp.CallToolResult
			err error
		}
		done := make(chan result, 1)
		from := len(p.output())
		go func() {
			res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: tool, Params: params, Timeout: 15 * time.Second})
			done <- result{res, err}
		}()
		p.waitText(t, from, fmt.Sprintf("Allow tool %s with ", tool))
		p.waitText(t, from, "? [y/N] ")
		p.typeLine(t, answer)
		r := <-done
		if r.err != nil {
			t.Fatalf("%s: %v", tool, r.err)
		}
		return r.res
	}
	t.Run("approve-y", func(t *testing.T) {
		res := call(t, "ev__get-env", nil, "y")
		compact := strings.Join(strings.Fields(text(res)), "")
		if res.IsError || !strings.Contains(compact, `"SECRET":"hunter2"`) || !strings.Contains(compact, `"REGION":"us"`) {
			t.Fatalf("get-env = %+v (%s)", res, text(res))
		}
	})
	t.Run("refuse-n-4005", func(t *testing.T) {
		res := call(t, "ev__echo", map[string]any{"message": "no"}, "n")
		if !res.IsError || res.ErrorCode() != smcp.CodeToolRequiresConfirmation {
			t.Fatalf("refused call = %+v", res)
		}
	})
	t.Run("prompt-text", func(t *testing.T) {
		if !strings.Contains(p.output(), `Allow tool ev__echo with {"message":"no"}? [y/N] `) {
			t.Fatalf("terminal:\n%s", p.output())
		}
	})
}
