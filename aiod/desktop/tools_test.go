package desktop

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/child"
)

// TestToolFailure: a program that fails is a 503 naming it, its
// standard error goes to the log at Warn, and typed text reaches
// neither the log nor the program's arguments.
func TestToolFailure(t *testing.T) {
	wk, srv := testWorker(t, 320, 200)
	fake := filepath.Join(t.TempDir(), "xdotool")
	// echoes its arguments to standard error and fails
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"boom: $*\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wk.xdotool.path = fake
	logs := child.NewTail(1 << 20)
	wk.log = slog.New(slog.NewTextHandler(logs, nil))
	for _, body := range []string{`{"action_type":"PRESS","key":"a"}`, `{"action_type":"TYPING","text":"hunter2","use_clipboard":false}`} {
		resp, err := http.Post(srv.URL+"/v2/computer/actions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || strings.TrimSpace(string(b)) != `{"success":false,"message":"xdotool failed","data":null,"hint":null}` {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	l := logs.String()
	if !strings.Contains(l, "level=WARN") || !strings.Contains(l, `stderr="boom: key -- a"`) || !strings.Contains(l, "command=type") {
		t.Errorf("log: %s", l)
	}
	if strings.Contains(l, "hunter2") {
		t.Errorf("typed text in the log: %s", l)
	}
}
