package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// terminalPrompt asks for promptString and pickString inputs on the
// controlling terminal, one question at a time; a password is read with
// echo off. Without a terminal it reports that nobody can be asked, and
// the input falls back to its default.
func terminalPrompt(e *env) func(ctx context.Context, in smcp.MCPServerInput) (string, error) {
	var mu sync.Mutex
	return func(ctx context.Context, in smcp.MCPServerInput) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return "", errors.New("no terminal to ask on")
		}
		defer tty.Close()
		desc := in.Description
		if desc == "" {
			desc = in.ID
		}
		// Echo goes off before the question is shown: whoever answers as
		// soon as they see it must not have the first keys echoed.
		if in.Password != nil && *in.Password {
			stty(tty, "-echo")
			defer func() { stty(tty, "echo"); fmt.Fprintln(tty) }()
		}
		switch in.Type {
		case smcp.InputPickString:
			fmt.Fprintf(tty, "%s\n", desc)
			for i, o := range in.Options {
				fmt.Fprintf(tty, "  %d) %s\n", i+1, o)
			}
			fmt.Fprint(tty, "choice: ")
		default:
			fmt.Fprintf(tty, "%s: ", desc)
		}
		answer := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(tty).ReadString('\n')
			answer <- strings.TrimRight(line, "\r\n")
		}()
		var a string
		select {
		case a = <-answer:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if in.Type == smcp.InputPickString {
			if n, err := strconv.Atoi(strings.TrimSpace(a)); err == nil && n >= 1 && n <= len(in.Options) {
				return in.Options[n-1], nil
			}
		}
		return a, nil
	}
}

// stty sets terminal modes on tty (echo off for passwords).
func stty(tty *os.File, mode string) {
	cmd := exec.Command("stty", mode)
	cmd.Stdin = tty
	_ = cmd.Run()
}

// runCommandInput runs a command input as the Python SDK does: the command
// string through the shell, its standard output as the value (args are
// not used). The error names the exit status only, never the output.
func runCommandInput(ctx context.Context, command string, _ map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("command input failed with exit status %d", ee.ExitCode())
		}
		return "", errors.New("command input could not run")
	}
	return string(out), nil
}
