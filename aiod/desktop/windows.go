package desktop

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/jezek/xgb/xproto"
)

// maxWindows caps GET windows.
const maxWindows = 200

// window is one entry of GET windows.
type window struct {
	WindowID  string  `json:"window_id"`
	Title     string  `json:"title"`
	ProcessID *uint32 `json:"process_id"`
	Bounds    *rect   `json:"bounds"`
	Minimized bool    `json:"minimized"`
}

// rect is a window's bounds in screen coordinates.
type rect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

// windows lists the top-level windows: the window manager's client list
// (_NET_CLIENT_LIST) when there is an EWMH window manager, else the
// viewable children of the root that have a name (what xdotool search
// --onlyvisible --name . finds). Windows that vanish while they are read
// are left out.
func (x *xconn) windows() ([]window, error) {
	ids, err := x.clientList()
	if err != nil {
		return nil, err
	}
	managed := ids != nil
	if !managed {
		tree, err := reply(x, xproto.QueryTree(x.c, x.root).Reply)
		if err != nil {
			return nil, err
		}
		for _, w := range tree.Children {
			a, err := reply(x, xproto.GetWindowAttributes(x.c, w).Reply)
			if err != nil {
				var bad xproto.WindowError
				if errors.As(err, &bad) {
					continue // it vanished meanwhile
				}
				return nil, err
			}
			if a.MapState == xproto.MapStateViewable {
				ids = append(ids, w)
			}
		}
	}
	out := []window{}
	for _, w := range ids {
		if len(out) == maxWindows {
			break
		}
		win, err := x.window(w)
		if err != nil {
			var bad xproto.WindowError
			if errors.As(err, &bad) {
				continue
			}
			return nil, err
		}
		if !managed && win.Title == "" {
			continue
		}
		out = append(out, win)
	}
	return out, nil
}

// clientList is _NET_CLIENT_LIST, nil without an EWMH window manager.
func (x *xconn) clientList() ([]xproto.Window, error) {
	r, err := x.property(x.root, "_NET_CLIENT_LIST", 4096)
	if err != nil || r == nil {
		return nil, err
	}
	ids := []xproto.Window{}
	for _, v := range cardinals(r) {
		ids = append(ids, xproto.Window(v))
	}
	return ids, nil
}

// window reads one window's title, process, bounds and state. A window
// that is gone is an xproto.WindowError (or DrawableError).
func (x *xconn) window(w xproto.Window) (window, error) {
	g, err := reply(x, xproto.GetGeometry(x.c, xproto.Drawable(w)).Reply)
	if err != nil {
		if _, ok := err.(xproto.DrawableError); ok {
			return window{}, xproto.WindowError{BadValue: uint32(w)}
		}
		return window{}, err
	}
	t, err := reply(x, xproto.TranslateCoordinates(x.c, w, x.root, 0, 0).Reply)
	if err != nil {
		return window{}, err
	}
	win := window{WindowID: strconv.FormatUint(uint64(w), 10),
		Bounds: &rect{X: int(t.DstX), Y: int(t.DstY), Width: int(g.Width), Height: int(g.Height)}}
	if r, err := x.property(w, "_NET_WM_NAME", 1024); err == nil && r != nil && r.Format == 8 {
		win.Title = string(r.Value)
	} else if r, err := x.property(w, "WM_NAME", 1024); err == nil && r != nil && r.Format == 8 {
		win.Title = latin1(r.Value)
	}
	if !utf8.ValidString(win.Title) {
		win.Title = latin1([]byte(win.Title))
	}
	if r, err := x.property(w, "_NET_WM_PID", 1); err == nil {
		if v := cardinals(r); len(v) == 1 && v[0] != 0 {
			pid := v[0]
			win.ProcessID = &pid
		}
	}
	win.Minimized = x.minimized(w)
	return win, nil
}

// iconicState is ICCCM's WM_STATE value of an iconified window.
const iconicState = 3

// minimized: _NET_WM_STATE holds _NET_WM_STATE_HIDDEN, or WM_STATE is
// IconicState.
func (x *xconn) minimized(w xproto.Window) bool {
	hidden, err := x.atom("_NET_WM_STATE_HIDDEN")
	if err != nil {
		return false
	}
	if r, err := x.property(w, "_NET_WM_STATE", 64); err == nil {
		for _, v := range cardinals(r) {
			if xproto.Atom(v) == hidden {
				return true
			}
		}
	}
	if r, err := x.property(w, "WM_STATE", 2); err == nil {
		if v := cardinals(r); len(v) > 0 && v[0] == iconicState {
			return true
		}
	}
	return false
}

// latin1 reads ISO 8859-1 bytes (WM_NAME's STRING type).
func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// exists reports whether w is a window a client may act on now: a
// window (GetWindowAttributes answers; a pixmap or a font id does not),
// and not the root window.
func (x *xconn) exists(w xproto.Window) (bool, error) {
	if w == x.root {
		return false, nil
	}
	_, err := reply(x, xproto.GetWindowAttributes(x.c, w).Reply)
	switch err.(type) {
	case nil:
		return true, nil
	case xproto.DrawableError, xproto.WindowError:
		return false, nil
	}
	return false, err
}

// hasWM reports whether an EWMH window manager runs
// (_NET_SUPPORTING_WM_CHECK on the root).
func (x *xconn) hasWM() bool {
	r, err := x.property(x.root, "_NET_SUPPORTING_WM_CHECK", 1)
	return err == nil && len(cardinals(r)) == 1
}

// clientMessage sends a 32-bit ClientMessage about w to the root, where
// the window manager listens (EWMH, ICCCM).
func (x *xconn) clientMessage(w xproto.Window, typ string, data ...uint32) error {
	a, err := x.atom(typ)
	if err != nil {
		return err
	}
	var d [5]uint32
	copy(d[:], data)
	ev := xproto.ClientMessageEvent{Format: 32, Window: w, Type: a, Data: xproto.ClientMessageDataUnionData32New(d[:])}
	return check(x, xproto.SendEventChecked(x.c, false, x.root,
		xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes())).Check)
}

// activate raises and focuses w: _NET_ACTIVE_WINDOW for the window
// manager (what xdotool windowactivate sends), or without one a map,
// raise and input focus.
func (x *xconn) activate(w xproto.Window) error {
	if x.hasWM() {
		// source 2: a pager, which window managers obey without focus
		// stealing checks
		return x.clientMessage(w, "_NET_ACTIVE_WINDOW", 2, 0, 0)
	}
	if err := check(x, xproto.MapWindowChecked(x.c, w).Check); err != nil {
		return err
	}
	if err := check(x, xproto.ConfigureWindowChecked(x.c, w, xproto.ConfigWindowStackMode, []uint32{xproto.StackModeAbove}).Check); err != nil {
		return err
	}
	return check(x, xproto.SetInputFocusChecked(x.c, xproto.InputFocusPointerRoot, w, 0).Check)
}

// minimize iconifies w: WM_CHANGE_STATE IconicState for the window
// manager (ICCCM §4.1.4, what xdotool windowminimize sends), or an
// unmap without one.
func (x *xconn) minimize(w xproto.Window) error {
	if x.hasWM() {
		return x.clientMessage(w, "WM_CHANGE_STATE", iconicState)
	}
	return check(x, xproto.UnmapWindowChecked(x.c, w).Check)
}
