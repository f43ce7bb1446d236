package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/bench/internal/lat"
)

// benchCode times a print(1) cell on a warm kernel through
// POST /v2/code/execute, beside the same execute_request sent straight to
// a kernel by Debian's jupyter_client (bench/aiod/kernel_baseline.py) in
// the same run.
func benchCode(base, root string, calls int) {
	cell := func() error {
		data, err := postJSON(base+"/v2/code/execute", map[string]any{"language": "python", "code": "print(1)", "session_id": "bench"})
		if err == nil && data["status"] != "ok" {
			err = fmt.Errorf("cell: %v", data)
		}
		return err
	}
	check(cell()) // starts the kernel
	o50, o99, err := lat.Measure(calls, cell)
	check(err)
	out, err := exec.Command("/usr/bin/python3", filepath.Join(root, "bench", "aiod", "kernel_baseline.py"), fmt.Sprint(calls)).Output()
	check(err)
	var b struct{ P50, P99 float64 }
	check(json.Unmarshal(out, &b))
	b50, b99 := time.Duration(b.P50*1e3), time.Duration(b.P99*1e3)
	del(base + "/v2/code/sessions/bench")
	fmt.Printf("### Code: `print(1)` on a warm kernel (%d cells)\n\n", calls)
	fmt.Println("| path | p50 | p99 |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| jupyter_client straight to ipykernel (Python) | %s | %s |\n", lat.US(b50), lat.US(b99))
	fmt.Printf("| POST /v2/code/execute | %s | %s |\n", lat.US(o50), lat.US(o99))
	fmt.Printf("\n- p50 %s vs target %s (1.2x + 1 ms): ratio %.2fx\n\n", lat.US(o50), lat.US(b50*12/10+time.Millisecond), float64(o50)/float64(b50))
}

// openPTY creates the terminal id on base and dials its WebSocket; it
// returns the socket, the session id the daemon answered and the
// socket's URL (to dial again).
func openPTY(base, id string) (c *websocket.Conn, sid, wsURL string) {
	data, err := postJSON(base+"/v2/pty/sessions", map[string]any{"id": id})
	check(err)
	sid, _ = data["session_id"].(string)
	u, _ := url.Parse(base)
	u.Scheme, u.Path = "ws", "/v2/pty/sessions/"+sid+"/ws"
	c, _, err = websocket.DefaultDialer.Dial(u.String(), nil)
	check(err)
	return c, sid, u.String()
}

// benchPTY times a keystroke to its echo over the terminal WebSocket.
func benchPTY(base string, calls int) {
	c, id, wsURL := openPTY(base, "bench")
	defer c.Close()
	read := func() map[string]any {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var f map[string]any
		check(c.ReadJSON(&f))
		return f
	}
	for f := read(); f["type"] != "ready"; f = read() {
	}
	// Let the prompt settle, then drain what it printed.
	time.Sleep(300 * time.Millisecond)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		var f map[string]any
		if c.ReadJSON(&f) != nil {
			break
		}
	}
	c, _, err := websocket.DefaultDialer.Dial(wsURL+"?durable=true", nil)
	check(err)
	for f := read(); f["type"] != "ready"; f = read() {
	}
	n := 0
	key := func() error {
		n++
		k := "x"
		if n%50 == 0 {
			k = "\u0015" // ^U clears the line now and then
		}
		if err := c.WriteJSON(map[string]string{"type": "input", "data": k}); err != nil {
			return err
		}
		for {
			f := read()
			if f["type"] == "output" {
				return nil
			}
		}
	}
	p50, p99, err := lat.Measure(calls, key)
	check(err)
	c.Close()
	del(base + "/v2/pty/sessions/" + id)
	fmt.Printf("### Terminal: keystroke to echo over the WebSocket (%d keys)\n\n- p50 %s, p99 %s (target: p99 < 2 ms)\n\n", calls, lat.US(p50), lat.US(p99))
}

// benchWatch counts the events a watcher delivers while a script writes
// n small files, and how fast.
func benchWatch(base, tmp string, n int) {
	dir := filepath.Join(tmp, "watched")
	check(os.MkdirAll(dir, 0o755))
	data, err := postJSON(base+"/v2/watch", map[string]any{"path": dir, "recursive": true, "debounce": 50})
	check(err)
	id, _ := data["watcher_id"].(string)
	cursor := fmt.Sprint(data["initial_cursor"])
	start := time.Now()
	script := fmt.Sprintf("for i in $(seq 1 %d); do echo x > %s/f$i; done", n, dir)
	writer := exec.Command("bash", "-c", script)
	check(writer.Start())
	creates := map[string]int{}
	total, overflow := 0, false
	var last time.Time
	deadline := time.Now().Add(2 * time.Minute)
	for len(creates) < n && time.Now().Before(deadline) {
		resp, err := client.Get(fmt.Sprintf("%s/v2/watch/%s/poll?cursor=%s&limit=1000&timeout=5", base, id, cursor))
		check(err)
		var env struct {
			Data struct {
				Events []struct {
					RelativePath string `json:"relative_path"`
					Kind         string `json:"type"`
				} `json:"events"`
				Cursor   json.Number `json:"cursor"`
				Overflow bool        `json:"overflow"`
			} `json:"data"`
		}
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		check(dec.Decode(&env))
		resp.Body.Close()
		cursor = env.Data.Cursor.String()
		overflow = overflow || env.Data.Overflow
		for _, e := range env.Data.Events {
			total++
			if e.Kind == "create" {
				creates[e.RelativePath]++
			}
		}
		if len(env.Data.Events) > 0 {
			last = time.Now()
		}
	}
	check(writer.Wait())
	dup := 0
	for _, c := range creates {
		if c > 1 {
			dup++
		}
	}
	elapsed := last.Sub(start)
	fmt.Printf("### Watch: a script writes %d small files into a watched directory\n\n", n)
	fmt.Printf("- create events %d of %d (lost %d, duplicated %d), %d events in all, overflow %v\n", len(creates), n, n-len(creates), dup, total, overflow)
	fmt.Printf("- %d events in %s: %.0f events/s sustained\n\n", total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
	del(base + "/v2/watch/" + id)
}

// del ends what a part of the benchmark created, so the idle figure that
// follows measures an idle daemon.
func del(u string) {
	req, _ := http.NewRequest(http.MethodDelete, u, nil)
	resp, err := client.Do(req)
	check(err)
	resp.Body.Close()
}
