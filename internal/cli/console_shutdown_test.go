package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// consoleURL matches the console's address in a2c server's and a2c up's
// logs.
var consoleURL = regexp.MustCompile(`console(?: url)?=(http://[^/\s]+)/`)

// An open live stream of the console does not hold a2c server or a2c up
// at shutdown: the console closes as the HTTP server starts its own
// shutdown.
func TestShutdownWithOpenConsoleStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, e *env, args []string) error
		args func(t *testing.T) []string
		// bound is how long the stop may take: under the time a stream
		// held open would cost (the HTTP server's shutdown waiting out its
		// deadline: 5 s for a2c server; 10 s for a2c up, after it has
		// stopped its Computer and sandbox, which takes seconds of its
		// own on a loaded machine).
		bound time.Duration
	}{
		{"server", runServer, func(*testing.T) []string {
			return []string{"--listen", "127.0.0.1:0", "--console"}
		}, 4 * time.Second},
		{"up", runUp, func(t *testing.T) []string {
			return []string{"--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--isolation", "none",
				"--workspace", filepath.Join(t.TempDir(), "ws"), "--skills", ""}
		}, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("A2C_TOKEN", "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			defer pr.Close()
			found := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					if m := consoleURL.FindStringSubmatch(sc.Text()); m != nil {
						select {
						case found <- m[1]:
						default:
						}
					}
				}
				_, _ = io.Copy(io.Discard, pr)
			}()
			done := make(chan error, 1)
			go func() {
				err := tc.run(ctx, &env{stdout: io.Discard, stderr: pw}, tc.args(t))
				pw.Close()
				done <- err
			}()
			var base string
			select {
			case base = <-found:
			case err := <-done:
				t.Fatalf("stopped before serving: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("no console URL logged")
			}
			// The stream is the client's own: it stays open through the shutdown.
			req, _ := http.NewRequest("GET", base+"/api/console/calls/stream", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, ": a2c console call stream") {
				t.Fatalf("stream: %d %q %v", resp.StatusCode, line, err)
			}
			stopped := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if d := time.Since(stopped); d > tc.bound {
					t.Fatalf("shutdown took %s with a console stream open", d)
				}
			case <-time.After(tc.bound):
				t.Errorf("not stopped %s after the signal with a console stream open (without the fix: 5 s for a2c server, 10 s for a2c up)", tc.bound)
				<-done // bounded by the command's own stop timeouts
			}
		})
	}
}
