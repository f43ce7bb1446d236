package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/desktools"
)

// firstDisplay is the first X display number aiod --desktop tries (:99,
// as the published images); a number in use (by another X server, or a
// lock file of a live one) moves it to the next.
const firstDisplay = 99

// displayTries is how many display numbers StartDisplay tries.
const displayTries = 20

// DisplayOptions shape [StartDisplay].
type DisplayOptions struct {
	Width, Height int
	// Start starts a command (the sandbox's Wrap under isolation).
	Start func(cmd *exec.Cmd) func() error
	// Env is the X server's environment.
	Env    []string
	Logger *slog.Logger
	// Sandboxed is Program.Sandboxed.
	Sandboxed bool
}

// StartDisplay starts Xvfb (`Xvfb :N -screen 0 WxHx24 -nolisten tcp`) on
// the first free display number from [firstDisplay] up and supervises
// it; a restarted Xvfb keeps its number (so the programs on it find it
// again). It returns once the server accepts connections (Xvfb writes
// its number on -displayfd when it does). A missing Xvfb is a
// *[MissingError].
func StartDisplay(ctx context.Context, o DisplayOptions) (*Supervisor, int, error) {
	xvfb := desktools.Get("Xvfb")
	bin, err := exec.LookPath(xvfb.Name)
	if err != nil {
		return nil, 0, &MissingError{Program: xvfb.Name, Package: xvfb.Package, Detail: "looked for " + xvfb.Name + " on PATH"}
	}
	var lastErr error
	for n := firstDisplay; n < firstDisplay+displayTries; n++ {
		// This start's -displayfd pipe: r is read here, w is Xvfb's fd 3.
		// A start that fails before Started (the exec, the sandbox) leaves
		// both open: the next Command and a failed Start close them.
		var r, w *os.File
		closePipe := func() {
			for _, f := range []*os.File{r, w} {
				if f != nil {
					_ = f.Close()
				}
			}
			r, w = nil, nil
		}
		p := Program{
			Name: "Xvfb", Logger: o.Logger, Sandboxed: o.Sandboxed, Start: o.Start, Grace: 3 * time.Second, ReadyTimeout: 20 * time.Second,
			Command: func() (*exec.Cmd, error) {
				closePipe()
				var err error
				if r, w, err = os.Pipe(); err != nil {
					return nil, err
				}
				cmd := exec.Command(bin, ":"+strconv.Itoa(n), "-screen", "0", fmt.Sprintf("%dx%dx24", o.Width, o.Height),
					"-nolisten", "tcp", "-displayfd", "3")
				cmd.ExtraFiles = []*os.File{w}
				cmd.Env = o.Env
				cmd.Dir = "/"
				return cmd, nil
			},
			Started: func(ctx context.Context, cmd *exec.Cmd) error {
				_ = w.Close() // Xvfb has its copy
				w = nil
				defer closePipe()
				return awaitDisplay(ctx, r, n, 20*time.Second)
			},
		}
		s, err := Start(ctx, p)
		if err == nil {
			return s, n, nil
		}
		closePipe()
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, 0, fmt.Errorf("no free X display from :%d to :%d: %w", firstDisplay, firstDisplay+displayTries-1, lastErr)
}

// awaitDisplay reads the display number Xvfb writes on its -displayfd
// once it accepts connections; end of file first means it exited (the
// display was taken).
func awaitDisplay(ctx context.Context, r *os.File, want int, timeout time.Duration) error {
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = r.SetReadDeadline(time.Now()) })
	defer stop()
	line, err := bufio.NewReader(r).ReadString('\n')
	if got, perr := strconv.Atoi(strings.TrimSpace(line)); perr == nil && got == want {
		return nil
	}
	if err == nil {
		err = errors.New("unexpected report " + strconv.Quote(line))
	}
	return fmt.Errorf("display :%d did not come up: %w", want, err)
}
