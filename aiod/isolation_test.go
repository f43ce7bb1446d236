package aiod

import "testing"

func TestIsolationMode(t *testing.T) {
	for _, c := range []struct {
		flags         []string
		env, def, out string
	}{
		{nil, "", "none", "none"},
		{nil, "", "namespaces", "namespaces"},
		{nil, "namespaces", "none", "namespaces"},
		{[]string{"--isolation", "none"}, "namespaces", "namespaces", "none"},
		{[]string{"-isolation=namespaces", "--port", "0"}, "", "none", "namespaces"},
		{[]string{"--isolation=none", "--isolation", "namespaces"}, "", "none", "namespaces"},
		{[]string{"--", "--isolation", "namespaces"}, "", "none", "none"},
		{[]string{"--workspace", "--isolation"}, "", "none", "none"},
	} {
		if got := isolationMode(c.flags, c.env, c.def); got != c.out {
			t.Errorf("isolationMode(%q, %q, %q) = %q, want %q", c.flags, c.env, c.def, got, c.out)
		}
	}
}
