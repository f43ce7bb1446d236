package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/blob"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// landingComputer is a Computer that answers client:put_blob from a landing.
type landingComputer struct{ l *blob.Landing }

func (c landingComputer) Event(_ *sio.Socket, e *sio.Event) {
	if e.Name != smcp.EventPutBlob {
		return
	}
	var req smcp.PutBlobReq
	var v any
	if err := smcp.DecodePutBlob(e.Args[0], &req); err != nil {
		v = err
	} else if ret, perr := c.l.Put(&req); perr != nil {
		v = perr
	} else {
		v = ret
	}
	_ = e.Ack(sio.Message{Args: []json.RawMessage{smcp.Encode(v)}})
}
func (landingComputer) Disconnect(*sio.Socket, string) {}

// joinComputer joins a Computer named name, landing in root ("" refuses
// uploads), to the default office of srvURL.
func joinComputer(t *testing.T, srvURL, name, root string) {
	t.Helper()
	l, err := blob.NewLanding(root, blob.UploadOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, srvURL, sio.ClientOptions{Namespace: smcp.Namespace,
		Query: map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}}, Handler: landingComputer{l}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Disconnect)
	join, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleComputer, Name: name, OfficeID: "default"})
	done := make(chan struct{})
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{join}}, 5*time.Second, func(sio.Message, error) { close(done) })
	<-done
}

func TestPut(t *testing.T) {
	srv, err := server.New(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	root := t.TempDir()
	joinComputer(t, ts.URL, "pc", root)
	file := filepath.Join(t.TempDir(), "my notes.txt")
	if err := os.WriteFile(file, []byte("hello upload"), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := run("put", file, "--server", ts.URL)
	if code != 0 || filepath.Dir(strings.TrimSpace(out)) != root || !strings.HasSuffix(out, "_my_notes.txt\n") ||
		!strings.Contains(stderr, "uploading "+file+" (12 bytes) to pc") {
		t.Fatalf("put: %d %q %q", code, out, stderr)
	}
	if b, _ := os.ReadFile(strings.TrimSpace(out)); string(b) != "hello upload" {
		t.Errorf("landed %q", b)
	}

	code, out, stderr = run("put", file, "--server", ts.URL, "--to", "pc", "--as", "report.txt", "--json")
	var res putResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || stderr != "" {
		t.Fatalf("put --json: %d %q %q", code, out, stderr)
	}
	sum := sha256.Sum256([]byte("hello upload"))
	if res.Computer != "pc" || res.LandingPath != filepath.Join(root, res.UploadID+"_report.txt") || res.TotalSize != 12 ||
		res.SHA256 != hex.EncodeToString(sum[:]) || !smcp.ValidUploadID(res.UploadID) {
		t.Errorf("put --json: %+v", res)
	}

	// With two Computers the user must choose.
	joinComputer(t, ts.URL, "other", "")
	if code, _, stderr := run("put", file, "--server", ts.URL); code != 1 || !strings.Contains(stderr, "the office has 2 Computers (other, pc); choose one with --to") {
		t.Errorf("two computers: %d %q", code, stderr)
	}
	if code, _, stderr := run("put", file, "--server", ts.URL, "--computer", "other"); code != 1 ||
		!strings.HasSuffix(stderr, "\na2c put: other refused the upload (4019 forbidden): it accepts no uploads (start it with --landing-root DIR)\n") {
		t.Errorf("forbidden: %d %q", code, stderr)
	}
	if code, _, stderr := run("put", file, "--server", ts.URL, "--to", "nobody"); code != 1 || !strings.Contains(stderr, "Computer not found") {
		t.Errorf("unknown computer: %d %q", code, stderr)
	}
}

func TestPutBadCommandLines(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	_ = os.WriteFile(empty, nil, 0o600)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"put"}, 2, "a2c put: exactly one FILE is required"},
		{[]string{"put", "a", "b"}, 2, "a2c put: exactly one FILE is required"},
		{[]string{"put", "x", "--bogus"}, 2, "a2c put: flag provided but not defined: -bogus"},
		{[]string{"put", "/nonexistent/file"}, 1, "a2c put: stat /nonexistent/file: no such file or directory"},
		{[]string{"put", t.TempDir()}, 1, "is not a regular file"},
		{[]string{"put", empty}, 1, "is empty: there is nothing to upload"},
	} {
		code, _, stderr := run(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
