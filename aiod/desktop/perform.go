package desktop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
	"github.com/a2c-smcp/a2c-go/aiod/internal/serde"
)

// Input timings.
const (
	keyTimeout = 5 * time.Second
	typeDelay  = 8 // ms between typed characters (xdotool type --delay)
)

// errNoAccessibility is the answer of the accessibility routes and the
// NODE_* actions: this worker has no accessibility backend (digest §2.2,
// a documented permanent state).
var errNoAccessibility = api.NewError(api.ErrNotImplemented, "No accessibility backend: this computer-use worker does not read the accessibility tree").
	WithHint("use screenshots and pointer actions; GET /capabilities says accessibility:false").
	WithData(map[string]any{"accessibility_backend": nil})

// perform runs one validated action. The caller holds w.input, so no
// other input reaches the display meanwhile.
func (w *worker) perform(ctx context.Context, a *action) error {
	switch a.Type {
	case "WAIT":
		t := time.NewTimer(time.Duration(a.Duration * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case "NODE_FOCUS", "NODE_INVOKE", "NODE_SET_VALUE":
		return errNoAccessibility
	}
	err := w.withX(func(x *xconn) error {
		// a server that does not answer now gets no input: it would run
		// whenever the server resumes, long after the client gave up
		if err := x.ping(); err != nil {
			return err
		}
		return w.performX(ctx, x, a)
	})
	var xe xgb.Error
	if errors.As(err, &xe) {
		w.log.Warn("X request failed", "action", a.Type, "error", err.Error())
		return api.NewError(api.ErrUnavailable, "the X server refused the input")
	}
	return err
}

// isAnswer: err already words itself for the client.
func isAnswer(err error) bool {
	var ae *api.Error
	var an api.Answerer
	var se *serde.Error
	return errors.As(err, &ae) || errors.As(err, &an) || errors.As(err, &se)
}

var buttons = map[string]byte{"left": 1, "middle": 2, "right": 3}

func (w *worker) performX(ctx context.Context, x *xconn, a *action) error {
	switch a.Type {
	case "MOVE_TO", "MOVE_REL", "DRAG_TO", "DRAG_REL", "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK", "MOUSE_DOWN", "MOUSE_UP", "SCROLL":
		if !x.xtest {
			return api.NewError(api.ErrUnavailable, "the X server has no XTEST extension: pointer input is unavailable")
		}
	}
	switch a.Type {
	case "MOVE_TO":
		return x.motion(a.X, a.Y)
	case "MOVE_REL", "DRAG_REL":
		px, py, err := x.pointer()
		if err != nil {
			return err
		}
		scr, err := x.size()
		if err != nil {
			return err
		}
		tx, ty := px+a.DX, py+a.DY
		if err := onScreen(tx, ty, scr, []string{"body"}); err != nil {
			return fieldError([]string{"body"}, "x_offset", fmt.Sprintf("the move from (%d,%d) by (%d,%d) leaves the screen (%dx%d)", px, py, a.DX, a.DY, scr.Width, scr.Height))
		}
		if a.Type == "MOVE_REL" {
			return x.motion(tx, ty)
		}
		return drag(x, px, py, tx, ty)
	case "DRAG_TO":
		px, py, err := x.pointer()
		if err != nil {
			return err
		}
		return drag(x, px, py, a.X, a.Y)
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK":
		if a.HasXY {
			if err := x.motion(a.X, a.Y); err != nil {
				return err
			}
		}
		b := buttons[a.Button]
		for range a.NumClicks {
			if err := x.button(b, true); err != nil {
				return err
			}
			if err := x.button(b, false); err != nil {
				return err
			}
		}
		return nil
	case "MOUSE_DOWN", "MOUSE_UP":
		b, down := buttons[a.Button], a.Type == "MOUSE_DOWN"
		if err := x.button(b, down); err != nil {
			return err
		}
		w.held.button(b, down)
		return nil
	case "SCROLL":
		// X scrolls with buttons: 4 up, 5 down, 6 left, 7 right; +dy is
		// up and +dx right (1.x).
		for _, s := range []struct {
			n        int
			pos, neg byte
		}{{a.DY, 4, 5}, {a.DX, 7, 6}} {
			b := s.pos
			if s.n < 0 {
				b = s.neg
			}
			for range abs(s.n) {
				if err := x.button(b, true); err != nil {
					return err
				}
				if err := x.button(b, false); err != nil {
					return err
				}
			}
		}
		return nil
	case "TYPING":
		if a.UseClipboard {
			if err := w.setClipboard(ctx, x, a.Text); err != nil {
				return err
			}
			_, err := w.run(ctx, w.xdotool, keyTimeout, nil, 4096, "key", "--", "Shift_L+Insert")
			return err
		}
		// at most maxTypedText characters: 5 s + 2000 × 16 ms = 37 s
		timeout := keyTimeout + time.Duration(len(a.Text))*time.Duration(typeDelay*2)*time.Millisecond
		// the text on standard input: an argument is capped at 128 KiB
		// (Linux's MAX_ARG_STRLEN), and stays out of the process list
		_, err := w.run(ctx, w.xdotool, timeout, strings.NewReader(a.Text), 4096, "type", "--delay", strconv.Itoa(typeDelay), "--file", "-")
		return err
	case "PRESS", "HOTKEY":
		_, err := w.run(ctx, w.xdotool, keyTimeout, nil, 4096, "key", "--", strings.Join(a.Keys, "+"))
		return err
	case "KEY_DOWN":
		if _, err := w.run(ctx, w.xdotool, keyTimeout, nil, 4096, "keydown", "--", a.Keys[0]); err != nil {
			return err
		}
		w.held.key(a.Keys[0], true)
		return nil
	case "KEY_UP":
		if _, err := w.run(ctx, w.xdotool, keyTimeout, nil, 4096, "keyup", "--", a.Keys[0]); err != nil {
			return err
		}
		w.held.key(a.Keys[0], false)
		return nil
	case "SET_CLIPBOARD":
		return w.setClipboard(ctx, x, a.Text)
	case "WINDOW_ACTIVATE", "WINDOW_MINIMIZE":
		win := xproto.Window(a.Window)
		ok, err := x.exists(win)
		if err != nil {
			return err
		}
		if !ok {
			return api.NewError(api.ErrNotFound, fmt.Sprintf("window %d does not exist (closed?)", a.Window)).
				WithHint("list the windows again (GET /v2/computer/windows)").WithField("window_id")
		}
		if a.Type == "WINDOW_ACTIVATE" {
			return x.activate(win)
		}
		return x.minimize(win)
	}
	return api.NewError(api.ErrInternal, "unhandled action "+a.Type) // decodeAction admits no other type
}

// drag presses the left button at (fx, fy), moves through the midpoint
// to (tx, ty) (applications start a drag on motion with the button
// held) and releases there.
func drag(x *xconn, fx, fy, tx, ty int) error {
	if err := x.motion(fx, fy); err != nil {
		return err
	}
	if err := x.button(1, true); err != nil {
		return err
	}
	if err := x.motion((fx+tx)/2, (fy+ty)/2); err != nil {
		return err
	}
	if err := x.motion(tx, ty); err != nil {
		return err
	}
	return x.button(1, false)
}

// heldInput is what KEY_DOWN and MOUSE_DOWN left pressed: the worker
// releases it when it stops, so a stuck Shift or button does not outlive
// the client that pressed it (the display may serve the next worker).
type heldInput struct {
	mu      sync.Mutex
	keys    map[string]bool // keysyms
	buttons map[byte]bool
}

func (h *heldInput) key(k string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = map[string]bool{}
	}
	if down {
		h.keys[k] = true
	} else {
		delete(h.keys, k)
	}
}

func (h *heldInput) button(b byte, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buttons == nil {
		h.buttons = map[byte]bool{}
	}
	if down {
		h.buttons[b] = true
	} else {
		delete(h.buttons, b)
	}
}

// take returns what is held and forgets it.
func (h *heldInput) take() (keys []string, buttons []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.keys {
		keys = append(keys, k)
	}
	for b := range h.buttons {
		buttons = append(buttons, b)
	}
	h.keys, h.buttons = nil, nil
	return keys, buttons
}

// releaseHeld lets go of every key and button the clients left pressed,
// within releaseWait; a display that cannot be reached keeps them (it
// has nobody to serve then).
func (w *worker) releaseHeld() {
	keys, btns := w.held.take()
	if len(keys) == 0 && len(btns) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	for _, k := range keys {
		if _, err := w.run(ctx, w.xdotool, releaseWait, nil, 4096, "keyup", "--", k); err != nil {
			w.log.Warn("could not release a held key at stop", "key", k, "error", err.Error())
		}
	}
	_ = w.withX(func(x *xconn) error {
		for _, b := range btns {
			if err := x.button(b, false); err != nil {
				w.log.Warn("could not release a held button at stop", "button", b, "error", err.Error())
			}
		}
		return nil
	})
}

// releaseWait bounds the release of held input at stop.
const releaseWait = 3 * time.Second
