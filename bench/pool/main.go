//go:build linux

// Command pool measures aiod pool against the targets of issue 29, with
// the kernel floor measured in the same run:
//
//		go run ./bench/pool [-n 100] [-idle 100] [-concurrent 100]
//
//	  - floor: the kernel's own cost of a sandbox's start, in this process:
//	    a cgroup made, /bin/true cloned into fresh mount, PID, IPC, UTS and
//	    network namespaces and placed in it, waited for, the cgroup removed
//	    (floor.go);
//	  - create → first echo, p50 and p99: POST /v2/sandboxes then POST
//	    /sandboxes/{id}/v1/shell/exec `echo hi`, from the warm pool (the
//	    pool refilled before each) and cold (a request the warm sandboxes
//	    do not fit), each sandbox deleted after;
//	  - the same cold create with network egress (a link and its rules
//	    made for it);
//	  - pause and resume of one sandbox, p50 each;
//	  - the port proxy: GET of a small file from python3's http.server in a
//	    sandbox with the host's network, through /sandboxes/{id}/ports/N/
//	    and directly at 127.0.0.1:N, interleaved;
//	  - idle memory: -idle sandboxes created and left idle, then the PSS of
//	    the pool and every process below it, divided by the sandboxes;
//	  - -concurrent creates at once: failures and p99.
//
// It needs root (the pool does). It prints markdown for bench/RESULTS.md.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
	"github.com/a2c-smcp/a2c-go/internal/proctree"
)

const token = "bench-pool-token"

// cleanup, once set, stops the pool and removes its folder: check's exit
// skips the deferred calls.
var cleanup = func() {}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/pool:", err)
		cleanup()
		os.Exit(1)
	}
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// call sends one request to the pool and decodes a JSON answer into out
// (nil: discarded); a status other than want is an error.
func call(method, url string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

type sandbox struct {
	ID     string `json:"id"`
	APIURL string `json:"api_url"`
}

// echo runs `echo hi` in s through its own v1 API.
func echo(s sandbox) error {
	var env struct {
		Success bool
		Data    struct{ Output string }
	}
	if err := call("POST", s.APIURL+"/v1/shell/exec", map[string]any{"command": "echo hi"}, 200, &env); err != nil {
		return err
	}
	if env.Data.Output != "hi" {
		return fmt.Errorf("echo answered %q", env.Data.Output)
	}
	return nil
}

var warmRE = regexp.MustCompile(`aiod_pool_sandboxes\{state="warm"\} (\d+)`)

// warmCount reads how many warm sandboxes the pool holds.
func warmCount(base string) int {
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("X-API-Key", token)
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := warmRE.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func main() {
	n := flag.Int("n", 100, "creates measured per path (warm, cold), and pause/resume rounds")
	idle := flag.Int("idle", 100, "idle sandboxes for the memory figure")
	concurrent := flag.Int("concurrent", 100, "creates sent at once")
	warm := flag.Int("warm", 4, "the pool's --warm")
	concurrentOnly := flag.Bool("concurrent-only", false, "measure only the concurrent creates (with a warm pool as large as -warm, filled first)")
	createOnly := flag.Bool("create-only", false, "measure only the creates: warm, cold, and cold with network egress")
	machine := flag.Bool("machine", false, "start the pool with --machine=all (each sandbox a whole machine, the warm ones too)")
	snapshots := flag.Bool("snapshots", false, "measure only snapshots and forks (a pool with --machine): a snapshot right after writing -small and -big MiB, and a fork to its first command")
	small := flag.Int("small", 10, "MiB written before the small snapshot")
	big := flag.Int("big", 1024, "MiB written before the big snapshot")
	flag.Parse()
	if os.Geteuid() != 0 {
		check(fmt.Errorf("needs root (aiod pool does)"))
	}
	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "bench-pool-")
	check(err)
	defer os.RemoveAll(tmp)
	bin, err := procs.Build(root, tmp, "aiod")
	check(err)

	floor := measureFloor(*n)

	cmd := exec.Command(bin, "pool", "--listen", "127.0.0.1:0", "--root", filepath.Join(tmp, "root"), "--warm", strconv.Itoa(*warm),
		"--max", strconv.Itoa(max(*idle, *concurrent)+*warm+8), "--allow-host-network", "--token", token,
		"--egress", "--egress-subnet", "10.244.0.0/22", "--egress-dns", "127.0.0.1:9")
	switch {
	case *machine:
		cmd.Args = append(cmd.Args, "--machine=all")
	case *snapshots:
		cmd.Args = append(cmd.Args, "--machine")
	}
	if *snapshots {
		cmd.Args = append(cmd.Args, "--warm", "warmbench=1")
	}
	cmd.Env = append(os.Environ(), "AIO_BROWSER_REMOTE_DEBUGGING_PORT=1")
	base, err := procs.Start(cmd)
	check(err)
	defer procs.Stop(cmd)
	cleanup = func() { procs.Stop(cmd); _ = os.RemoveAll(tmp) }

	if *snapshots {
		measureSnapshots(base, *n, *small, *big)
		return
	}
	if *concurrentOnly {
		for end := time.Now().Add(5 * time.Minute); warmCount(base) < *warm; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				check(fmt.Errorf("the warm pool did not fill"))
			}
		}
		fails, conc := measureConcurrent(base, *concurrent)
		fmt.Printf("| %d concurrent creates, --warm %d filled first: failures, p50 / p99 | %d, %s / %s | 0, p99 ≤ 1 s |\n",
			*concurrent, *warm, fails, ms(conc.P50()), ms(conc.P99()))
		return
	}
	// create → first echo, warm then cold.
	measureCreate := func(body any, waitWarm bool) lat.Samples {
		var s lat.Samples
		for i := 0; i < *n+*n/10; i++ {
			if waitWarm {
				for end := time.Now().Add(30 * time.Second); warmCount(base) < *warm; time.Sleep(2 * time.Millisecond) {
					if time.Now().After(end) {
						check(fmt.Errorf("the warm pool did not refill"))
					}
				}
			}
			t0 := time.Now()
			var sb sandbox
			check(call("POST", base+"/v2/sandboxes", body, 201, &sb))
			check(echo(sb))
			d := time.Since(t0)
			check(call("DELETE", base+"/v2/sandboxes/"+sb.ID, nil, 204, nil))
			if i >= *n/10 {
				s = append(s, d)
			}
		}
		slices.Sort(s)
		return s
	}
	warmS := measureCreate(map[string]any{}, true)
	coldS := measureCreate(map[string]any{"limits": map[string]any{"memory": "1023MiB"}}, false)
	egressS := measureCreate(map[string]any{"limits": map[string]any{"memory": "1023MiB"}, "network": "egress",
		"egress": map[string]any{"allow": []string{"10.0.0.0/8", "*.example.com"}}}, false)
	egressRow := fmt.Sprintf("| create → first echo, cold, network egress, p50 / p99 | %s / %s (%.2f× cold) | – |\n", ms(egressS.P50()), ms(egressS.P99()),
		float64(egressS.P50())/float64(coldS.P50()))
	if *createOnly {
		if *machine {
			// The baseline, in the same run: a plain sandbox, cold.
			plainS := measureCreate(map[string]any{"limits": map[string]any{"memory": "1023MiB"}, "machine": false}, false)
			fmt.Println("(--machine=all: whole machines; the last row is a plain sandbox of the same pool)")
			fmt.Printf("| create → first echo, warm, p50 / p99 | %s / %s | ≤ 20 ms |\n", ms(warmS.P50()), ms(warmS.P99()))
			fmt.Printf("| create → first echo, cold, p50 / p99 | %s / %s (%.2f× plain cold) | – |\n", ms(coldS.P50()), ms(coldS.P99()),
				float64(coldS.P50())/float64(plainS.P50()))
			fmt.Print(egressRow)
			fmt.Printf("| create → first echo, cold, plain (\"machine\": false), p50 / p99 | %s / %s | – |\n", ms(plainS.P50()), ms(plainS.P99()))
			return
		}
		fmt.Printf("| create → first echo, warm, p50 / p99 | %s / %s | ≤ 20 ms |\n", ms(warmS.P50()), ms(warmS.P99()))
		fmt.Printf("| create → first echo, cold, p50 / p99 | %s / %s | – |\n", ms(coldS.P50()), ms(coldS.P99()))
		fmt.Print(egressRow)
		return
	}

	// pause / resume.
	var sb sandbox
	check(call("POST", base+"/v2/sandboxes", nil, 201, &sb))
	var pause, resume lat.Samples
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		check(call("POST", base+"/v2/sandboxes/"+sb.ID+"/pause", nil, 200, nil))
		pause = append(pause, time.Since(t0))
		t0 = time.Now()
		check(call("POST", base+"/v2/sandboxes/"+sb.ID+"/resume", nil, 200, nil))
		resume = append(resume, time.Since(t0))
	}
	slices.Sort(pause)
	slices.Sort(resume)
	check(call("DELETE", base+"/v2/sandboxes/"+sb.ID, nil, 204, nil))

	direct, proxied := measurePorts(base, *n*10)
	perBox, poolPSS := measureIdle(base, cmd.Process.Pid, *idle)
	fails, conc := measureConcurrent(base, *concurrent)

	fmt.Printf("### aiod pool: `go run ./bench/pool -n %d -idle %d -concurrent %d -warm %d`\n\n", *n, *idle, *concurrent, *warm)
	fmt.Println("| measure | figure | target |")
	fmt.Println("|---|---:|---|")
	fmt.Printf("| kernel floor (namespaces + cgroup + exit), p50 | %s | – |\n", ms(floor.P50()))
	fmt.Printf("| create → first echo, warm, p50 / p99 | %s / %s | ≤ 20 ms |\n", ms(warmS.P50()), ms(warmS.P99()))
	fmt.Printf("| create → first echo, cold, p50 / p99 | %s / %s (%.1f× floor) | ≤ 3× floor, ≤ 100 ms |\n", ms(coldS.P50()), ms(coldS.P99()),
		float64(coldS.P50())/float64(floor.P50()))
	fmt.Print(egressRow)
	fmt.Printf("| pause, p50 / resume, p50 | %s / %s | ≤ 10 ms each |\n", ms(pause.P50()), ms(resume.P50()))
	fmt.Printf("| port proxy GET p50 / direct p50 | %s / %s = %.2f× | ≤ 1.3× |\n", lat.US(proxied.P50()), lat.US(direct.P50()),
		float64(proxied.P50())/float64(direct.P50()))
	fmt.Printf("| idle memory per sandbox (PSS of pool and all its processes / %d) | %.2f MiB (pool alone %.1f MiB) | ≤ 8 MiB |\n", *idle,
		perBox, poolPSS)
	fmt.Printf("| %d concurrent creates: failures, p50 / p99 | %d, %s / %s | 0, p99 ≤ 1 s |\n", *concurrent, fails, ms(conc.P50()), ms(conc.P99()))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// measurePorts starts python3's http.server in a sandbox with the host's
// network and times GETs through the pool's port proxy beside direct
// ones.
func measurePorts(base string, n int) (direct, proxied lat.Samples) {
	var sb sandbox
	check(call("POST", base+"/v2/sandboxes", map[string]any{"network": "host"}, 201, &sb))
	defer func() { _ = call("DELETE", base+"/v2/sandboxes/"+sb.ID, nil, 204, nil) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	start := fmt.Sprintf("echo hello > index.txt; (python3 -m http.server --bind 127.0.0.1 %d >/dev/null 2>&1 &); sleep 0.5", port)
	check(call("POST", sb.APIURL+"/v1/shell/exec", map[string]any{"command": start}, 200, nil))
	get := func(url string, key bool) func() error {
		return func() error {
			req, _ := http.NewRequest("GET", url, nil)
			if key {
				req.Header.Set("X-API-Key", token)
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "hello\n" {
				return fmt.Errorf("GET %s: %d %q", url, resp.StatusCode, b)
			}
			return nil
		}
	}
	directURL := fmt.Sprintf("http://127.0.0.1:%d/index.txt", port)
	for end := time.Now().Add(10 * time.Second); get(directURL, false)() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			check(fmt.Errorf("the sandbox's http.server did not answer"))
		}
	}
	s, err := lat.Interleave(n, 50, get(directURL, false), get(fmt.Sprintf("%s/ports/%d/index.txt", sb.APIURL, port), true))
	check(err)
	return s[0], s[1]
}

// measureIdle creates count sandboxes, leaves them idle past the pool's
// memory trim, and returns the PSS of the pool and every process below
// it, per sandbox, and the pool's own (MiB).
func measureIdle(base string, pid, count int) (perBox, pool float64) {
	ids := make([]string, 0, count)
	for range count {
		var sb sandbox
		check(call("POST", base+"/v2/sandboxes", nil, 201, &sb))
		ids = append(ids, sb.ID)
	}
	time.Sleep(12 * time.Second) // past the pool's idle trim (5 s after the last request)
	total := pss(pid)
	for _, d := range proctree.Descendants(pid) {
		total += pss(d)
	}
	pool = pss(pid)
	for _, id := range ids {
		check(call("DELETE", base+"/v2/sandboxes/"+id, nil, 204, nil))
	}
	return total / float64(count), pool
}

// pss reads a process's proportional set size (MiB).
func pss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// measureConcurrent sends count creates at once and returns the failures
// and the latencies of the ones that succeeded; it deletes them after.
func measureConcurrent(base string, count int) (int, lat.Samples) {
	var mu sync.Mutex
	var s lat.Samples
	var ids []string
	fails := 0
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			t0 := time.Now()
			var sb sandbox
			err := call("POST", base+"/v2/sandboxes", nil, 201, &sb)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails++
				fmt.Fprintln(os.Stderr, "concurrent create:", err)
				return
			}
			s = append(s, d)
			ids = append(ids, sb.ID)
		}()
	}
	close(startGate)
	wg.Wait()
	for _, id := range ids {
		_ = call("DELETE", base+"/v2/sandboxes/"+id, nil, 204, nil)
	}
	slices.Sort(s)
	if len(s) == 0 {
		s = lat.Samples{0}
	}
	return fails, s
}

// measureSnapshots times, in a pool of whole machines: a snapshot taken
// right after small and then big MiB were written in the sandbox (the
// POST's answer), and a fork from a running sandbox to its first echo.
func measureSnapshots(base string, n, small, big int) {
	var sb sandbox
	check(call("POST", base+"/v2/sandboxes", map[string]any{"timeout_s": 0, "machine": true}, 201, &sb))
	defer func() { _ = call("DELETE", base+"/v2/sandboxes/"+sb.ID, nil, 204, nil) }()
	type snap struct {
		ID string `json:"snapshot_id"`
	}
	cut := func(mib int) lat.Samples {
		var s lat.Samples
		for i := range n {
			check(call("POST", sb.APIURL+"/v1/shell/exec", map[string]any{"command": fmt.Sprintf("head -c %dM /dev/urandom > /opt/data-%d", mib, i), "timeout": 300}, 200, nil))
			t0 := time.Now()
			var sn snap
			check(call("POST", base+"/v2/sandboxes/"+sb.ID+"/snapshots", nil, 201, &sn))
			s = append(s, time.Since(t0))
			check(call("DELETE", base+"/v2/snapshots/"+sn.ID, nil, 204, nil))
			check(call("POST", sb.APIURL+"/v1/shell/exec", map[string]any{"command": fmt.Sprintf("rm -f /opt/data-%d", i)}, 200, nil))
		}
		slices.Sort(s)
		return s
	}
	smallS, bigS := cut(small), cut(big)
	var fork, cold lat.Samples
	for range n {
		t0 := time.Now()
		var f sandbox
		check(call("POST", base+"/v2/sandboxes/"+sb.ID+"/fork", nil, 201, &f))
		check(echo(f))
		fork = append(fork, time.Since(t0))
		var parent struct {
			Parent string `json:"parent"`
		}
		check(call("GET", base+"/v2/sandboxes/"+f.ID, nil, 200, &parent))
		check(call("DELETE", base+"/v2/sandboxes/"+f.ID, nil, 204, nil))
		check(call("DELETE", base+"/v2/snapshots/"+parent.Parent, nil, 204, nil))
		t0 = time.Now()
		var c sandbox
		check(call("POST", base+"/v2/sandboxes", map[string]any{"machine": true}, 201, &c))
		check(echo(c))
		cold = append(cold, time.Since(t0))
		check(call("DELETE", base+"/v2/sandboxes/"+c.ID, nil, 204, nil))
	}
	// A template built with a package, then creates from it against
	// creates of a plain machine, interleaved.
	build := []string{
		`mkdir -p /tmp/pkg/a2cbench && echo 'x = 1' > /tmp/pkg/a2cbench/__init__.py`,
		`printf '[project]\nname = "a2cbench"\nversion = "1.0"\n[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n' > /tmp/pkg/pyproject.toml`,
		`/usr/bin/python3 -m pip install --quiet --no-index --no-build-isolation --break-system-packages /tmp/pkg`,
	}
	check(call("POST", base+"/v2/templates", map[string]any{"name": "bench", "build": build}, 201, nil))
	var fromTpl, fromBase lat.Samples
	for range n {
		for _, c := range []struct {
			body map[string]any
			into *lat.Samples
		}{{map[string]any{"template": "bench"}, &fromTpl}, {map[string]any{"machine": true}, &fromBase}} {
			t0 := time.Now()
			var x sandbox
			check(call("POST", base+"/v2/sandboxes", c.body, 201, &x))
			check(echo(x))
			*c.into = append(*c.into, time.Since(t0))
			check(call("DELETE", base+"/v2/sandboxes/"+x.ID, nil, 204, nil))
		}
	}
	// The same template kept warm (--warm warmbench=1): a create takes a
	// started machine of it; the refill is waited for between creates.
	check(call("POST", base+"/v2/templates", map[string]any{"name": "warmbench", "build": build}, 201, nil))
	var fromWarm lat.Samples
	for range n {
		for end := time.Now().Add(60 * time.Second); warmCount(base) < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				check(fmt.Errorf("the template's warm machine did not refill"))
			}
		}
		t0 := time.Now()
		var x sandbox
		check(call("POST", base+"/v2/sandboxes", map[string]any{"template": "warmbench"}, 201, &x))
		check(echo(x))
		fromWarm = append(fromWarm, time.Since(t0))
		check(call("DELETE", base+"/v2/sandboxes/"+x.ID, nil, 204, nil))
	}
	slices.Sort(fromWarm)
	slices.Sort(fromTpl)
	slices.Sort(fromBase)
	slices.Sort(fork)
	slices.Sort(cold)
	fmt.Printf("| snapshot right after %d MiB written, p50 / p99 | %s / %s | ≤ 50 ms |\n", small, ms(smallS.P50()), ms(smallS.P99()))
	fmt.Printf("| snapshot right after %d MiB written, p50 / p99 | %s / %s (%.2f× the small) | ≤ 50 ms, ±20%% of the small |\n", big, ms(bigS.P50()), ms(bigS.P99()),
		float64(bigS.P50())/float64(smallS.P50()))
	fmt.Printf("| fork (snapshot + create from it) → first echo, p50 / p99 | %s / %s | ≤ 50 ms |\n", ms(fork.P50()), ms(fork.P99()))
	fmt.Printf("| create of a machine (cold, no snapshot) → first echo, p50, same run | %s | – |\n", ms(cold.P50()))
	fmt.Printf("| create from a template built with a pip package → first echo, p50 / a machine from base, p50 | %s / %s = %.2f× | ≤ 1.5× |\n",
		ms(fromTpl.P50()), ms(fromBase.P50()), float64(fromTpl.P50())/float64(fromBase.P50()))
	fmt.Printf("| create from that template kept warm (--warm NAME=1) → first echo, p50 / p99 | %s / %s | (fork target ≤ 50 ms) |\n",
		ms(fromWarm.P50()), ms(fromWarm.P99()))
}
