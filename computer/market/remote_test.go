package market

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitRepo makes a bare repository of files at root/name.git (one commit)
// and returns its file:// URL and the commit.
func gitRepo(t testing.TB, root, name string, files map[string]string) (string, string) {
	t.Helper()
	src := filepath.Join(root, name)
	for f, content := range files {
		p := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCmd(t, src, "init", "-q", "-b", "main")
	gitCmd(t, src, "add", "-A")
	gitCmd(t, src, "commit", "-q", "-m", name)
	sha := gitCmd(t, src, "rev-parse", "HEAD")
	gitCmd(t, root, "clone", "-q", "--bare", src, filepath.Join(root, name+".git"))
	// The uploads a sha-pinned, blobless clone asks for.
	gitCmd(t, filepath.Join(root, name+".git"), "config", "uploadpack.allowFilter", "true")
	gitCmd(t, filepath.Join(root, name+".git"), "config", "uploadpack.allowAnySHA1InWant", "true")
	return "file://" + filepath.Join(root, name+".git"), sha
}

// gitCmd runs git in dir as a test's author and returns its output.
func gitCmd(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPluginInstallRemote: plugins whose source is a repository of
// their own: a git-subdir (sparse) and a url pinned to a commit
// (blobless, checked out there); each in .plugins/<mp>/<plugin>, with
// its commit recorded.
func TestPluginInstallRemote(t *testing.T) {
	root := t.TempDir()
	server := `{"name":"%s","bundle_id":"%s","type":"stdio","server_parameters":{"command":"x"}}`
	mono, _ := gitRepo(t, root, "mono", map[string]string{
		"pkg/hello/.tfrobot-plugin/plugin.json": `{"name":"hello","version":"2.0.0"}`,
		"pkg/hello/mcp-servers/hello-mcp.json":  fmt.Sprintf(server, "hello-mcp", "mono_hello"),
		"other/ignored.txt":                     "not checked out",
	})
	pinnedURL, pinnedSHA := gitRepo(t, root, "pinned", map[string]string{
		".tfrobot-plugin/plugin.json": `{"name":"pinned"}`,
	})
	catalog := `{"name":"remote","plugins":[` +
		`{"name":"hello","source":{"source":"git-subdir","url":"` + mono + `","path":"pkg/hello"}},` +
		`{"name":"pinned","source":{"source":"url","url":"` + pinnedURL + `","sha":"` + pinnedSHA + `"}}]}`
	mpURL, _ := gitRepo(t, root, "remote-mp", map[string]string{CatalogFile: catalog})
	m := testManager(t)
	ctx := context.Background()
	if _, err := m.Add(ctx, AddOptions{URL: mpURL, Name: "remote", Trust: true}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Install(ctx, InstallOptions{ID: "hello@remote"})
	if err != nil || !slices.Equal(res.MCPServers, []string{"mono_hello"}) {
		t.Fatalf("hello: %+v %v", res, err)
	}
	res, err = m.Install(ctx, InstallOptions{ID: "pinned@remote"})
	if err != nil {
		t.Fatalf("pinned: %v", err)
	}
	ledger, _ := m.Ledger()
	hello, pinned := ledger.Plugins["hello@remote"][0], ledger.Plugins["pinned@remote"][0]
	base := filepath.Join(m.Paths.SkillHome, "marketplace", ".plugins", "remote")
	if hello.InstallPath != filepath.Join(base, "hello", "pkg", "hello") || hello.Version != "2.0.0" || !validSHA(hello.CommitSHA) {
		t.Errorf("hello's record: %+v", hello)
	}
	if _, err := os.Stat(filepath.Join(base, "hello", "other")); !os.IsNotExist(err) {
		t.Errorf("the sparse clone has the rest of the repository: %v", err)
	}
	if pinned.InstallPath != filepath.Join(base, "pinned") || pinned.CommitSHA != pinnedSHA || pinned.Version != pinnedSHA {
		t.Errorf("pinned's record: %+v (want commit %s)", pinned, pinnedSHA)
	}
}
