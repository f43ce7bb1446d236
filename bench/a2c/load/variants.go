package main

// Variants of our server for A/B runs in one command:
//
//	ours@REV       our server built from git revision REV (a worktree of
//	               this repository, removed after the build), the
//	               "before" binary of an A/B run
//	ours+otlp      tracing on, every span exported over OTLP/HTTP to a
//	               sink this process runs on 127.0.0.1 (it reads and
//	               discards, counting requests)
//	ours+console   the web console on (--console: the call log and the
//	               span recorder), with two readers of its live stream:
//	               one that reads every event, one that never reads
//
// They combine: ours@0544e83+otlp.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// buildDir is where built binaries go (the run's temporary folder).
var buildDir string

type variant struct {
	base, rev     string
	otlp, console bool
}

func parseVariant(target string) variant {
	parts := strings.Split(target, "+")
	v := variant{base: parts[0]}
	if b, rev, ok := strings.Cut(v.base, "@"); ok {
		v.base, v.rev = b, rev
	}
	for _, p := range parts[1:] {
		switch p {
		case "otlp":
			v.otlp = true
		case "console":
			v.console = true
		default:
			check(fmt.Errorf("unknown variant +%s in %q", p, target))
		}
	}
	return v
}

func (v variant) env() []string {
	if !v.otlp {
		return nil
	}
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sinkURL(), "OTEL_SERVICE_NAME=a2c-bench"}
}

func (v variant) args() []string {
	if v.console {
		return []string{"--console"}
	}
	return nil
}

var (
	revMu   sync.Mutex
	revBins = map[string]string{}
)

// binAt builds cmd/a2c at git revision rev once per run.
func binAt(root, rev string) string {
	revMu.Lock()
	defer revMu.Unlock()
	if b, ok := revBins[rev]; ok {
		return b
	}
	dir := filepath.Join(buildDir, "rev-"+rev)
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Stderr = root, os.Stderr
		check(cmd.Run())
	}
	run("git", "worktree", "add", "--detach", dir, rev)
	defer run("git", "worktree", "remove", "--force", dir)
	out := filepath.Join(buildDir, "a2c-"+rev)
	build := exec.Command("go", "build", "-o", out, "./cmd/a2c")
	build.Dir, build.Stderr = dir, os.Stderr
	check(build.Run())
	revBins[rev] = out
	return out
}

var (
	sinkOnce sync.Once
	sink     *httptest.Server
	sinkReqs atomic.Int64
	sinkSize atomic.Int64
)

// sinkURL is the base URL of the OTLP sink, started on first use.
func sinkURL() string {
	sinkOnce.Do(func() {
		sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			sinkReqs.Add(1)
			sinkSize.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		}))
	})
	return sink.URL
}

func stopSink() {
	if sink != nil {
		sink.Close()
	}
}

// streamWatchers are the two readers of one server's live stream.
type streamWatchers struct {
	events atomic.Int64
	reader io.Closer
	stall  net.Conn
	done   chan struct{}
}

var (
	streamMu    sync.Mutex
	streamStats []streamStat
)

type streamStat struct {
	events, calls, dropped int64
}

// watchStream connects a reader that reads every event of the console's
// live stream and one that sends its request and never reads.
func watchStream(url string) *streamWatchers {
	w := &streamWatchers{done: make(chan struct{})}
	resp, err := http.Get(url + "/api/console/calls/stream")
	check(err)
	if resp.StatusCode != http.StatusOK {
		check(fmt.Errorf("console stream: %s", resp.Status))
	}
	w.reader = resp.Body
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: call" {
				w.events.Add(1)
			}
		}
	}()
	host := strings.TrimPrefix(url, "http://")
	w.stall, err = net.Dial("tcp", host)
	check(err)
	fmt.Fprintf(w.stall, "GET /api/console/calls/stream HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", host)
	return w
}

// stop closes the readers and records what they saw against the
// server's own counters; it returns the record too.
func (w *streamWatchers) stop(s *server) streamStat {
	calls := metricSum(s.url, "a2c_relayed_calls_total")
	dropped := metricSum(s.url, "a2c_console_events_dropped_total")
	w.reader.Close()
	w.stall.Close()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
	}
	st := streamStat{events: w.events.Load(), calls: calls, dropped: dropped}
	streamMu.Lock()
	streamStats = append(streamStats, st)
	streamMu.Unlock()
	return st
}

// metricSum adds up every sample of a metric on the server's /metrics.
func metricSum(url, name string) int64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return int64(sum)
}

// printStreams reports the console stream runs: the events the reading
// page got per relayed call (2 = a start and an end for every call), and
// the events dropped for the page that never read.
func printStreams(w io.Writer) {
	printSink(w)
	if len(streamStats) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| console stream run | relayed calls | events read by the reading page | per call | dropped (all pages) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for i, st := range streamStats {
		if st.calls <= 0 {
			continue // an idle-connections run (no calls), or /metrics did not answer
		}
		per := fmt.Sprintf("%.2f", float64(st.events)/float64(st.calls))
		fmt.Fprintf(w, "| %d | %d | %d | %s | %d |\n", i+1, st.calls, st.events, per, st.dropped)
	}
}

// printSink reports what the OTLP sink received, if it ran.
func printSink(w io.Writer) {
	if sink != nil {
		fmt.Fprintf(w, "\n- OTLP sink: %d export requests, %.1f MiB\n", sinkReqs.Load(), float64(sinkSize.Load())/(1<<20))
	}
}
