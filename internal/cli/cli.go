package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/computer/mcphost"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Main runs the a2c command with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if code, ok := aiod.SandboxInit(args); ok { // a2c up's sandbox init is this binary
		return code
	}
	if len(args) > 0 && args[0] == "up" {
		// Not root: a2c up runs again in a user namespace of its own to
		// isolate its sandbox (see aiod.ReexecForIsolation).
		if code, ok := aiod.ReexecForIsolation(append([]string{os.Args[0]}, args...), args[1:], "namespaces"); ok {
			return code
		}
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == mcphost.SupervisorArg {
		// Not a user command: "a2c computer" re-executes itself this way to
		// hold each stdio server's process tree (see mcphost.Supervise).
		return mcphost.Supervise(args[1:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &env{stdout: stdout, stderr: stderr}
	var err error
	switch args[0] {
	case "server":
		err = runServer(ctx, env, args[1:])
	case "computer":
		err = runComputer(ctx, env, args[1:])
	case "up":
		err = runUp(ctx, env, args[1:])
	case "room":
		err = runRoom(ctx, env, args[1:])
	case "tools":
		err = runTools(ctx, env, args[1:])
	case "call":
		err = runCall(ctx, env, args[1:])
	case "cancel":
		err = runCancel(ctx, env, args[1:])
	case "put":
		err = runPut(ctx, env, args[1:])
	case "skills":
		err = runSkills(ctx, env, args[1:])
	case "skill":
		err = runSkill(ctx, env, args[1:])
	case "sandbox":
		err = runSandbox(ctx, env, args[1:])
	case "version":
		fmt.Fprintf(stdout, "a2c protocol %s (supported: %s)\n", smcp.ProtocolVersion, strings.Join(smcp.SupportedVersions(), ", "))
	case "help", "-h", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "a2c: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	var xe exitError
	if errors.As(err, &xe) {
		return xe.code // reported already
	}
	var ue usageError
	if errors.As(err, &ue) {
		if ue.msg != "" {
			fmt.Fprintf(stderr, "a2c %s: %s\n", args[0], ue.msg)
		}
		return 2
	}
	fmt.Fprintf(stderr, "a2c %s: %s\n", args[0], oneLine(err.Error()))
	return 1
}

type env struct {
	stdout, stderr io.Writer
}

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func usage(w io.Writer) {
	fmt.Fprint(w, `a2c: A2C-SMCP signalling server and agent tools

Usage:
  a2c up     [--listen HOST:PORT] [--sandbox-listen HOST:PORT] [--workspace DIR] [--config FILE] [--token T]
  a2c server [--listen HOST:PORT] [--path /socket.io/] [--token T | --token-file F] [--console [--sandbox NAME=URL]]
  a2c computer [--config FILE | --settings F --mcp-config F --approve-all-mcp] [--server URL] [--office ID] [--name NAME]
               [--token T] [--approve all|none|ask|agent] [--admin HOST:PORT] [--landing-root DIR] [--skills DIR]
  a2c computer check [--config FILE | --settings F --mcp-config F] [--json]
  a2c computer marketplace|plugin|settings|skill VERB ... [--json]
  a2c computer history [--admin URL] [--last N] [--json]
  a2c room   [--server URL] [--office ID] [--json]
  a2c tools  [--server URL] [--office ID] [--computer NAME] [--json]
  a2c call   TOOL [--args JSON] [--timeout SECONDS] [--computer NAME] [--trace] [--json]
  a2c cancel REQ_ID [--server URL] [--office ID]
  a2c put    FILE [--to COMPUTER] [--as NAME] [--json]
  a2c skills [--computer NAME] [--json]
  a2c skill  NAME [REL_PATH] [--computer NAME] [--json]
  a2c sandbox create|ls|get|rm|pause|resume|timeout|metrics|url [ID] [--pool URL] [--json]
  a2c version

server, computer, up and the agent commands take --protocol-version VERSION
(the default and the supported versions: a2c version).

Run "a2c COMMAND -h" for the flags of a command.
`)
}

// newFlags returns a flag set that reports a bad flag in one line (the
// flag package's own message, without the usage dump); -h prints the
// flags to stdout.
func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("a2c "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// addVersionFlag declares --protocol-version: the A2C-SMCP version a
// command speaks, checked when parsed, so that an unsupported one is a
// usage error naming the supported ones.
func addVersionFlag(fs *flag.FlagSet) *string {
	v := smcp.ProtocolVersion
	fs.Func("protocol-version", "the A2C-SMCP version to speak ("+strings.Join(smcp.SupportedVersions(), ", ")+"; default "+smcp.ProtocolVersion+")", checkVersionFlag(&v))
	return &v
}

func checkVersionFlag(dst *string) func(string) error {
	return func(s string) error {
		p, err := smcp.NewProfile(s)
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "smcp: "))
		}
		*dst = p.Version
		return nil
	}
}

// defaultSkillsDir is the user's skills folder: a2c/skills under the
// user's configuration folder, or "" when there is none.
func defaultSkillsDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "a2c", "skills")
}

// errHelp is returned by parse for -h: exit 0 after the usage.
var errHelp = errors.New("help requested")

func (e *env) parse(fs *flag.FlagSet, args []string) error {
	// Allow flags after positional arguments: "a2c call TOOL --args {}".
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(e.stdout, "Usage of %s:\n", fs.Name())
				fs.SetOutput(e.stdout)
				fs.PrintDefaults()
				return errHelp
			}
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}
