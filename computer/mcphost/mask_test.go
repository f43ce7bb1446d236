package mcphost

import (
	"errors"
	"testing"
)

// TestMaskSecrets: an input's value in an upstream's error (a failed
// exec of a rendered command, a connect to a rendered URL) is masked; an
// error without one is returned as it is.
func TestMaskSecrets(t *testing.T) {
	plain := errors.New("connect: refused")
	for _, tc := range []struct {
		err     error
		secrets []string
		want    string
	}{
		{errors.New(`exec: "/opt/s3cr3t-tok/bin": no such file`), []string{"s3cr3t-tok"}, `exec: "/opt/***/bin": no such file`},
		{errors.New("GET https://h/mcp?k=abcd1234&x=abcd1234: 401"), []string{"abcd1234", ""}, "GET https://h/mcp?k=***&x=***: 401"},
		{plain, []string{"other"}, "connect: refused"},
		{nil, []string{"x"}, ""},
	} {
		got := maskSecrets(tc.err, tc.secrets)
		if (got == nil) != (tc.want == "") || got != nil && got.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.err, got, tc.want)
		}
	}
	if maskSecrets(plain, []string{"zzz"}) != plain {
		t.Error("an error without a secret was replaced")
	}
}
