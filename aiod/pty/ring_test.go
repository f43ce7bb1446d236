package pty

import "testing"

// TestParseMarker: the marker bodies the shell prints, with and without
// an exec id, and bodies that are not markers.
func TestParseMarker(t *testing.T) {
	type mark struct {
		kind byte
		code int
		exec string
	}
	for body, want := range map[string]mark{
		"S": {markStart, 0, ""}, "S;": {markStart, 0, ""}, "S;12": {markStart, 0, "12"},
		"E;0": {markEnd, 0, ""}, "E;130;": {markEnd, 130, ""}, "E;-1;7": {markEnd, -1, "7"},
		"X;2": {markExit, 2, ""}, "X;0;": {markExit, 0, ""},
	} {
		kind, code, exec, ok := parseMarker([]byte(body))
		if got := (mark{kind, code, exec}); !ok || got != want {
			t.Errorf("%q: %+v %v, want %+v", body, got, ok, want)
		}
	}
	for _, body := range []string{"", "E", "E;", "E;x", "E;1;x", "S;1;2", "Sx", "Q;1", "E;1;2;3", "S;${__aio_cur}"} {
		if kind, code, exec, ok := parseMarker([]byte(body)); ok {
			t.Errorf("%q parsed as %c %d %q", body, kind, code, exec)
		}
	}
}
