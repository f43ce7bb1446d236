package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
	"github.com/a2c-smcp/a2c-go/internal/proctree"
)

// isoDaemon is one aiod of the isolation part: its process, its URL and
// the isolation it runs with.
type isoDaemon struct {
	mode string // "none" or "namespaces"
	cmd  *exec.Cmd
	base string
}

// isoCommand is aiod started with --isolation mode on ws, listening on
// port (0: any), with the interpreter the code plane must use.
func isoCommand(bin, mode, ws string, port int) *exec.Cmd {
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--workspace", ws, "--log-level", "warn", "--isolation", mode)
	cmd.Env = append(os.Environ(), "AIO_PYTHON_BIN=/usr/bin/python3")
	return cmd
}

// freshWorkspace makes a new, empty workspace under tmp.
func freshWorkspace(tmp, mode string) string {
	ws, err := os.MkdirTemp(tmp, "ws-"+mode+"-")
	check(err)
	check(os.Chmod(ws, 0o755))
	return ws
}

// benchIsolation measures aiod --isolation namespaces beside
// --isolation none: two daemons of the same binary started side by side,
// every latency interleaved in blocks between them in one run, so the
// ratios compare the same minute of the machine. It times `echo hi`
// through POST /v2/commands, a print(1) cell on a warm kernel, a
// keystroke to its echo on a terminal, reads the idle RSS of both
// daemons and of the sandbox's init, and times a start to /health
// answering. The sandbox needs root; without it the part says so and
// measures nothing.
func benchIsolation(bin, tmp string, calls int) {
	fmt.Printf("### Isolation: `--isolation namespaces` beside `--isolation none` (same binary, same run)\n\n")
	if os.Geteuid() != 0 {
		fmt.Printf("- skipped: `--isolation namespaces` needs root and this runs as uid %d; run the benchmark as root\n\n", os.Geteuid())
		return
	}
	var ds []*isoDaemon
	for _, mode := range []string{"none", "namespaces"} {
		d := &isoDaemon{mode: mode, cmd: isoCommand(bin, mode, freshWorkspace(tmp, mode), 0)}
		base, err := procs.Start(d.cmd)
		check(err)
		d.base = base
		defer procs.Stop(d.cmd)
		ds = append(ds, d)
	}
	none, ns := ds[0], ds[1]
	initPid := sandboxInit(ns.cmd.Process.Pid)
	if initPid == 0 {
		check(errors.New("isolation: the namespaces daemon has no aiod-sandbox-init child"))
	}
	time.Sleep(time.Second)
	startRSS := [3]memUse{usage(none.cmd.Process.Pid), usage(ns.cmd.Process.Pid), usage(initPid)}

	row := func(name string, s []lat.Samples, target string) {
		a, b := s[0], s[1]
		fmt.Printf("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %s |\n", name,
			lat.US(a.P50()), lat.US(b.P50()), lat.US(a.P99()), lat.US(b.P99()),
			float64(b.P50())/float64(a.P50()), float64(b.P99())/float64(a.P99()), target)
	}
	type part struct {
		name, target string
		s            []lat.Samples
	}
	var parts []part

	// 1. echo hi through POST /v2/commands.
	echo := func(d *isoDaemon) func() error {
		return func() error {
			data, err := postJSON(d.base+"/v2/commands", map[string]any{"command": "echo hi"})
			if err == nil && (data["stdout"] != "hi\n" || data["exit_code"] != 0.0) {
				err = fmt.Errorf("%s: echo hi: %v", d.mode, data)
			}
			return err
		}
	}
	s, err := lat.Interleave(calls, 50, echo(none), echo(ns))
	check(err)
	parts = append(parts, part{"`echo hi` through POST /v2/commands (sync)", "<= 1.5x", s})

	// 2. print(1) on a warm kernel, the same session throughout.
	cell := func(d *isoDaemon) func() error {
		return func() error {
			data, err := postJSON(d.base+"/v2/code/execute", map[string]any{"language": "python", "code": "print(1)", "session_id": "iso-bench"})
			if err == nil && data["status"] != "ok" {
				err = fmt.Errorf("%s: cell: %v", d.mode, data)
			}
			return err
		}
	}
	check(cell(none)()) // starts the kernels
	check(cell(ns)())
	s, err = lat.Interleave(calls, 50, cell(none), cell(ns))
	check(err)
	parts = append(parts, part{"`print(1)` through POST /v2/code/execute (warm kernel)", "<= 1.1x", s})
	del(none.base + "/v2/code/sessions/iso-bench")
	del(ns.base + "/v2/code/sessions/iso-bench")

	// 3. A keystroke to its echo over the terminal WebSocket.
	kn, closeN := ptyKeys(none.base)
	kns, closeNS := ptyKeys(ns.base)
	s, err = lat.Interleave(calls, 50, kn, kns)
	check(err)
	closeN()
	closeNS()
	parts = append(parts, part{"keystroke to echo over /v2/pty/sessions/{id}/ws", "<= 1.1x", s})

	fmt.Printf("%d calls per path and part, interleaved in blocks of 50 between the two daemons (after %d warm-up calls each).\n\n", calls, calls/10)
	fmt.Println("| part | p50 none | p50 namespaces | p99 none | p99 namespaces | p50 ratio | p99 ratio | target (p50) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range parts {
		row(p.name, p.s, p.target)
	}
	fmt.Println()

	// 4. Idle RSS after the load and a quiet second.
	time.Sleep(time.Second)
	idleRSS := [3]memUse{usage(none.cmd.Process.Pid), usage(ns.cmd.Process.Pid), usage(initPid)}
	fmt.Println("| process | VmRSS after start (idle 1 s) | VmRSS after the load above (idle 1 s) | of which RssAnon (after the load) |")
	fmt.Println("|---|---:|---:|---:|")
	for i, name := range []string{"daemon, `--isolation none`", "daemon, `--isolation namespaces`", "its sandbox init (`aiod-sandbox-init`)"} {
		fmt.Printf("| %s | %.1f MiB | %.1f MiB | %.1f MiB |\n", name, startRSS[i].rss, idleRSS[i].rss, idleRSS[i].anon)
	}
	fmt.Printf("\n- daemon VmRSS ratio namespaces/none: %.2fx after start, %.2fx after the load (target: unchanged); daemon + init: %.2fx (the init's file pages are the daemon's binary, shared)\n\n",
		startRSS[1].rss/startRSS[0].rss, idleRSS[1].rss/idleRSS[0].rss, (idleRSS[1].rss+idleRSS[2].rss)/idleRSS[0].rss)

	// 5. Start to /health answering.
	const starts = 7
	st := map[string][]float64{}
	for range starts {
		for _, mode := range []string{"none", "namespaces"} {
			st[mode] = append(st[mode], timeStart(bin, mode, freshWorkspace(tmp, mode)))
		}
	}
	fmt.Printf("Start: process start to GET /health answering 200 (medians of %d interleaved starts, fresh workspace each)\n\n", starts)
	fmt.Println("| isolation | median | min | max |")
	fmt.Println("|---|---:|---:|---:|")
	for _, mode := range []string{"none", "namespaces"} {
		v := st[mode]
		fmt.Printf("| %s | %.1f ms | %.1f ms | %.1f ms |\n", mode, median(v), minOf(v), maxOf(v))
	}
	fmt.Printf("\n- the sandbox adds %.1f ms to a start (%.2fx)\n\n", median(st["namespaces"])-median(st["none"]), median(st["namespaces"])/median(st["none"]))
}

// memUse is VmRSS and RssAnon of a process, in MiB.
type memUse struct{ rss, anon float64 }

func usage(pid int) memUse {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	var m memUse
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if f := strings.Fields(v); ok && len(f) > 0 {
			kb, _ := strconv.Atoi(f[0])
			switch k {
			case "VmRSS":
				m.rss = float64(kb) / 1024
			case "RssAnon":
				m.anon = float64(kb) / 1024
			}
		}
	}
	return m
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// sandboxInit is the pid of the process under daemon whose command
// line starts with aiod-sandbox-init, or 0.
func sandboxInit(daemon int) int {
	for _, pid := range proctree.Descendants(daemon) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.HasPrefix(cmdline, []byte("aiod-sandbox-init\x00")) {
			return pid
		}
	}
	return 0
}

// freePort is a loopback port nothing listens on now.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// timeStart starts a daemon and returns the milliseconds from its start
// to the first 200 of GET /health, polled every 0.5 ms; then stops it.
func timeStart(bin, mode, ws string) float64 {
	port := freePort()
	cmd := isoCommand(bin, mode, ws, port)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	probe := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	u := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	t0 := time.Now()
	check(cmd.Start())
	defer procs.Stop(cmd)
	deadline := t0.Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := probe.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return float64(time.Since(t0)) / float64(time.Millisecond)
			}
		}
		time.Sleep(500 * time.Microsecond)
	}
	check(fmt.Errorf("isolation %s: /health did not answer within 15 s: %s", mode, logs.String()))
	return 0
}

// ptyKeys opens a terminal on base and returns a call that sends one
// key and waits for its echo, and the function that ends the terminal.
// One goroutine reads the socket into a channel (it ends when the
// socket closes), so a quiet period can be awaited without a read
// deadline, which would break the connection.
func ptyKeys(base string) (func() error, func()) {
	c, id, _ := openPTY(base, "iso-bench")
	frames := make(chan map[string]any, 256)
	go func() {
		defer close(frames)
		for {
			var f map[string]any
			if c.ReadJSON(&f) != nil {
				return
			}
			frames <- f
		}
	}()
	read := func() (map[string]any, error) {
		select {
		case f, ok := <-frames:
			if !ok {
				return nil, errors.New("pty: socket closed")
			}
			return f, nil
		case <-time.After(10 * time.Second):
			return nil, errors.New("pty: no frame within 10 s")
		}
	}
	for {
		f, err := read()
		check(err)
		if f["type"] == "ready" {
			break
		}
	}
	// Drain what the shell prints until it has been quiet for 200 ms.
	for quiet := false; !quiet; {
		select {
		case _, ok := <-frames:
			if !ok {
				check(errors.New("pty: socket closed while the shell started"))
			}
		case <-time.After(200 * time.Millisecond):
			quiet = true
		}
	}
	n := 0
	key := func() error {
		n++
		k := "x"
		if n%50 == 0 {
			k = "\u0015" // ^U clears the line now and then
		}
		// Late frames of the previous echo are not this key's.
		for drained := false; !drained; {
			select {
			case <-frames:
			default:
				drained = true
			}
		}
		if err := c.WriteJSON(map[string]string{"type": "input", "data": k}); err != nil {
			return err
		}
		for {
			f, err := read()
			if err != nil {
				return err
			}
			if f["type"] == "output" {
				return nil
			}
		}
	}
	return key, func() {
		c.Close()
		for range frames {
		}
		del(base + "/v2/pty/sessions/" + id)
	}
}
