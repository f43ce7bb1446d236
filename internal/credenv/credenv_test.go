package credenv

import (
	"slices"
	"testing"
)

func TestStrip(t *testing.T) {
	in := []string{"PATH=/bin", "A2C_TOKEN=t", "AIO_API_KEY=k", "SANDBOX_API_KEY=k", "A2C_REDIS_URL=redis://:pw@h", "A2C_CLUSTER_KEY=k",
		"EXTRA_MCP_SERVERS={}", "OTEL_EXPORTER_OTLP_HEADERS=Authorization=x", "OTEL_EXPORTER_OTLP_TRACES_HEADERS=a=b",
		"A2C_TOKENS=kept", "DISPLAY=:1", "HOME=/root", "NOEQUALS"}
	keep := slices.Clone(in)
	for _, tc := range []struct {
		also []string
		want []string
	}{
		{nil, []string{"PATH=/bin", "A2C_TOKENS=kept", "DISPLAY=:1", "HOME=/root", "NOEQUALS"}},
		{[]string{"DISPLAY"}, []string{"PATH=/bin", "A2C_TOKENS=kept", "HOME=/root", "NOEQUALS"}},
	} {
		if got := Strip(in, tc.also...); !slices.Equal(got, tc.want) {
			t.Errorf("Strip(also %q) = %q, want %q", tc.also, got, tc.want)
		}
	}
	if !slices.Equal(in, keep) {
		t.Errorf("Strip changed its input: %q", in)
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("A2C_TOKEN", "secret")
	t.Setenv("CREDENV_TEST", "1")
	env := Environ()
	if slices.Contains(env, "A2C_TOKEN=secret") || !slices.Contains(env, "CREDENV_TEST=1") {
		t.Errorf("Environ() = %q", env)
	}
}
