package sio

// wsOwner receives what a WebSocket peer (the event loop's or gorilla's)
// reads: the Engine.IO connection, or in tests a bare echo. wsFrame gets
// every complete message in order and returns false when the peer must
// stop reading (it then closes the socket); wsClosed is called once when
// the WebSocket has ended, with reasonTransportClose or
// reasonTransportError.
type wsOwner interface {
	wsFrame(p wsPeer, f frame) bool
	wsClosed(p wsPeer, reason string)
}
