package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/desktools"
	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// tool is one program the worker runs, with the Debian package that
// provides it.
type tool struct {
	name, pkg, path string
}

// unavailable is the 503 of a route whose program is not installed.
func (t tool) unavailable() error {
	return api.NewError(api.ErrUnavailable, fmt.Sprintf("%s is not installed (Debian package %s)", t.name, t.pkg)).
		WithHint("apt-get install " + t.pkg)
}

// findTool looks the program up on PATH; its package comes from the
// desktop's one table (desktools).
func findTool(name string) tool {
	t := tool{name: name, pkg: desktools.Get(name).Package}
	t.path, _ = exec.LookPath(name)
	return t
}

// run runs the tool with args on the display, within timeout, its
// standard input from stdin (nil: none), and returns at most limit bytes
// of its standard output (more is ErrTooLarge). A tool that fails says
// so with its standard error, kept for the log only.
func (w *worker) run(ctx context.Context, t tool, timeout time.Duration, stdin io.Reader, limit int, args ...string) ([]byte, error) {
	if t.path == "" {
		return nil, t.unavailable()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.path, args...)
	cmd.Env = w.childEnv
	cmd.Stdin = stdin
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = childAttr()
	out, errOut := &capped{limit: limit}, &capped{limit: 4096}
	cmd.Stdout, cmd.Stderr = out, errOut
	err := cmd.Run()
	switch {
	case out.over:
		return nil, api.NewError(api.ErrTooLarge, fmt.Sprintf("%s wrote more than %d bytes", t.name, limit))
	case ctx.Err() == context.DeadlineExceeded:
		return nil, api.NewError(api.ErrUnavailable, fmt.Sprintf("%s did not finish within %v", t.name, timeout))
	case err != nil:
		te := &toolError{tool: t.name, err: err, stderr: strings.TrimSpace(errOut.buf.String())}
		// An empty clipboard is xclip -o's error, and no failure.
		if t.name != "xclip" || !strings.Contains(te.stderr, "not available") {
			w.logToolError(te, args[0])
		}
		return out.buf.Bytes(), te
	}
	return out.buf.Bytes(), nil
}

// logToolError writes a failed program's error and standard error to
// the log at Warn, with the subcommand it ran (never the other
// arguments: they may hold typed text).
func (w *worker) logToolError(te *toolError, sub string) {
	w.log.Warn("program failed", "program", te.tool, "command", sub, "error", te.err.Error(), "stderr", te.stderr)
}

// toolError is a program that exited with an error: a 503 on the wire
// (the input could not be delivered), the details in the log.
type toolError struct {
	tool, stderr string
	err          error
}

func (e *toolError) Error() string { return fmt.Sprintf("%s: %v: %s", e.tool, e.err, e.stderr) }

// Is makes a toolError an api.ErrUnavailable, the kind its answer has:
// the status comes from the kind (api.Status).
func (e *toolError) Is(target error) bool { return target == api.ErrUnavailable }

func (e *toolError) Unwrap() error { return e.err }

func (e *toolError) Answer() *api.Error {
	return api.NewError(api.ErrUnavailable, e.tool+" failed")
}

// capped keeps at most limit bytes and notes whether more came.
type capped struct {
	limit int
	buf   bytes.Buffer
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.over = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

// clipboard owns the xclip process that holds the CLIPBOARD selection
// after SET_CLIPBOARD or a TYPING through the clipboard: X selections
// live as long as their owner, so a holder runs until another client
// takes the selection, the next SET_CLIPBOARD replaces it, or the worker
// stops (stop, and PR_SET_PDEATHSIG if the worker dies).
type clipboard struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// maxClipboard caps GET clipboard.
const maxClipboard = 1 << 20

// clipboardRead bounds the wait for the selection's owner to answer.
const clipboardRead = 5 * time.Second

// setClipboard makes text the CLIPBOARD selection and returns once the
// new holder owns it.
func (w *worker) setClipboard(ctx context.Context, x *xconn, text string) error {
	if w.xclip.path == "" {
		return w.xclip.unavailable()
	}
	c := &w.clip
	c.mu.Lock()
	defer c.mu.Unlock()
	sel, err := x.atom("CLIPBOARD")
	if err != nil {
		return err
	}
	held := c.cmd != nil
	prev, err := reply(x, xproto.GetSelectionOwner(x.c, sel).Reply)
	if err != nil {
		return err
	}
	c.stopLocked()
	if held && prev.Owner != 0 {
		// The X server drops the old holder's ownership when it has seen
		// the holder's connection close, which may come after the
		// holder's exit. Until then the old owner is still named, and a
		// new xclip may be given the same window id (the server reuses a
		// closed client's ids): "the owner changed" would never be seen.
		// So the old ownership is waited out first (at most a second:
		// another client may have taken the selection since).
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			r, err := reply(x, xproto.GetSelectionOwner(x.c, sel).Reply)
			if err != nil {
				return err
			}
			if r.Owner != prev.Owner {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	before, err := reply(x, xproto.GetSelectionOwner(x.c, sel).Reply)
	if err != nil {
		return err
	}
	cmd := exec.Command(w.xclip.path, "-selection", "clipboard", "-i", "-quiet")
	cmd.Env = w.childEnv
	cmd.Stdin = strings.NewReader(text)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		te := &toolError{tool: "xclip", err: err}
		w.logToolError(te, "-i")
		return te
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // ends when xclip does
	c.cmd, c.done = cmd, done
	deadline := time.Now().Add(3 * time.Second)
	for {
		r, err := reply(x, xproto.GetSelectionOwner(x.c, sel).Reply)
		if err != nil {
			return err
		}
		if r.Owner != 0 && r.Owner != before.Owner {
			return nil
		}
		select {
		case <-done:
			te := &toolError{tool: "xclip", err: errors.New("exited before it owned the clipboard")}
			w.logToolError(te, "-i")
			return te
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stopLocked()
			return api.NewError(api.ErrUnavailable, "xclip did not take the clipboard within 3 s")
		}
	}
}

// stop ends the holder, if any.
func (c *clipboard) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
}

func (c *clipboard) stopLocked() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd, c.done = nil, nil
}

// readClipboard is the CLIPBOARD selection as text ("" when nobody owns
// it or it holds no text).
func (w *worker) readClipboard(ctx context.Context) (string, error) {
	out, err := w.run(ctx, w.xclip, clipboardRead, nil, maxClipboard, "-selection", "clipboard", "-o")
	var te *toolError
	if errors.As(err, &te) && strings.Contains(te.stderr, "not available") {
		return "", nil // an empty clipboard
	}
	var ae *api.Error
	if errors.As(err, &ae) && errors.Is(ae, api.ErrTooLarge) {
		return "", api.NewError(api.ErrTooLarge, "the clipboard holds more than 1 MiB of text")
	}
	if err != nil {
		return "", err
	}
	return strings.ToValidUTF8(string(out), "\uFFFD"), nil
}

// childEnv is the environment of the programs the worker runs: its own
// without a credential (the worker holds the daemon's key; xdotool, xclip
// and ffmpeg need none), with DISPLAY and XAUTHORITY as the worker was
// given them.
func childEnv(display, xauth string) []string {
	env := credenv.Environ("DISPLAY", "XAUTHORITY")
	env = append(env, "DISPLAY="+display)
	if xauth != "" {
		env = append(env, "XAUTHORITY="+xauth)
	}
	return env
}
