// Package desktools is the one table of the programs of aiod's desktop:
// what aiod --desktop starts (the X server, the window manager) and what
// the computer-use worker runs (xdotool, xclip, ffmpeg), each with the
// Debian package that provides it. aiod --desktop, aiod doctor and the
// worker look programs up here by name, so that a name and its package
// are written once.
package desktools

import (
	"fmt"
	"os/exec"
)

// Tool is a program of the desktop with the Debian package that
// provides it and what it is for (aiod doctor's wording).
type Tool struct {
	Name, Package, Use string
}

// All are the desktop's programs, in the order aiod doctor lists them.
var All = []Tool{
	{"Xvfb", "xvfb", "the X display"},
	{"openbox", "openbox", "the window manager (window activation needs one)"},
	{"xdotool", "xdotool", "mouse, keyboard and window actions"},
	{"xclip", "xclip", "the clipboard"},
	{"ffmpeg", "ffmpeg", "screen recording"},
}

// Get is the tool named name. An unknown name is a programming error:
// it panics.
func Get(name string) Tool {
	for _, t := range All {
		if t.Name == name {
			return t
		}
	}
	panic(fmt.Sprintf("desktools: no tool %q", name))
}

// Missing returns the named tools (every tool when none is named) that
// are not found on PATH, in the order asked.
func Missing(names ...string) []Tool {
	tools := All
	if len(names) > 0 {
		tools = make([]Tool, len(names))
		for i, n := range names {
			tools[i] = Get(n)
		}
	}
	var out []Tool
	for _, t := range tools {
		if _, err := exec.LookPath(t.Name); err != nil {
			out = append(out, t)
		}
	}
	return out
}
