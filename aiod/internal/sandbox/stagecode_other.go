//go:build linux && !amd64

package sandbox

// stageCode is the stage's static form for this architecture: none, so
// the stage is this binary (stage_linux.go).
var stageCode []byte

// stageMachine is the ELF machine of stageCode.
const stageMachine = 0

// reaperCode is init's second stage's static form for this
// architecture: none, so it is this binary again (caps_linux.go).
var reaperCode []byte

// setidCode is the first program of a sandboxed process for this
// architecture: none, so a process takes its identity in the daemon's
// fork (spawn_linux.go).
var setidCode []byte
