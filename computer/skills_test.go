package computer

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// skillServer is an in-process MCP server publishing skills in mode C
// (skill:// root plus files), which can refuse connections to play a
// server that went away.
type skillServer struct {
	srv      *mcp.Server
	mu       sync.Mutex
	files    map[string]string // uri -> content
	sessions []*mcp.ServerSession
	down     atomic.Bool
}

func newSkillServer() *skillServer {
	s := &skillServer{files: map[string]string{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "skills", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	return s
}

// publish adds (or replaces) a mode C skill: its root and its files.
func (s *skillServer) publish(root string, meta map[string]any, files map[string]string) {
	read := func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		body, ok := s.files[r.Params.URI]
		if !ok {
			return nil, mcp.ResourceNotFoundError(r.Params.URI)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: body}}}, nil
	}
	s.mu.Lock()
	for rel, body := range files {
		s.files[root+"/"+rel] = body
	}
	s.mu.Unlock()
	s.srv.AddResource(&mcp.Resource{URI: root, Name: root, MIMEType: "inode/directory", Meta: meta}, read)
	for _, rel := range sortedKeys(files) {
		s.srv.AddResource(&mcp.Resource{URI: root + "/" + rel, Name: rel}, read)
	}
}

func sortedKeys(m map[string]string) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	slices.Sort(k)
	return k
}

func (s *skillServer) set(uri, body string) {
	s.mu.Lock()
	s.files[uri] = body
	s.mu.Unlock()
}

func (s *skillServer) Connect(ctx context.Context) (mcp.Transport, error) {
	if s.down.Load() {
		return nil, errors.New("server down")
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.sessions = append(s.sessions, ss)
	s.mu.Unlock()
	context.AfterFunc(ctx, func() { ss.Close() })
	return ct, nil
}

// stop ends every session and refuses new ones until start.
func (s *skillServer) stop() {
	s.down.Store(true)
	s.mu.Lock()
	ss := s.sessions
	s.sessions = nil
	s.mu.Unlock()
	for _, x := range ss {
		x.Close()
	}
}

func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\ntags: [t1, t2]\n---\n" + body
}

// skillNotes counts notify:update_skills about "pc".
type skillNotes struct{ n atomic.Int32 }

func (s *skillNotes) on(n agent.Notification) {
	if n.Event == smcp.NotifyUpdateSkills && n.Computer == "pc" {
		s.n.Add(1)
	}
}

func (s *skillNotes) waitAfter(t *testing.T, before int32) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s.n.Load() > before {
			return
		}
	}
	t.Fatal("no notify:update_skills")
}

// waitSkills waits until client:get_skills lists exactly want, in order.
func waitSkills(t *testing.T, a *agent.Client, want ...string) []smcp.A2CSkillRef {
	t.Helper()
	var got []string
	var refs []smcp.A2CSkillRef
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(30 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := a.Skills(ctx, "pc")
		cancel()
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
	t.Fatalf("skills = %v, want %v", got, want)
	return nil
}

func TestSkills(t *testing.T) {
	user := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(user, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("my-helper/SKILL.md", skillMD("my-helper", "Helps.", "# Helper\n"))
	write("broken/SKILL.md", "# no frontmatter\n")
	const root = "skill://t.example/code-review"
	srv := newSkillServer()
	big := strings.Repeat("z", 40<<10)
	srv.publish(root, map[string]any{"source": "resources", "version": "2.0"}, map[string]string{
		"SKILL.md": skillMD("code-review", "Reviews code.", "# Review\n"), "references/big.txt": big,
	})
	staging := t.TempDir()
	var notes skillNotes
	a, _ := office(t, `{"servers":{}}`, Options{SkillsDir: user, SkillsStaging: staging,
		Local: []LocalServer{{BundleID: "sk", Connect: srv.Connect}}}, agent.Options{OnNotify: notes.on})
	ctx := context.Background()

	refs := waitSkills(t, a, "my-helper", "mcp:sk:code-review")
	real, _ := filepath.EvalSymlinks(staging)
	want := smcp.A2CSkillRef{Name: "mcp:sk:code-review", Source: "mcp:sk", Path: filepath.Join(real, "sk", "code-review"),
		Description: "Reviews code.", URI: root, Version: "2.0", Tags: []string{"t1", "t2"}}
	if got := refs[1]; got.Name != want.Name || got.Source != want.Source || got.Path != want.Path || got.URI != want.URI ||
		got.Version != want.Version || !slices.Equal(got.Tags, want.Tags) || got.Description != want.Description {
		t.Errorf("mcp ref = %+v", got)
	}
	if refs[0].Source != "user" || refs[0].URI != "" || refs[0].Version != "" {
		t.Errorf("user ref = %+v", refs[0])
	}

	t.Run("read", func(t *testing.T) {
		ret, err := a.Skill(ctx, "pc", "mcp:sk:code-review", "")
		if err != nil || ret.Body == nil || *ret.Body != "# Review\n" || ret.RelPath != "SKILL.md" || ret.MimeType != "text/markdown" {
			t.Fatalf("%+v %v", ret, err)
		}
		ret, err = a.Skill(ctx, "pc", "mcp:sk:code-review", "references/big.txt")
		if err != nil || ret.BlobHandle == nil || ret.Body != nil || ret.TotalSize != int64(len(big)) {
			t.Fatalf("%+v %v", ret, err)
		}
		data, meta, err := a.Blob(ctx, "pc", *ret.BlobHandle, 0)
		if err != nil || string(data) != big || meta.SHA256 != ret.SHA256 || meta.MimeType != "text/plain" {
			t.Fatalf("blob: %d %v", len(data), err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			name, rel string
			code      int
			reason    string
		}{
			{"Not_Valid", "", smcp.CodeInvalidSkillName, ""},
			{"broken", "", smcp.CodeMCPServerNotFound, ""},
			{"mcp:sk:nope", "", smcp.CodeMCPServerNotFound, ""},
			{"my-helper", "../x", smcp.CodeSkillNotAccessible, smcp.ReasonTraversal},
			{"my-helper", ".skillenv", smcp.CodeSkillNotAccessible, smcp.ReasonForbidden},
			{"my-helper", "nope.md", smcp.CodeSkillNotAccessible, smcp.ReasonNotFound},
		} {
			_, err := a.Skill(ctx, "pc", tt.name, tt.rel)
			var e *smcp.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Reason() != tt.reason {
				t.Errorf("%s %s: %v", tt.name, tt.rel, err)
			}
		}
	})
	t.Run("user-change", func(t *testing.T) {
		before := notes.n.Load()
		write("a-new/SKILL.md", skillMD("a-new", "New.", "x"))
		notes.waitAfter(t, before)
		waitSkills(t, a, "a-new", "my-helper", "mcp:sk:code-review")
	})
	t.Run("unchanged", func(t *testing.T) {
		// A list change that adds no skill, and a poll of an unchanged
		// folder, announce nothing.
		before := notes.n.Load()
		srv.srv.AddResource(&mcp.Resource{URI: "window://t/w", Name: "w"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "window://t/w", Text: "w"}}}, nil
		})
		time.Sleep(SkillsPollInterval + 500*time.Millisecond)
		if n := notes.n.Load(); n != before {
			t.Errorf("%d notify:update_skills for no change", n-before)
		}
	})
	t.Run("list-changed", func(t *testing.T) {
		before := notes.n.Load()
		srv.publish("skill://t.example/lint", map[string]any{"source": "resources"}, map[string]string{"SKILL.md": skillMD("lint", "Lints.", "# Lint\n")})
		notes.waitAfter(t, before)
		waitSkills(t, a, "a-new", "my-helper", "mcp:sk:code-review", "mcp:sk:lint")
	})
	t.Run("updated", func(t *testing.T) {
		before := notes.n.Load()
		srv.set(root+"/SKILL.md", skillMD("code-review", "Reviews code.", "# Review v2\n"))
		if err := srv.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: root}); err != nil {
			t.Fatal(err)
		}
		notes.waitAfter(t, before)
		ret, err := a.Skill(ctx, "pc", "mcp:sk:code-review", "SKILL.md")
		if err != nil || *ret.Body != "# Review v2\n" {
			t.Fatalf("%+v %v", ret, err)
		}
	})
	t.Run("orphan", func(t *testing.T) {
		held, err := a.Skill(ctx, "pc", "mcp:sk:code-review", "references/big.txt")
		if err != nil || held.BlobHandle == nil {
			t.Fatalf("%+v %v", held, err)
		}
		before := notes.n.Load()
		srv.stop()
		notes.waitAfter(t, before)
		waitSkills(t, a, "a-new", "my-helper")
		// A handle minted before the skill went reads as gone.
		var gone *smcp.Error
		if _, _, err := a.Blob(ctx, "pc", *held.BlobHandle, 0); !errors.As(err, &gone) || gone.Code != smcp.CodeBlobNotAccessible || gone.Reason() != smcp.ReasonGone {
			t.Errorf("orphaned skill's handle: %v, want 4018 gone", err)
		}
		if _, err := os.Stat(filepath.Join(real, "sk", "code-review", "SKILL.md")); err != nil {
			t.Errorf("orphan's files deleted: %v", err)
		}
		_, err = a.Skill(ctx, "pc", "mcp:sk:code-review", "")
		if !errors.Is(err, &smcp.Error{Code: smcp.CodeMCPServerNotFound}) {
			t.Errorf("orphan read: %v", err)
		}
		before = notes.n.Load()
		srv.down.Store(false)
		notes.waitAfter(t, before)
		waitSkills(t, a, "a-new", "my-helper", "mcp:sk:code-review", "mcp:sk:lint")
	})
}

// TestSkillsProtocol03 checks that a 0.3 Computer leaves tags out, and
// that a Computer with no skills answers [] (and stops cleanly).
func TestSkillsProtocol03(t *testing.T) {
	user := t.TempDir()
	_ = os.MkdirAll(filepath.Join(user, "x"), 0o755)
	_ = os.WriteFile(filepath.Join(user, "x", "SKILL.md"), []byte(skillMD("x", "X.", "")), 0o644)
	srv, err := server.New(server.Config{Version: "0.3.2"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c, err := New(Options{Server: ts.URL, Office: "o", Name: "pc", SkillsDir: user, SkillsStaging: t.TempDir(), ProtocolVersion: "0.3.2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; c.Close() })
	a, err := agent.Dial(ctx, ts.URL, agent.Options{Name: "agent", ProtocolVersion: "0.3.2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Join(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	refs := waitSkills(t, a, "x")
	if refs[0].Tags != nil {
		t.Errorf("0.3 tags = %v", refs[0].Tags)
	}
	b, _ := office(t, `{"servers":{}}`, Options{SkillsStaging: t.TempDir()})
	if refs := waitSkills(t, b); refs == nil || len(refs) != 0 {
		t.Errorf("no skills: %v", refs)
	}
}

// TestOnThisHost: only servers on this host may ask for mode A (mounted).
func TestOnThisHost(t *testing.T) {
	for u, want := range map[string]bool{
		"http://127.0.0.1:9/mcp": true, "http://[::1]:9/mcp": true, "http://localhost:9/mcp": true, "http://127.8.0.1/": true,
		"https://mcp.example.com/mcp": false, "http://10.0.0.1/mcp": false, "http://localhost.example.com/": false, "http://${input:h}/": false,
	} {
		if got := onThisHost(config.Server{HTTP: &config.HTTP{URL: u}}); got != want {
			t.Errorf("onThisHost(%s) = %v, want %v", u, got, want)
		}
	}
	if !onThisHost(config.Server{Stdio: &config.Stdio{Command: "x"}}) {
		t.Error("a stdio server is on this host")
	}
}
