package desktools

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMissing(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"Xvfb", "xclip"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	names := func(ts []Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	for _, tc := range []struct {
		ask  []string
		want []string
	}{
		{nil, []string{"openbox", "xdotool", "ffmpeg"}},
		{[]string{"Xvfb", "openbox"}, []string{"openbox"}},
		{[]string{"ffmpeg", "xdotool"}, []string{"ffmpeg", "xdotool"}},
		{[]string{"xclip"}, nil},
	} {
		if got := names(Missing(tc.ask...)); !slices.Equal(got, tc.want) {
			t.Errorf("Missing(%q) = %q, want %q", tc.ask, got, tc.want)
		}
	}
}

func TestGet(t *testing.T) {
	if got := Get("Xvfb"); got.Package != "xvfb" {
		t.Errorf("Get(Xvfb) = %+v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Get of an unknown name did not panic")
		}
	}()
	Get("nonesuch")
}
