//go:build !linux

package desktop

// shmState is empty off Linux: captures use GetImage.
type shmState struct{}

func (x *xconn) initShm() {}

func (x *xconn) captureShm(screen) (frame, func(), bool, error) { return frame{}, nil, false, nil }

func (x *xconn) freeShm() {}
