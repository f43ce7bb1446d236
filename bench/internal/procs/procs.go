// Package procs starts and stops the processes the benchmarks measure:
// it finds the module, builds the a2c binary, runs a server until it
// prints its loopback address, and stops it with SIGTERM.
package procs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// ModuleRoot is the directory of go.mod above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// BuildA2C builds cmd/a2c of the module at root into dir.
func BuildA2C(root, dir string) (string, error) { return Build(root, dir, "a2c") }

// Build builds cmd/<name> of the module at root into dir.
func Build(root, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	build.Dir, build.Stderr = root, os.Stderr
	return bin, build.Run()
}

// addrRE finds "addr=127.0.0.1:PORT" (a2c) or "listening 127.0.0.1:PORT"
// (the reference relay) in a log line.
var addrRE = regexp.MustCompile(`(?:addr=|listening )(127\.0\.0\.1:\d+)`)

// Start runs cmd and waits until it reports its loopback address on
// stdout or stderr; it returns "http://ADDR".
func Start(cmd *exec.Cmd) (string, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return "", err
	}
	pw.Close()
	found := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		return "http://" + addr, nil
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", fmt.Errorf("%s did not report its address", filepath.Base(cmd.Path))
	}
}

// Stop ends cmd with SIGTERM, or SIGKILL after ten seconds.
func Stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
