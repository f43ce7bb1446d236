package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/computer"
	"github.com/a2c-smcp/a2c-go/server"
)

// TestSkillCommands runs a2c skills and a2c skill against a server and a
// Computer of this process serving a user skills folder.
func TestSkillCommands(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 4<<10) // 64 KiB: over the inline budget
	for rel, body := range map[string]string{
		"my-helper/SKILL.md":        "---\nname: my-helper\ndescription: Helps with\n  things.\n---\n# Helper\n",
		"my-helper/data/big.txt":    big,
		"my-helper/assets/logo.png": "\x89PNG\r\n\x1a\n",
	} {
		p := filepath.Join(dir, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	c, err := computer.New(computer.Options{Server: ts.URL, Office: "default", Name: "pc", SkillsDir: dir, SkillsStaging: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; c.Close() }()

	var out string
	var code int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, out, _ = run("skills", "--server", ts.URL); code == 0 && strings.Contains(out, "my-helper") {
			break
		}
	}
	if want := "COMPUTER  NAME       SOURCE  DESCRIPTION\npc        my-helper  user    Helps with things.\n"; out != want {
		t.Fatalf("skills: %d %q\nwant %q", code, out, want)
	}
	code, out, stderr := run("skills", "--server", ts.URL, "--computer", "pc", "--json")
	var list []computerSkills
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Skills[0].Name != "my-helper" {
		t.Fatalf("skills --json: %d %q %q", code, out, stderr)
	}
	if code, out, stderr := run("skill", "my-helper", "--server", ts.URL); code != 0 || out != "# Helper\n" {
		t.Errorf("skill: %d %q %q", code, out, stderr)
	}
	if code, out, stderr := run("skill", "my-helper", "data/big.txt", "--server", ts.URL, "--computer", "pc"); code != 0 || out != big {
		t.Errorf("skill big: %d %d bytes %q", code, len(out), stderr)
	}
	code, out, stderr = run("skill", "my-helper", "assets/logo.png", "--server", ts.URL, "--json")
	var f skillFile
	if code != 0 || json.Unmarshal([]byte(out), &f) != nil || f.BlobHandle == nil || f.MimeType != "image/png" || f.Computer != "pc" {
		t.Fatalf("skill --json: %d %q %q", code, out, stderr)
	}
	if b, _ := base64.StdEncoding.DecodeString(f.Blob); string(b) != "\x89PNG\r\n\x1a\n" {
		t.Errorf("blob = %q", b)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"skill", "nope"}, `no Computer in the office lists the skill "nope"`},
		{[]string{"skill", "nope", "--computer", "pc"}, `computer pc has no skill "nope"`},
		{[]string{"skill", "Bad_Name", "--computer", "pc"}, `"Bad_Name" is not a valid skill name: smcp 4016`},
		{[]string{"skill", "my-helper", "../x"}, "smcp 4017: Skill resource not accessible (traversal)"},
		{[]string{"skill", "my-helper", ".skillenv"}, "(forbidden)"},
		{[]string{"skill", "my-helper", "nope.md"}, "(not_found)"},
	} {
		code, _, stderr := run(append(tc.args, "--server", ts.URL)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: %d %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, stderr := run("skill"); code != 2 || !strings.Contains(stderr, "a skill NAME is required") {
		t.Errorf("no name: %d %q", code, stderr)
	}
	if code, _, stderr := run("skills", "extra"); code != 2 || !strings.Contains(stderr, "no arguments expected") {
		t.Errorf("extra argument: %d %q", code, stderr)
	}
}
