// Command putblob measures client:put_blob, the Agent-to-Computer upload
// of A2C-SMCP 0.4.0:
//
//	go run ./bench/a2c/putblob [-size 64] [-small 16] [-chunk 262144] [-runs 3]
//
// In one run it uploads a file of -size MiB (random bytes) from the Go
// Agent through a real `a2c server` to a real `a2c computer
// --landing-root` on 127.0.0.1, and copies the same file over a single
// loopback WebSocket (gorilla/websocket) in binary messages of the same
// chunk size to a receiver that writes it to disk: first streamed (the
// fastest a WebSocket copy goes), then with an ack per chunk (the pacing
// the protocol imposes). It prints the throughput of each, best of -runs,
// and the ratio of put_blob to the streamed copy (target >= 50%).
//
// It then measures the Computer's peak resident memory (VmHWM from
// /proc) in two fresh Computer processes, one receiving a -small MiB
// upload and one a -size MiB upload, next to their resident memory before
// the upload: a peak that does not grow with the file shows that memory
// is bounded by the chunk, not the file.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/bench/internal/procs"
	"github.com/a2c-smcp/a2c-go/smcp"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "putblob bench:", err)
		os.Exit(1)
	}
}

func main() {
	size := flag.Int("size", 64, "file size in MiB")
	small := flag.Int("small", 16, "the smaller file for the memory comparison, in MiB")
	chunk := flag.Int("chunk", agent.DefaultPutChunk, "raw bytes per chunk (put_blob and the WebSocket copy)")
	runs := flag.Int("runs", 3, "runs of each path (the best is reported)")
	profile := flag.String("profile", "", "write CPU profiles of the Agent (agent.pprof, put_blob runs only) and the server (server.pprof) to this folder")
	flag.Parse()

	root, err := procs.ModuleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "a2c-bench-putblob-")
	check(err)
	defer os.RemoveAll(tmp)
	bin, err := procs.BuildA2C(root, tmp)
	check(err)
	big := writeRandom(filepath.Join(tmp, "big.bin"), *size<<20)
	smallFile := writeRandom(filepath.Join(tmp, "small.bin"), *small<<20)

	srvArgs := []string{"server", "--listen", "127.0.0.1:0", "--log-level", "warn"}
	if *profile != "" {
		check(os.MkdirAll(*profile, 0o755))
		srvArgs = append(srvArgs, "--cpu-profile", filepath.Join(*profile, "server.pprof"))
	}
	srvCmd := exec.Command(bin, srvArgs...)
	srvURL, err := procs.Start(srvCmd)
	check(err)
	defer procs.Stop(srvCmd)

	// Throughput: put_blob and the two WebSocket copies, interleaved.
	pc := startComputer(bin, srvURL, "speed", filepath.Join(tmp, "landing-speed"))
	defer procs.Stop(pc.cmd)
	a := joinAgent(srvURL, "speed", "pc")
	recv := startReceiver(filepath.Join(tmp, "ws-copy"))
	defer recv.Close()
	var put, stream, paced time.Duration
	var cpu [3]time.Duration // agent (this process), server, computer, summed over the put_blob runs
	for i := 0; i < *runs; i++ {
		c0 := [3]time.Duration{selfCPU(), procCPU(srvCmd.Process.Pid), procCPU(pc.cmd.Process.Pid)}
		if *profile != "" {
			f, err := os.Create(filepath.Join(*profile, fmt.Sprintf("agent-%d.pprof", i)))
			check(err)
			check(pprof.StartCPUProfile(f))
			put = best(put, timePut(a, big, *chunk))
			pprof.StopCPUProfile()
			f.Close()
		} else {
			put = best(put, timePut(a, big, *chunk))
		}
		c1 := [3]time.Duration{selfCPU(), procCPU(srvCmd.Process.Pid), procCPU(pc.cmd.Process.Pid)}
		for j := range cpu {
			cpu[j] += c1[j] - c0[j]
		}
		stream = best(stream, timeCopy(recv.URL(), big, *chunk, false))
		paced = best(paced, timeCopy(recv.URL(), big, *chunk, true))
		check(os.RemoveAll(filepath.Join(tmp, "landing-speed")))
	}
	a.Close()
	mb := float64(*size)
	fmt.Printf("### client:put_blob of %d MiB, chunks of %d KiB (best of %d)\n\n", *size, *chunk>>10, *runs)
	fmt.Println("| path | time | MiB/s |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| Go Agent -> a2c server -> a2c computer (put_blob, ack per chunk, SHA-256 both ends) | %s | %.0f |\n", ms(put), mb/put.Seconds())
	fmt.Printf("| one loopback WebSocket, binary messages streamed, receiver writes to disk | %s | %.0f |\n", ms(stream), mb/stream.Seconds())
	fmt.Printf("| one loopback WebSocket, binary messages, ack per chunk | %s | %.0f |\n", ms(paced), mb/paced.Seconds())
	fmt.Printf("\n- put_blob / streamed WebSocket copy: %.0f%% (target >= 50%%); put_blob / ack-paced copy: %.0f%%\n",
		100*stream.Seconds()/put.Seconds(), 100*paced.Seconds()/put.Seconds())
	n := time.Duration(*runs)
	fmt.Printf("- CPU per put_blob of %d MiB (mean): Agent %s, a2c server %s, a2c computer %s\n", *size, ms(cpu[0]/n), ms(cpu[1]/n), ms(cpu[2]/n))
	chunks := (int64(*size)<<20 + int64(*chunk) - 1) / int64(*chunk)
	perChunk := (cpu[0] + cpu[1] + cpu[2]) / n / time.Duration(chunks)
	fmt.Printf("- CPU per chunk, the three processes together: %.2f ms (%d chunks; the Agent's includes hashing and reading the file)\n\n",
		float64(perChunk)/float64(time.Millisecond), chunks)

	// Memory: a fresh Computer per file size.
	fmt.Printf("### The Computer's memory during one upload (fresh process each)\n\n")
	fmt.Println("| upload | RSS before | peak RSS (VmHWM) |")
	fmt.Println("|---:|---:|---:|")
	for _, f := range []struct {
		path string
		mib  int
	}{{smallFile, *small}, {big, *size}} {
		office := "mem" + strconv.Itoa(f.mib)
		c := startComputer(bin, srvURL, office, filepath.Join(tmp, "landing-"+office))
		a := joinAgent(srvURL, office, "pc")
		before := procKB(c.cmd.Process.Pid, "VmRSS")
		timePut(a, f.path, *chunk)
		peak := procKB(c.cmd.Process.Pid, "VmHWM")
		a.Close()
		procs.Stop(c.cmd)
		fmt.Printf("| %d MiB | %.1f MiB | %.1f MiB |\n", f.mib, float64(before)/1024, float64(peak)/1024)
	}
}

func best(cur, d time.Duration) time.Duration {
	if cur == 0 || d < cur {
		return d
	}
	return cur
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func writeRandom(path string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	check(os.WriteFile(path, b, 0o600))
	return path
}

type computerProc struct{ cmd *exec.Cmd }

// startComputer runs "a2c computer" named pc in office, landing in root.
func startComputer(bin, srvURL, office, root string) computerProc {
	cmd := exec.Command(bin, "computer", "--server", srvURL, "--office", office, "--name", "pc",
		"--landing-root", root, "--skills", "", "--log-level", "warn")
	check(cmd.Start())
	return computerProc{cmd}
}

// joinAgent joins office as an Agent and waits for its Computer.
func joinAgent(srvURL, office, computer string) *agent.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, srvURL, agent.Options{Name: "bench-" + office, RequestTimeout: time.Minute})
	check(err)
	check(a.Join(ctx, office))
	for {
		sessions, err := a.ListRoom(ctx)
		check(err)
		for _, s := range sessions {
			if s.Role == smcp.RoleComputer && s.Name == computer {
				return a
			}
		}
		select {
		case <-ctx.Done():
			check(fmt.Errorf("computer %s never joined office %s", computer, office))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func timePut(a *agent.Client, path string, chunk int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	ret, err := a.PutFile(ctx, "pc", path, agent.PutOptions{ChunkSize: chunk})
	check(err)
	d := time.Since(start)
	check(os.Remove(ret.LandingPath))
	return d
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user and system CPU time of process pid, from
// /proc/PID/stat (in clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	// Fields after the command name, which ends at the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, err := strconv.ParseInt(f[11], 10, 64)
	check(err)
	st, err := strconv.ParseInt(f[12], 10, 64)
	check(err)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procKB reads a "Name:  N kB" line of /proc/PID/status.
func procKB(pid int, name string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			check(err)
			return n
		}
	}
	check(fmt.Errorf("no %s in /proc/%d/status", name, pid))
	return 0
}

// receiver is the baseline's WebSocket server: each connection's binary
// messages are written to a new file; with ?ack=1 each message is acked
// with a one-byte text message; a text message "done" closes the file and
// is answered "ok".
type receiver struct {
	ln  net.Listener
	dir string
}

func startReceiver(dir string) *receiver {
	check(os.MkdirAll(dir, 0o700))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	r := &receiver{ln: ln, dir: dir}
	up := websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferSize: 4 << 10}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			c, err := up.Upgrade(w, req, nil)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetReadLimit(-1)
			ack := req.URL.Query().Get("ack") == "1"
			f, err := os.CreateTemp(r.dir, "copy-")
			if err != nil {
				return
			}
			defer os.Remove(f.Name())
			defer f.Close()
			buf := make([]byte, 256<<10)
			for {
				t, rd, err := c.NextReader()
				if err != nil {
					return
				}
				if t == websocket.TextMessage {
					_ = f.Close()
					_ = c.WriteMessage(websocket.TextMessage, []byte("ok"))
					return
				}
				if _, err := io.CopyBuffer(f, rd, buf); err != nil {
					return
				}
				if ack && c.WriteMessage(websocket.TextMessage, []byte("k")) != nil {
					return
				}
			}
		}))
	}()
	return r
}

func (r *receiver) URL() string { return "ws://" + r.ln.Addr().String() + "/" }

func (r *receiver) Close() { _ = r.ln.Close() }

// timeCopy copies the file at path to the receiver in messages of chunk
// bytes, waiting for each one's ack when paced, and returns the time until
// the receiver confirms the file is written.
func timeCopy(url, path string, chunk int, paced bool) time.Duration {
	if paced {
		url += "?ack=1"
	}
	start := time.Now()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	check(err)
	defer c.Close()
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	buf := make([]byte, chunk)
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			check(c.WriteMessage(websocket.BinaryMessage, buf[:n]))
			if paced {
				_, m, err := c.ReadMessage()
				check(err)
				if !bytes.Equal(m, []byte("k")) {
					check(fmt.Errorf("unexpected ack %q", m))
				}
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		check(err)
	}
	check(c.WriteMessage(websocket.TextMessage, []byte("done")))
	_, m, err := c.ReadMessage()
	check(err)
	if string(m) != "ok" {
		check(fmt.Errorf("unexpected answer %q", m))
	}
	return time.Since(start)
}
