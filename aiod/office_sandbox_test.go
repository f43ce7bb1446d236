package aiod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestMain lets this test binary be a sandbox's init (the isolation
// tests start one).
func TestMain(m *testing.M) {
	sandbox.Dispatch(os.Args)
	os.Exit(m.Run())
}

// TestJoinOfficeSandboxedUploads: a sandboxed daemon's office Computer
// lands what an Agent uploads in the sandbox's view, as the sandbox
// account: the file is the account's and a sandbox command reads it; and
// when a sandbox process has replaced the landing root (in the
// workspace, which it can write) with a link to a host directory, the
// upload is refused and nothing reaches that directory, where the
// daemon, root on the host, would otherwise have followed the link.
func TestJoinOfficeSandboxedUploads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("isolation needs root")
	}
	ws := t.TempDir()
	hostDir := t.TempDir() // root's, outside the sandbox's view
	d, err := New(pinPorts(t, Config{Workspace: ws, Isolation: Isolation{Mode: sandbox.Namespaces}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) }) // after the office is left
	_, uid, gid := d.sandbox.Account()
	hub := officeHub(t, "tok")
	a := joined(t, d, OfficeOptions{Server: hub, Office: "o1", Name: "box", Token: "tok", BundleID: "sb"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := []byte("uploaded by an Agent\n")
	uploads := filepath.Join(ws, DefaultLandingDir)

	ret, err := a.PutBlob(ctx, "box", bytes.NewReader(data), agent.PutOptions{NameHint: "n.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(uploads, ret.UploadID+"_n.txt"); ret.LandingPath != want {
		t.Errorf("landing_path %s, want %s", ret.LandingPath, want)
	}
	for _, p := range []string{uploads, ret.LandingPath} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: owner %d:%d, want %d:%d (%v)", p, st.Uid, st.Gid, uid, gid, err)
		}
	}
	res, err := a.CallTool(ctx, agent.Call{Computer: "box", Tool: "sb__sandbox_execute_bash",
		Params: map[string]any{"cmd": "cat " + ret.LandingPath}, Timeout: 10 * time.Second})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("cat = %+v, %v", res, err)
	}
	var item struct{ Text string }
	_ = json.Unmarshal(res.Content[0], &item)
	var out struct {
		Output string `json:"output"`
	}
	if err := json.Unmarshal([]byte(item.Text), &out); err != nil || out.Output != string(data) {
		t.Errorf("cat in the sandbox = %s", item.Text)
	}

	// A sandbox process links the landing root to a host directory.
	if err := d.sandbox.Do(func() error {
		if err := os.Rename(uploads, uploads+".old"); err != nil {
			return err
		}
		return os.Symlink(hostDir, uploads)
	}); err != nil {
		t.Fatal(err)
	}
	_, err = a.PutBlob(ctx, "box", bytes.NewReader(data), agent.PutOptions{NameHint: "m.txt"})
	var serr *smcp.Error
	if !errors.As(err, &serr) || serr.Code != smcp.CodeBlobWriteFailed || serr.Reason() != smcp.ReasonForbidden {
		t.Errorf("upload through the link: %v, want 4019 forbidden", err)
	}
	if ents, err := os.ReadDir(hostDir); err != nil || len(ents) != 0 {
		t.Errorf("the host directory holds %v (%v)", ents, err)
	}
}
