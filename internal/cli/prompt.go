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

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/internal/credenv"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// terminalPrompt asks for promptString and pickString inputs on the
// controlling terminal, one question at a time; a password is read with
// echo off. A pickString shows its options' labels, numbered, and the
// answer is the chosen option's value (typing a value itself works too;
// anything else is refused by the resolver as an invalid selection). An
// empty answer takes the default. Without a terminal it reports that
// nobody can be asked (config.ErrNoPrompt), and the input falls back to
// its default.
func terminalPrompt(e *env) func(ctx context.Context, in smcp.MCPServerInput) (string, error) {
	var mu sync.Mutex
	return func(ctx context.Context, in smcp.MCPServerInput) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return "", fmt.Errorf("no terminal to ask on: %w", config.ErrNoPrompt)
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
				fmt.Fprintf(tty, "  %d) %s\n", i+1, o.Label)
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
			return pickAnswer(in, a), nil
		}
		return a, nil
	}
}

// pickAnswer maps the answer to a pickString question to a value: a
// choice's number gives that option's value; anything else is returned as
// typed (a value, or nothing for the default), for the resolver to check.
func pickAnswer(in smcp.MCPServerInput, a string) string {
	if n, err := strconv.Atoi(strings.TrimSpace(a)); err == nil && n >= 1 && n <= len(in.Options) {
		return in.Options[n-1].Value
	}
	return strings.TrimSpace(a)
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
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = credenv.Environ() // a config's command: none of our credentials
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("command input failed with exit status %d", ee.ExitCode())
		}
		return "", errors.New("command input could not run")
	}
	return string(out), nil
}
