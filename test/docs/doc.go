// Package docs keeps the project's documentation true: its test finds
// every example in README.md and docs/*.md that shows a command with its
// output and runs it against the real binaries.
//
// # The convention
//
// Every fenced block names its language (a bare ``` fence is an error).
// A block whose language is "console" is run; any other block is text.
// In a console block, a line "$ COMMAND" is a command, run with bash in a
// shared working folder; a command whose line ends with a backslash goes
// on to the next line. The lines up to the next "$ " line (or the end of
// the block) are the output the command must print: standard output and
// standard error together, as a terminal shows them, each line with its
// trailing blanks ignored. In an expected line:
//
//   - a line "..." matches any number of lines, none included;
//   - a placeholder matches a varying token: <any> any text in the line,
//     <n> a number (-1, 42, 0.5), <hex> hex digits, <uuid> a UUID, <id> a
//     run of letters, digits, '-' and '_', <path> an absolute path;
//   - a last line "[exit N]" says the command exits with status N; without
//     it the command must exit 0.
//
// Anything else is literal. A console block with no command, or a command
// with nothing to run, is an error, and so is a "$ " line or a "# {...}"
// output comment in a sh or bash block (output shown is output tested).
//
// A block whose info string carries file=REL (```python file=agent.py)
// is written to REL in the working folder before the blocks after it run,
// so that a later "$ python3 agent.py" or "$ go run ./hello" runs it. The
// folder holds a go.mod whose module requires this one (replaced by the
// checkout), so a Go example builds as a user's own program would.
//
// # What the test does
//
// TestDocs builds a2c and aiod into a temporary folder, puts it first on
// PATH, and starts one "a2c up" on free loopback ports for every block. In
// commands, the documented default addresses (127.0.0.1:8000 and
// localhost:8000 for the hub, 127.0.0.1:18091 and localhost:18091 for the
// sandbox API) are rewritten to the real ones, and in the output the real
// ones are written back, so the docs show the defaults a reader types.
// The agent commands (a2c room, tools, call, cancel, put, skills, skill)
// given no --server get the real hub's, the one they would default to.
// "go run ./cmd/a2c" and "go run ./cmd/aiod" run the built binaries, and
// python3 is /usr/bin/python3 (Debian's python3-socketio). The command
// "a2c up" itself is not run again: its expected output is held to the
// shared instance's log up to its "ready" line.
package docs
