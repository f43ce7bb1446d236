package desktop

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// display is the worker's one connection to the X server, shared by
// every request (xgb serializes requests itself). A connection that
// breaks (the server restarted, the socket closed) or stalls (a reply
// timed out) is dropped and the next use dials again; until that
// succeeds the routes answer 503.
//
// Invariants: conn, when non-nil, has its event drain running (xgb's
// event channel is bounded and blocks replies once full, and
// MappingNotify reaches every client whatever its event mask); dead is
// closed by the drain when the connection ends. At most one handshake
// runs at a time (dial is non-nil while it does), and mu is never held
// across one.
type display struct {
	name string

	mu     sync.Mutex
	cur    *xconn
	dial   *dialing  // the handshake in flight, nil when none
	since  time.Time // end of the last failed dial, to pace retries
	closed bool      // close ran: a handshake that ends later is closed
}

// dialing is one handshake. settled is closed when its callers have an
// answer: the connection (display.cur), err, or the timeout; the
// handshake itself may run on after a timeout until the server answers
// or the socket fails, and no other starts meanwhile.
type dialing struct {
	settled chan struct{}
	err     error // why it failed; written before settled is closed
}

// xconn is one live connection and what was learnt from its setup.
type xconn struct {
	c     *xgb.Conn
	root  xproto.Window
	depth byte
	bpp   byte // bits per pixel of the root's depth in ZPixmap images
	lsb   bool // image byte order LSBFirst
	xtest bool // the XTEST extension is there
	dead  chan struct{}
	// stalled: a reply timed out; the connection is being dropped
	stalled atomic.Bool
	atoms   sync.Map // name → xproto.Atom
	shm     shmState
	closing sync.Once
}

// replyWait bounds each X request's reply: a server that does not
// answer (stopped, wedged) makes the request fail with errXTimeout
// rather than hold the route, and the connection is dropped (see
// display.broken) so that the next use dials again.
const replyWait = 3 * time.Second

// errXTimeout is a reply that did not come within replyWait; once one
// has timed out, every later request on the connection fails at once.
var errXTimeout = errors.New("the X server did not answer within 3 s")

// reply runs f (one X request and the wait for its reply) within
// replyWait. On timeout f's goroutine is left to end when the reply
// comes or the connection closes (broken closes it), and x is marked
// stalled.
func reply[T any](x *xconn, f func() (T, error)) (T, error) {
	var zero T
	if x.stalled.Load() {
		return zero, errXTimeout
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	t := time.NewTimer(replyWait)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-t.C:
		x.stalled.Store(true)
		return zero, errXTimeout
	}
}

// check is reply for a request whose reply is only its success.
func check(x *xconn, f func() error) error {
	_, err := reply(x, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// ping is a round trip (GetInputFocus): input is sent only to a server
// that answers now, so that an input whose wait timed out does not run
// later when a stopped server resumes.
func (x *xconn) ping() error {
	_, err := reply(x, xproto.GetInputFocus(x.c).Reply)
	return err
}

// errNoDisplay is the connection failure (a 503 on the wire).
var errNoDisplay = errors.New("the X display is not reachable")

// dialTimeout bounds the connection handshake.
const dialTimeout = 5 * time.Second

// retryPause is how long after a failed dial the next request fails
// fast instead of dialling again.
const retryPause = 500 * time.Millisecond

// get returns the live connection, dialling if there is none (or the
// one there is has ended or stalled). Callers arriving while a dial is
// in flight wait for it; while one that timed out still runs, or within
// retryPause of a failure, they fail at once.
func (d *display) get() (*xconn, error) {
	d.mu.Lock()
	if x := d.live(); x != nil {
		d.mu.Unlock()
		return x, nil
	}
	dl := d.dial
	if dl == nil {
		if !d.since.IsZero() && time.Since(d.since) < retryPause {
			d.mu.Unlock()
			return nil, errNoDisplay
		}
		dl = d.startDial()
	}
	d.mu.Unlock()
	<-dl.settled
	d.mu.Lock()
	defer d.mu.Unlock()
	if x := d.live(); x != nil {
		return x, nil
	}
	if dl.err != nil {
		return nil, fmt.Errorf("%w: %w", errNoDisplay, dl.err)
	}
	return nil, errNoDisplay
}

// live is cur if it is usable; one that ended or stalled is dropped
// (and closed). mu is held.
func (d *display) live() *xconn {
	x := d.cur
	if x == nil {
		return nil
	}
	select {
	case <-x.dead:
	default:
		if !x.stalled.Load() {
			return x
		}
		go x.close() // a stalled server may never answer Close's round trip
	}
	d.cur = nil
	return nil
}

// startDial starts a handshake within dialTimeout; mu is held and no
// dial is in flight. The handshake's goroutine ends when xgb's does
// (xgb's handshake has no deadline of its own): a connection that comes
// after the timeout is kept, unless close ran meanwhile.
func (d *display) startDial() *dialing {
	dl := &dialing{settled: make(chan struct{})}
	d.dial = dl
	settle := func(err error) { // mu is held
		select {
		case <-dl.settled:
			return
		default:
		}
		dl.err = err
		if err != nil {
			d.since = time.Now()
		} else {
			d.since = time.Time{}
		}
		close(dl.settled)
	}
	timer := time.AfterFunc(dialTimeout, func() {
		d.mu.Lock()
		settle(errors.New("the X server did not complete the handshake"))
		d.mu.Unlock()
	})
	go func() {
		x, err := dialX(d.name)
		timer.Stop()
		d.mu.Lock()
		defer d.mu.Unlock()
		d.dial = nil
		if err == nil && d.closed {
			go x.close()
			err = errors.New("the display was closed")
		}
		if err == nil {
			d.cur = x
		}
		settle(err)
	}()
	return dl
}

// connect dials the display now (the worker's start): its error is the
// dial's own.
func (d *display) connect() error {
	d.mu.Lock()
	dl := d.dial
	if dl == nil {
		dl = d.startDial()
	}
	d.mu.Unlock()
	<-dl.settled
	return dl.err
}

// broken drops x after an error that is not an X protocol error (the
// connection itself failed), so the next use dials again.
func (d *display) broken(x *xconn, err error) {
	var xe xgb.Error
	if err == nil || errors.As(err, &xe) {
		return
	}
	d.mu.Lock()
	if d.cur == x {
		d.cur = nil
	}
	d.mu.Unlock()
	if errors.Is(err, errXTimeout) {
		x.stalled.Store(true)
		// xgb's Close waits for a round trip with the server, which does
		// not answer: this ends when it does or the socket fails.
		go x.close()
		return
	}
	x.close()
}

// close ends x's connection (and its shared memory segment), once
// however many droppers call it.
func (x *xconn) close() {
	x.closing.Do(func() {
		x.freeShm()
		x.c.Close()
	})
}

// close ends the connection; a handshake still in flight closes the
// connection it makes.
func (d *display) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.cur != nil {
		d.cur.close()
		<-d.cur.dead
		d.cur = nil
	}
}

// dialX connects to the display and reads what the worker needs of its
// setup. It has no deadline (xgb's handshake has none): display.get
// bounds the wait for it.
func dialX(name string) (*xconn, error) {
	c, err := xgb.NewConnDisplay(name)
	if err != nil {
		return nil, err
	}
	setup := xproto.Setup(c)
	scr := setup.DefaultScreen(c)
	x := &xconn{c: c, root: scr.Root, depth: scr.RootDepth, lsb: setup.ImageByteOrder == xproto.ImageOrderLSBFirst, dead: make(chan struct{})}
	for _, f := range setup.PixmapFormats {
		if f.Depth == scr.RootDepth {
			x.bpp = f.BitsPerPixel
		}
	}
	x.xtest = xtest.Init(c) == nil
	x.initShm()
	go func() { // the drain: see display's invariants
		defer close(x.dead)
		for {
			ev, xerr := c.WaitForEvent()
			if ev == nil && xerr == nil {
				return
			}
		}
	}()
	return x, nil
}

// size is the root window's current size (it changes with RandR).
func (x *xconn) size() (screen, error) {
	g, err := reply(x, xproto.GetGeometry(x.c, xproto.Drawable(x.root)).Reply)
	if err != nil {
		return screen{}, err
	}
	return screen{Width: int(g.Width), Height: int(g.Height)}, nil
}

// errPixelFormat is a screen whose pixels the fast path does not read.
var errPixelFormat = errors.New("unsupported pixel format")

// capture reads the whole root window's BGRX pixels: through MIT-SHM
// when it can (see shm_linux.go), else with GetImage. release must be
// called once the pixels have been read.
func (x *xconn) capture() (f frame, release func(), err error) {
	if x.bpp != 32 || !x.lsb || x.depth < 24 {
		return frame{}, nil, errPixelFormat
	}
	scr, err := x.size()
	if err != nil {
		return frame{}, nil, err
	}
	if f, release, ok, err := x.captureShm(scr); ok {
		return f, release, err
	}
	r, err := reply(x, xproto.GetImage(x.c, xproto.ImageFormatZPixmap, xproto.Drawable(x.root), 0, 0,
		uint16(scr.Width), uint16(scr.Height), 0xffffffff).Reply)
	if err != nil {
		return frame{}, nil, err
	}
	n := scr.Width * scr.Height * 4
	if len(r.Data) < n {
		return frame{}, nil, errPixelFormat
	}
	return frame{pix: r.Data[:n], width: scr.Width, height: scr.Height, stride: scr.Width * 4}, func() {}, nil
}

// pointer is the pointer's position on the root window.
func (x *xconn) pointer() (int, int, error) {
	r, err := reply(x, xproto.QueryPointer(x.c, x.root).Reply)
	if err != nil {
		return 0, 0, err
	}
	return int(r.RootX), int(r.RootY), nil
}

// errNoXTest is a server without the XTEST extension.
var errNoXTest = errors.New("the X server has no XTEST extension")

// motion moves the pointer to (px, py) and waits until the server has
// processed it (the reply of the checked request), like xdotool
// mousemove --sync.
func (x *xconn) motion(px, py int) error {
	if !x.xtest {
		return errNoXTest
	}
	return check(x, xtest.FakeInputChecked(x.c, xproto.MotionNotify, 0, 0, x.root, int16(px), int16(py), 0).Check)
}

// button presses (down) or releases a mouse button (1 left, 2 middle,
// 3 right, 4-7 the scroll directions).
func (x *xconn) button(b byte, down bool) error {
	if !x.xtest {
		return errNoXTest
	}
	t := byte(xproto.ButtonRelease)
	if down {
		t = xproto.ButtonPress
	}
	return check(x, xtest.FakeInputChecked(x.c, t, b, 0, x.root, 0, 0, 0).Check)
}

// atom interns name once per connection.
func (x *xconn) atom(name string) (xproto.Atom, error) {
	if a, ok := x.atoms.Load(name); ok {
		return a.(xproto.Atom), nil
	}
	r, err := reply(x, xproto.InternAtom(x.c, false, uint16(len(name)), name).Reply)
	if err != nil {
		return 0, err
	}
	x.atoms.Store(name, r.Atom)
	return r.Atom, nil
}

// property reads a window property of any type (at most max 32-bit
// units); a missing property is nil with no error.
func (x *xconn) property(w xproto.Window, name string, max uint32) (*xproto.GetPropertyReply, error) {
	a, err := x.atom(name)
	if err != nil {
		return nil, err
	}
	r, err := reply(x, xproto.GetProperty(x.c, false, w, a, xproto.GetPropertyTypeAny, 0, max).Reply)
	if err != nil || r.Format == 0 {
		return nil, err
	}
	return r, nil
}

// cardinals is a 32-bit property's values.
func cardinals(r *xproto.GetPropertyReply) []uint32 {
	if r == nil || r.Format != 32 {
		return nil
	}
	v := make([]uint32, 0, len(r.Value)/4)
	for i := 0; i+3 < len(r.Value); i += 4 {
		v = append(v, xgb.Get32(r.Value[i:]))
	}
	return v
}
