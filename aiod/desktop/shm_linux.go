package desktop

import (
	"errors"
	"sync"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"golang.org/x/sys/unix"
)

// Screenshots through MIT-SHM: the X server copies the screen into a
// System V shared memory segment the worker has mapped, instead of
// sending megabytes over the socket, which makes a capture several
// times cheaper than a plain GetImage. It needs the worker and the
// server in one IPC namespace (both in the sandbox, or both outside);
// when the server cannot attach the segment, captures fall back to
// GetImage for the rest of the connection.

// shmState is a connection's shared segment. Invariants: mu is held
// from a capture until its pixels have been encoded (the next capture
// overwrites them); the segment is marked for removal as soon as the
// server has attached it, so it disappears when both sides detach, even
// if the worker is killed.
type shmState struct {
	mu  sync.Mutex
	off bool // MIT-SHM unusable on this connection
	seg shm.Seg
	mem []byte // our mapping; nil when none
}

// initShm notes whether the server offers MIT-SHM.
func (x *xconn) initShm() {
	x.shm.off = shm.Init(x.c) != nil
}

// captureShm captures scr through the shared segment. ok false means
// MIT-SHM is not usable (the caller falls back); release unlocks the
// segment once the pixels have been read.
func (x *xconn) captureShm(scr screen) (f frame, release func(), ok bool, err error) {
	s := &x.shm
	s.mu.Lock()
	if s.off {
		s.mu.Unlock()
		return frame{}, nil, false, nil
	}
	n := scr.Width * scr.Height * 4
	if len(s.mem) < n {
		x.freeShmLocked()
		if err := x.newShmLocked(n); err != nil {
			s.off = true
			s.mu.Unlock()
			return frame{}, nil, false, nil
		}
	}
	_, err = reply(x, shm.GetImage(x.c, xproto.Drawable(x.root), 0, 0, uint16(scr.Width), uint16(scr.Height),
		0xffffffff, xproto.ImageFormatZPixmap, s.seg, 0).Reply)
	if err != nil {
		var xe xgb.Error
		if errors.As(err, &xe) { // the server refuses: plain GetImage from now on
			s.off = true
			s.mu.Unlock()
			return frame{}, nil, false, nil
		}
		s.mu.Unlock()
		return frame{}, nil, true, err
	}
	return frame{pix: s.mem[:n], width: scr.Width, height: scr.Height, stride: scr.Width * 4}, s.mu.Unlock, true, nil
}

// newShmLocked makes a segment of n bytes, maps it and has the server
// attach it.
func (x *xconn) newShmLocked(n int) error {
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, n, unix.IPC_CREAT|0o600)
	if err != nil {
		return err
	}
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		return err
	}
	seg, err := shm.NewSegId(x.c)
	if err == nil {
		err = check(x, shm.AttachChecked(x.c, seg, uint32(id), false).Check)
	}
	_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) // gone once both sides detach
	if err != nil {
		_ = unix.SysvShmDetach(mem)
		return err
	}
	x.shm.seg, x.shm.mem = seg, mem
	return nil
}

// freeShm detaches the segment (the connection is closing).
func (x *xconn) freeShm() {
	x.shm.mu.Lock()
	defer x.shm.mu.Unlock()
	x.freeShmLocked()
	x.shm.off = true
}

func (x *xconn) freeShmLocked() {
	if x.shm.mem == nil {
		return
	}
	_ = check(x, shm.DetachChecked(x.c, x.shm.seg).Check)
	_ = unix.SysvShmDetach(x.shm.mem)
	x.shm.mem = nil
}
