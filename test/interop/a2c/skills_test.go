package a2c

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// skillMCP is an MCP server (official Go SDK, streamable HTTP on
// 127.0.0.1) that publishes skills in mode C: a skill://<host>/<name>
// root declaring _meta.source "resources" and one resource per file
// under it. Stopping it refuses every request and cuts the connections.
type skillMCP struct {
	srv  *mcp.Server
	ts   *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	body map[string][]byte
}

func newSkillMCP(t *testing.T) *skillMCP {
	s := &skillMCP{body: map[string][]byte{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "skillsrv", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil)
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "stopped", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { s.down.Store(true); s.ts.CloseClientConnections(); s.ts.Close() })
	return s
}

func (s *skillMCP) read(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.body[r.Params.URI]
	if !ok {
		return nil, mcp.ResourceNotFoundError(r.Params.URI)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Blob: b}}}, nil
}

// publish adds a skill: its root, then its files in path order.
func (s *skillMCP) publish(root string, files map[string]string) {
	s.mu.Lock()
	for rel, b := range files {
		s.body[root+"/"+rel] = []byte(b)
	}
	s.mu.Unlock()
	s.srv.AddResource(&mcp.Resource{URI: root, Name: filepath.Base(root), MIMEType: "inode/directory",
		Meta: mcp.Meta{"source": "resources", "version": "1.0.0"}}, s.read)
	var rels []string
	for rel := range files {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	for _, rel := range rels {
		s.srv.AddResource(&mcp.Resource{URI: root + "/" + rel, Name: rel}, s.read)
	}
}

// stop plays a server that went away.
func (s *skillMCP) stop() {
	s.down.Store(true)
	s.ts.CloseClientConnections()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestSkillChannel runs the real binaries: "a2c computer --skills DIR"
// hosting an MCP server that publishes skill:// resources, read by a Go
// Agent through "a2c server": list, inline and blob reads, every error
// code, change notifications and orphaning.
func TestSkillChannel(t *testing.T) {
	user := t.TempDir()
	writeUser := func(rel, body string) {
		p := filepath.Join(user, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeUser("my-helper/SKILL.md", "---\nname: my-helper\ndescription: Helps.\ntags: [local]\n---\n# Helper\n")
	writeUser("my-helper/.skillenv", "TOKEN=secret")
	writeUser("my-helper/huge.txt", strings.Repeat("h", 300<<10))

	m := newSkillMCP(t)
	const root = "skill://test.example/code-review"
	big := strings.Repeat("0123456789abcdef", 4<<10) // 64 KiB of text
	image := "\x89PNG\r\n\x1a\n\x00\x01binary"
	m.publish(root, map[string]string{
		"SKILL.md":            "---\r\nname: code-review\r\ndescription: Reviews code.\r\nallowed-tools: Read Grep\r\n---\r\n# Review\r\nSee references/guide.md.\r\n",
		"references/guide.md": "# Guide\n",
		"references/big.txt":  big,
		"assets/logo.png":     image,
	})

	srv := startServer(t)
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"name":"skillsrv","type":"streamable","server_parameters":{"url":%q}}`, m.ts.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	office := agent.NewReqID()
	cache := t.TempDir()
	cmd := exec.Command(harness.Bin(t, "a2c"), "computer", "--server", srv.URL, "--office", office, "--name", "pc",
		"--config", cfg, "--skills", user, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "A2C_SKILL_MAX_SIZE=200000")
	comp := harness.Run(t, cmd, false)

	var mu sync.Mutex
	var notes []string
	a := dialAgent(t, srv.URL, "agent", agent.Options{OnNotify: func(n agent.Notification) {
		mu.Lock()
		notes = append(notes, n.Event+" "+n.Computer)
		mu.Unlock()
	}})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(strings.Join(notes, "\n"), smcp.NotifyUpdateSkills+" pc")
	}
	waitNotify := func(t *testing.T, before int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if count() > before {
				return
			}
		}
		t.Fatalf("no notify:update_skills; computer logs:\n%s", comp.Logs())
	}
	waitList := func(t *testing.T, want ...string) []smcp.A2CSkillRef {
		t.Helper()
		var refs []smcp.A2CSkillRef
		var got []string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			r, err := a.Skills(ctx10(t), "pc")
			if err != nil {
				continue
			}
			refs, got = r, nil
			for _, x := range r {
				got = append(got, x.Name)
			}
			if slices.Equal(got, want) {
				return refs
			}
		}
		t.Fatalf("skills = %v, want %v; computer logs:\n%s", got, want, comp.Logs())
		return nil
	}

	refs := waitList(t, "my-helper", "mcp:skillsrv:code-review")
	staged := filepath.Join(cache, "a2c", "skills-staging")
	if r := refs[1]; r.Source != "mcp:skillsrv" || r.URI != root || r.Version != "1.0.0" || r.Description != "Reviews code." ||
		!slices.Equal(r.AllowedTools, []string{"Read", "Grep"}) || !strings.HasPrefix(r.Path, staged) || !strings.HasSuffix(r.Path, "/skillsrv/code-review") {
		t.Errorf("mcp ref = %+v", r)
	}
	if r := refs[0]; r.Source != "user" || r.URI != "" || !slices.Equal(r.Tags, []string{"local"}) {
		t.Errorf("user ref = %+v", r)
	}

	t.Run("inline", func(t *testing.T) {
		ret, err := a.Skill(ctx10(t), "pc", "mcp:skillsrv:code-review", "")
		body := "# Review\r\nSee references/guide.md.\r\n"
		if err != nil || ret.Body == nil || *ret.Body != body || ret.BlobHandle != nil || ret.RelPath != "SKILL.md" ||
			ret.MimeType != "text/markdown" || ret.TotalSize != int64(len(body)) || ret.SHA256 != sum([]byte(body)) {
			t.Fatalf("%+v %v", ret, err)
		}
		ret, err = a.Skill(ctx10(t), "pc", "mcp:skillsrv:code-review", "references/guide.md")
		if err != nil || ret.Body == nil || *ret.Body != "# Guide\n" {
			t.Fatalf("%+v %v", ret, err)
		}
	})
	t.Run("blob", func(t *testing.T) {
		for rel, want := range map[string]struct{ data, mime string }{
			"references/big.txt": {big, "text/plain"},
			"assets/logo.png":    {image, "image/png"},
		} {
			ret, err := a.Skill(ctx10(t), "pc", "mcp:skillsrv:code-review", rel)
			if err != nil || ret.Body != nil || ret.BlobHandle == nil || ret.MimeType != want.mime || ret.TotalSize != int64(len(want.data)) {
				t.Fatalf("%s: %+v %v", rel, ret, err)
			}
			data, meta, err := a.Blob(ctx10(t), "pc", *ret.BlobHandle, 0)
			if err != nil || string(data) != want.data || meta.SHA256 != ret.SHA256 || meta.MimeType != want.mime {
				t.Fatalf("%s blob: %d bytes %v", rel, len(data), err)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct{ name, rel, wire string }{
			{"Code_Review", "", `{"code":4016,"message":"Invalid skill name format","details":{"name":"Code_Review"}}`},
			{"a:b:c", "", `{"code":4016,"message":"Invalid skill name format","details":{"name":"a:b:c"}}`},
			{"mcp:skillsrv:nope", "", `{"code":4014,"message":"Skill not found","details":{"name":"mcp:skillsrv:nope"}}`},
			{"my-helper", "../../etc/passwd", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"../../etc/passwd"}}`},
			{"my-helper", "/etc/passwd", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"traversal","rel_path":"/etc/passwd"}}`},
			{"my-helper", ".skillenv", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":".skillenv"}}`},
			{"mcp:skillsrv:code-review", ".skillenv", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"forbidden","rel_path":".skillenv"}}`},
			{"my-helper", "nope.md", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"not_found","rel_path":"nope.md"}}`},
			{"my-helper", "huge.txt", `{"code":4017,"message":"Skill resource not accessible","details":{"reason":"too_large","rel_path":"huge.txt","total_size":307200}}`},
		} {
			_, err := a.Skill(ctx10(t), "pc", tt.name, tt.rel)
			var e *smcp.Error
			if !errors.As(err, &e) {
				t.Errorf("%s %s: %v", tt.name, tt.rel, err)
				continue
			}
			if got := string(smcp.Encode(e)); got != tt.wire {
				t.Errorf("%s %s:\n got %s\nwant %s", tt.name, tt.rel, got, tt.wire)
			}
		}
	})
	t.Run("user-folder-change", func(t *testing.T) {
		before := count()
		writeUser("a-new/SKILL.md", "---\nname: a-new\ndescription: New.\n---\n")
		waitNotify(t, before)
		waitList(t, "a-new", "my-helper", "mcp:skillsrv:code-review")
	})
	t.Run("list-changed", func(t *testing.T) {
		before := count()
		m.publish("skill://test.example/lint", map[string]string{"SKILL.md": "---\nname: lint\ndescription: Lints.\n---\n# Lint\n"})
		waitNotify(t, before)
		waitList(t, "a-new", "my-helper", "mcp:skillsrv:code-review", "mcp:skillsrv:lint")
	})
	t.Run("orphan", func(t *testing.T) {
		before := count()
		m.stop()
		waitNotify(t, before)
		waitList(t, "a-new", "my-helper")
		_, err := a.Skill(ctx10(t), "pc", "mcp:skillsrv:lint", "")
		if !errors.Is(err, &smcp.Error{Code: smcp.CodeMCPServerNotFound}) {
			t.Errorf("orphan read: %v", err)
		}
		if _, err := os.Stat(filepath.Join(refs[1].Path, "SKILL.md")); err != nil {
			t.Errorf("orphan's files deleted: %v", err)
		}
	})
}
