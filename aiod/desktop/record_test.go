package desktop

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// TestProgress: the recording's duration is ffmpeg's latest out_time_us,
// whatever the chunks its report arrives in.
func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   float64
	}{
		{"none yet", []string{"frame=0\nout_time_us=N/A\n"}, 0},
		{"one report", []string{"frame=3\nout_time_us=100000\nprogress=continue\n"}, 0.1},
		{"latest wins", []string{"out_time_us=100000\n", "out_time_us=1500000\n"}, 1.5},
		{"split line", []string{"out_time", "_us=2", "50000\n"}, 0.25},
		{"unfinished line ignored", []string{"out_time_us=700000\nout_time_us=9"}, 0.7},
		{"negative ignored", []string{"out_time_us=-5\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p progress
			for _, c := range tc.chunks {
				if n, err := p.Write([]byte(c)); n != len(c) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", c, n, err)
				}
			}
			if got := p.seconds(); got != tc.want {
				t.Errorf("seconds = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecordSavePathNotRegular: a save_path that exists and is not a
// regular file is refused at once (a FIFO used to freeze the recorder,
// status and shutdown included, until a reader came).
func TestRecordSavePathNotRegular(t *testing.T) {
	_, srv := testWorker(t, 320, 200)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "rec.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.mp4")
	if err := os.Symlink(filepath.Join(dir, "target.mp4"), link); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []string{fifo, link, dir, "/dev/null"} {
		resp, err := c.Post(srv.URL+"/v2/computer/record", "application/json", strings.NewReader(`{"action":"start","save_path":"`+p+`"}`))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := `{"success":false,"message":"save_path is not a regular file: ` + p + `","data":null,"hint":"name a new file or an existing regular file (not a FIFO, device, folder or symbolic link)"}`
		if resp.StatusCode != 400 || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "target.mp4")); err == nil {
		t.Error("the link was followed")
	}
	resp, err := c.Post(srv.URL+"/v2/computer/record", "application/json", strings.NewReader(`{"action":"status"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestRecordFailure: a recording whose ffmpeg fails says so in status
// and stop (error, status stopped) with ffmpeg's last line, logged at
// Warn; one ended by stop (SIGINT, exit 255) has error null. The output
// is named mp4 whatever the file's name.
func TestRecordFailure(t *testing.T) {
	wk, srv := testWorker(t, 320, 200)
	dir := t.TempDir()
	logs := child.NewTail(1 << 20)
	wk.log = slog.New(slog.NewTextHandler(logs, nil))
	post := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v2/computer/record", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v %v", body, resp.StatusCode, env, err)
		}
		return env["data"].(map[string]any)
	}
	fake := func(script string) {
		p := filepath.Join(t.TempDir(), "ffmpeg")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		wk.ffmpeg.path = p
	}
	// fails after 0.4 s, naming its arguments' tail on standard error
	fake(`echo out_time_us=200000; sleep 0.4; echo "args: $*" >&2; echo "Error writing trailer: No space left on device" >&2; exit 1` + "\n")
	out := filepath.Join(dir, "x.txt")
	if d := post(`{"action":"start","save_path":"` + out + `"}`); d["status"] != "recording" || d["error"] != nil {
		t.Fatalf("start: %v", d)
	}
	var d map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if d = post(`{"action":"status"}`); d["status"] == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never stopped")
		}
	}
	want := "the recording failed: ffmpeg exit status 1: Error writing trailer: No space left on device"
	if d["error"] != want {
		t.Errorf("status: %v", d)
	}
	if d := post(`{"action":"stop"}`); d["error"] != want || d["status"] != "stopped" {
		t.Errorf("stop: %v", d)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "No space left on device") || !strings.Contains(l, "-f mp4 -y "+out) {
		t.Errorf("log: %s", l)
	}
	// stopped by stop: SIGINT, exit 255, no error
	fake("trap 'exit 255' INT\necho out_time_us=300000\nwhile :; do sleep 0.05; done\n")
	post(`{"action":"start","save_path":"` + filepath.Join(dir, "ok.mp4") + `"}`)
	if d := post(`{"action":"stop"}`); d["status"] != "stopped" || d["error"] != nil {
		t.Errorf("stop: %v", d)
	}
}

// TestFailureOfQuotesLastLine: ffmpeg's last line is quoted however much
// it wrote before it (the buffer keeps the end, not the start).
func TestFailureOfQuotesLastLine(t *testing.T) {
	tests := []struct {
		name   string
		output string
		want   string
	}{
		{"no output", "", "the recording failed: ffmpeg boom"},
		{"last line", "a\nb\n\n", "the recording failed: ffmpeg boom: b"},
		{"after 16 KiB", strings.Repeat("noise line\n", 4000) + "Cannot open display\n", "the recording failed: ffmpeg boom: Cannot open display"},
		{"long line capped", strings.Repeat("x", 400), "the recording failed: ffmpeg boom: " + strings.Repeat("x", 300)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := child.NewTail(16 << 10)
			_, _ = tl.Write([]byte(tc.output))
			if got := failureOf(errors.New("boom"), false, tl); got != tc.want {
				t.Errorf("failureOf = %q, want %q", got, tc.want)
			}
		})
	}
}
