// Command aiod measures the sandbox daemon against bare baselines run in
// the same command:
//
//		go run ./bench/aiod [-calls 1000] [-clients 8] [-duration 5s] [-files 10000] [-shots 100] [-planes ...]
//
//	  - commands: `echo hi` through POST /v2/commands (sync), p50/p99 over
//	    -calls sequential calls and calls/s with -clients concurrent clients,
//	    beside a bare fork/exec of `bash -c 'echo hi'` from Go;
//	  - mcp: the same `echo hi` through POST /mcp (sandbox_execute_bash,
//	    plain JSON-RPC) beside POST /v2/commands, interleaved in one run;
//	  - transfer: 1 MiB and 64 MiB multipart uploads and downloads through
//	    /v2/fs/upload and /v2/fs/download, beside a minimal Go net/http file
//	    server (this program re-executed with -serve) doing the same;
//	  - grep: a regex over a generated tree of -files files through
//	    POST /v2/fs/grep, beside `grep -rnE`;
//	  - the daemon's RSS when idle, after start and after the load;
//	  - isolation (only when named in -planes): two daemons started side
//	    by side, --isolation none and namespaces (needs root), compared on
//	    `echo hi`, a python cell, a keystroke echo, idle RSS and start
//	    time (isolation.go);
//	  - browser, desktop (only when named in -planes): Xvfb, a headful
//	    Chromium on it, the computer-use worker and a second aiod attached
//	    to both: the browser plane's screenshot beside
//	    Page.captureScreenshot straight over CDP, the computer-use plane's
//	    screenshot beside a direct X client's GetImage + PNG encode (-shots
//	    each), a CLICK round trip, and that daemon's idle RSS with the
//	    browser's own memory apart (desktop.go).
//
// aiod runs as a separate process built from this module. It prints
// markdown for bench/RESULTS.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "aiod bench:", err)
		os.Exit(1)
	}
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}, Timeout: 5 * time.Minute}

func main() {
	serve := flag.Bool("serve", false, "internal: run as the baseline file server")
	calls := flag.Int("calls", 1000, "sequential command calls per path")
	clients := flag.Int("clients", 8, "concurrent clients for calls/s")
	duration := flag.Duration("duration", 5*time.Second, "length of each calls/s run")
	files := flag.Int("files", 10000, "files in the grep tree")
	rounds := flag.Int("rounds", 3, "interleaved rounds for transfer and grep (medians)")
	shots := flag.Int("shots", 100, "screenshots per path for browser and desktop")
	planes := flag.String("planes", "commands,mcp,transfer,grep,code,pty,watch", "which parts to measure")
	flag.Parse()
	want := map[string]bool{}
	for _, p := range strings.Split(*planes, ",") {
		want[strings.TrimSpace(p)] = true
	}
	if *serve {
		serveBaseline()
		return
	}

	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "aiod-bench-")
	check(err)
	defer os.RemoveAll(tmp)
	bin, err := procs.Build(root, tmp, "aiod")
	check(err)
	ws := filepath.Join(tmp, "ws")
	check(os.MkdirAll(ws, 0o755))
	daemon := exec.Command(bin, "--port", "0", "--workspace", ws, "--log-level", "warn")
	base, err := procs.Start(daemon)
	check(err)
	defer procs.Stop(daemon)
	time.Sleep(time.Second)
	rssStart := rss(daemon.Process.Pid)

	self, err := os.Executable()
	check(err)
	fsrv := exec.Command(self, "-serve")
	fbase, err := procs.Start(fsrv)
	check(err)
	defer procs.Stop(fsrv)

	fmt.Printf("## aiod (`go run ./bench/aiod -calls %d -clients %d -duration %s -files %d -rounds %d -shots %d -planes %s`)\n\n",
		*calls, *clients, *duration, *files, *rounds, *shots, *planes)
	if want["commands"] {
		benchCommands(base, *calls, *clients, *duration)
	}
	if want["mcp"] {
		benchMCP(base, *calls)
	}
	if want["transfer"] {
		benchTransfer(base, fbase, ws, *rounds)
	}
	if want["grep"] {
		benchGrep(base, tmp, *files, *rounds)
	}
	if want["code"] {
		benchCode(base, root, *calls)
	}
	if want["pty"] {
		benchPTY(base, *calls)
	}
	if want["watch"] {
		benchWatch(base, tmp, *files)
	}
	if want["isolation"] {
		benchIsolation(bin, tmp, *calls)
	}
	if want["browser"] || want["desktop"] {
		benchDesk(bin, tmp, *shots, want)
	}
	time.Sleep(2 * time.Second)
	busy := rss(daemon.Process.Pid)
	time.Sleep(8 * time.Second)
	fmt.Printf("### Idle RSS of the daemon (target < 20 MiB)\n\n- after start: %.1f MiB; after the load above, idle 2 s: %.1f MiB; idle 10 s: %.1f MiB\n\n",
		rssStart, busy, rss(daemon.Process.Pid))
}

// rss is VmRSS of pid in MiB.
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return float64(kb) / 1024
		}
	}
	return 0
}

func postJSON(u string, body any) (map[string]any, error) {
	b, _ := json.Marshal(body)
	resp, err := client.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env struct {
		Success bool           `json:"success"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("%s: %d: %w", u, resp.StatusCode, err)
	}
	if resp.StatusCode != 200 || !env.Success {
		return nil, fmt.Errorf("%s: %d %s", u, resp.StatusCode, env.Message)
	}
	return env.Data, nil
}

func benchCommands(base string, calls, clients int, d time.Duration) {
	bare := func() error {
		out, err := exec.Command("bash", "-c", "echo hi").Output()
		if err == nil && string(out) != "hi\n" {
			err = fmt.Errorf("bare: %q", out)
		}
		return err
	}
	ours := func() error {
		data, err := postJSON(base+"/v2/commands", map[string]any{"command": "echo hi"})
		if err == nil && (data["stdout"] != "hi\n" || data["exit_code"] != 0.0) {
			err = fmt.Errorf("aiod: %v", data)
		}
		return err
	}
	b50, b99, err := lat.Measure(calls, bare)
	check(err)
	o50, o99, err := lat.Measure(calls, ours)
	check(err)
	bRate := rate(clients, d, bare)
	oRate := rate(clients, d, ours)
	fmt.Printf("### Commands: `echo hi` (%d sequential calls; calls/s with %d clients for %s)\n\n", calls, clients, d)
	fmt.Println("| path | p50 | p99 | calls/s |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| bare fork/exec of `bash -c 'echo hi'` from Go | %s | %s | %.0f |\n", lat.US(b50), lat.US(b99), bRate)
	fmt.Printf("| POST /v2/commands (sync) | %s | %s | %.0f |\n", lat.US(o50), lat.US(o99), oRate)
	fmt.Printf("\n- p50 ratio %.2fx (target <= 1.3x); calls/s ratio %.2fx\n\n", float64(o50)/float64(b50), oRate/bRate)
}

// rate runs f from n goroutines for d and returns completed calls per
// second.
func rate(n int, d time.Duration, f func() error) float64 {
	var done atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				check(f())
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}

// upload sends size bytes as a multipart "file" part with the target
// path first, streamed from memory.
func upload(u, path string, payload []byte) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("path", path)
		part, err := mw.CreateFormFile("file", filepath.Base(path))
		if err == nil {
			_, err = part.Write(payload)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := client.Post(u+"?path="+url.QueryEscape(path), mw.FormDataContentType(), pr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"success":true`)) {
		return fmt.Errorf("upload %s: %d %s", u, resp.StatusCode, b)
	}
	return nil
}

func download(u, path string, size int) error {
	resp, err := client.Get(u + "?path=" + url.QueryEscape(path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && (resp.StatusCode != 200 || n != int64(size)) {
		err = fmt.Errorf("download %s: %d, %d bytes", u, resp.StatusCode, n)
	}
	return err
}

// throughput runs f reps times and returns MiB/s.
func throughput(size, reps int, f func() error) float64 {
	start := time.Now()
	for i := 0; i < reps; i++ {
		check(f())
	}
	return float64(size*reps) / (1 << 20) / time.Since(start).Seconds()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func benchTransfer(base, fbase, ws string, rounds int) {
	fmt.Printf("### Transfer (MiB/s, medians of %d interleaved rounds)\n\n", rounds)
	fmt.Println("| size | op | minimal net/http server | aiod | ratio (target >= 0.9x) |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, sz := range []struct {
		name       string
		size, reps int
	}{{"1 MiB", 1 << 20, 100}, {"64 MiB", 64 << 20, 4}} {
		payload := bytes.Repeat([]byte("0123456789abcdef"), sz.size/16)
		up := map[string][]float64{}
		down := map[string][]float64{}
		for r := 0; r < rounds; r++ {
			for _, t := range []struct{ name, up, down string }{
				{"base", fbase + "/upload", fbase + "/download"},
				{"aiod", base + "/v2/fs/upload", base + "/v2/fs/download"},
			} {
				path := filepath.Join(ws, t.name+"-"+strconv.Itoa(sz.size))
				up[t.name] = append(up[t.name], throughput(sz.size, sz.reps, func() error { return upload(t.up, path, payload) }))
				down[t.name] = append(down[t.name], throughput(sz.size, sz.reps, func() error { return download(t.down, path, sz.size) }))
			}
		}
		for _, op := range []struct {
			name string
			m    map[string][]float64
		}{{"upload", up}, {"download", down}} {
			b, o := median(op.m["base"]), median(op.m["aiod"])
			fmt.Printf("| %s | %s | %.0f | %.0f | %.2fx |\n", sz.name, op.name, b, o, o/b)
		}
	}
	fmt.Println()
}

// makeTree writes n small text files in directories of 100; one file in
// 100 holds a line matching the benchmark's pattern.
func makeTree(dir string, n int) {
	line := "the quick brown fox jumps over the lazy dog while counting sheep and writing code\n"
	body := strings.Repeat(line, 40)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			check(os.MkdirAll(d, 0o755))
		}
		content := body
		if i%100 == 7 {
			content = body[:len(body)/2] + fmt.Sprintf("found needle%d here\n", i) + body[len(body)/2:]
		}
		check(os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), []byte(content), 0o644))
	}
}

func benchGrep(base, tmp string, n, rounds int) {
	tree := filepath.Join(tmp, "tree")
	makeTree(tree, n)
	want := n / 100
	ours := func() error {
		data, err := postJSON(base+"/v2/fs/grep", map[string]any{"path": tree, "pattern": "needle[0-9]+", "recursive": true, "max_results": 100000})
		if err == nil && data["match_count"] != float64(want) {
			err = fmt.Errorf("aiod grep: %v matches, want %d", data["match_count"], want)
		}
		return err
	}
	gnu := func() error {
		out, err := exec.Command("grep", "-rnE", "needle[0-9]+", tree).Output()
		if err == nil && bytes.Count(out, []byte("\n")) != want {
			err = fmt.Errorf("grep -r: %d lines, want %d", bytes.Count(out, []byte("\n")), want)
		}
		return err
	}
	timeIt := func(f func() error) float64 {
		t0 := time.Now()
		check(f())
		return float64(time.Since(t0)) / float64(time.Millisecond)
	}
	check(ours())
	check(gnu())
	var g, o []float64
	for r := 0; r < max(rounds, 5); r++ {
		g = append(g, timeIt(gnu))
		o = append(o, timeIt(ours))
	}
	fmt.Printf("### Grep: `needle[0-9]+` over %d files (%d matches; medians of %d interleaved runs, warm page cache)\n\n", n, want, len(g))
	fmt.Println("| path | time |")
	fmt.Println("|---|---:|")
	fmt.Printf("| `grep -rnE` | %.1f ms |\n| POST /v2/fs/grep | %.1f ms |\n", median(g), median(o))
	fmt.Printf("\n- ratio %.2fx (target <= 1x)\n\n", median(o)/median(g))
}

// serveBaseline is the minimal file server: multipart upload streamed to
// a temporary file and renamed, download by http.ServeContent.
func serveBaseline() {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Query().Get("path")
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for {
			p, err := mr.NextPart()
			if err != nil {
				http.Error(w, "no file part", 400)
				return
			}
			if p.FormName() != "file" {
				continue
			}
			f, err := os.CreateTemp(filepath.Dir(path), ".up-*")
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			n, err := io.Copy(f, p)
			if err == nil {
				err = f.Close()
			}
			if err == nil {
				err = os.Rename(f.Name(), path)
			}
			if err != nil {
				os.Remove(f.Name())
				http.Error(w, err.Error(), 500)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"success":true,"data":{"file_path":%q,"file_size":%d}}`, path, n)
			return
		}
	})
	mux.HandleFunc("GET /download", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(r.URL.Query().Get("path"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, _ := f.Stat()
		http.ServeContent(w, r, st.Name(), st.ModTime(), f)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	ctx, stop := signalContext()
	defer stop()
	<-ctx.Done()
	_ = srv.Shutdown(context.Background())

}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
