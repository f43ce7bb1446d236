package market

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/credenv"
)

// gitTimeout bounds each git command.
const gitTimeout = 120 * time.Second

// git runs git with args in dir ("" for none), never prompting, bounded
// by gitTimeout, and returns its standard output, trimmed. The error
// carries git's standard error (for the log, never a user's secret:
// remotes are the settings' own).
func git(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	// A transfer slower than 1 KiB/s for 30 s ends (a tarpit does not
	// hold a boot for the whole bound).
	args = append([]string{"-c", "http.lowSpeedLimit=1024", "-c", "http.lowSpeedTime=30"}, args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(credenv.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		// ssh never asks either (no passphrase or host-key question on
		// the terminal); the user's agent and known hosts still serve.
		cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND=ssh -oBatchMode=yes -oConnectTimeout=30")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", args[4], err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
