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
