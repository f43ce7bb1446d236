package sio

import (
	"encoding/binary"
	"unicode/utf8"
)

// WebSocket close codes (RFC 6455 §7.4.1 and the IANA registry). Codes the
// server sends are the ones it can justify: 1000 when echoing a close
// without a code, 1002 for a protocol violation (including an invalid
// close code received), 1007 for text that is not UTF-8, 1009 for a
// message over MaxPayload.
const (
	closeNormal          uint16 = 1000
	closeGoingAway       uint16 = 1001
	closeProtocolError   uint16 = 1002
	closeUnsupportedData uint16 = 1003
	closeNoStatus        uint16 = 1005 // only reported locally, never sent
	closeAbnormal        uint16 = 1006 // only reported locally, never sent
	closeInvalidPayload  uint16 = 1007
	closePolicyViolation uint16 = 1008
	closeTooBig          uint16 = 1009
	closeMandatoryExt    uint16 = 1010
	closeInternalError   uint16 = 1011
	closeTryAgainLater   uint16 = 1013 // highest IANA-registered code we accept, with 1012 and 1014
	closeTLSHandshake    uint16 = 1015 // only reported locally, never sent
)

// The reasons a WebSocket's end is reported with to the connection (and on
// to Handler.Disconnect), as Socket.IO names them: the peer closed cleanly
// or the network went away, versus the peer broke the protocol.
const (
	reasonTransportClose = "transport close"
	reasonTransportError = "transport error"
)

// validReceivedCloseCode reports whether a peer may send code in a close
// frame (RFC 6455 §7.4): the defined codes other than those reserved for
// local use (1005, 1006, 1015) and the unassigned 1004, the IANA-registered
// 1012-1014, and the application ranges 3000-4999. Everything else (below
// 1000, 1016-2999, 5000 and up) is a protocol error.
func validReceivedCloseCode(code uint16) bool {
	switch {
	case code >= closeNormal && code <= closeUnsupportedData:
		return true
	case code >= closeInvalidPayload && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// closeReply decides the answer to a close frame's payload: the frame to
// send back and whether the peer closed cleanly. A valid code is echoed
// (no code is answered with 1000); a one-byte payload or an invalid code
// is a protocol error (1002) and is not echoed; a reason that is not
// UTF-8 is answered with 1007.
func closeReply(payload []byte) (reply uint16, clean bool) {
	switch {
	case len(payload) == 0:
		return closeNormal, true
	case len(payload) == 1:
		return closeProtocolError, false
	}
	code := binary.BigEndian.Uint16(payload)
	if !validReceivedCloseCode(code) {
		return closeProtocolError, false
	}
	if !utf8.Valid(payload[2:]) {
		return closeInvalidPayload, false
	}
	return code, true
}

// closePayload is the body of a close frame carrying code and no reason.
func closePayload(code uint16) []byte { return binary.BigEndian.AppendUint16(nil, code) }
