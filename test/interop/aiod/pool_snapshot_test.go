package aiod

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// sh runs script in the sandbox a serves and returns its output.
func sh(t *testing.T, a *aio, script string) string {
	t.Helper()
	code, e := a.call("POST", "/v1/shell/exec", "/v1/shell/exec", map[string]any{"command": script})
	if code != 200 {
		t.Fatalf("exec %q: %d %s", script, code, e.raw)
	}
	out, _ := e.obj()["output"].(string)
	return out
}

// post sends a pool request and decodes the answer of status want.
func (p *poolProc) post(path string, body any, want int) map[string]any {
	p.t.Helper()
	resp, out := p.client().raw("POST", path, body)
	if resp.StatusCode != want {
		p.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		p.t.Fatal(err)
	}
	return m
}

// TestPoolSnapshots: the real aiod pool with --machine: a snapshot of a
// running sandbox, a sandbox made from it and a fork of that one (a tree
// three deep) each see their ancestors' files, packages and workspace at
// the cut and none of each other's later writes, and no process; their
// lineage is in the sandbox objects; a snapshot in use is not deleted.
func TestPoolSnapshots(t *testing.T) {
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Fatal("needs mkfs.btrfs (Debian btrfs-progs; scripts/test.sh installs it)")
	}
	p := startPool(t, "pool-snapshot-token", "--warm", "0", "--machine")
	a := p.create(map[string]any{"machine": true})
	aa := p.sandbox(a)
	sh(t, aa, "echo a1 > /opt/state; echo ws > ./w.txt; (sleep 600 &) ; true")
	s1 := p.post("/v2/sandboxes/"+a["id"].(string)+"/snapshots", nil, 201)
	if s1["sandbox_id"] != a["id"] || s1["parent"] != nil || s1["size_bytes"].(float64) <= 0 || s1["created_at"] == nil {
		t.Errorf("snapshot %v", s1)
	}
	sh(t, aa, "echo a2 > /opt/state")

	b := p.create(map[string]any{"from_snapshot": s1["snapshot_id"]})
	if b["parent"] != s1["snapshot_id"] || len(b["ancestors"].([]any)) != 1 {
		t.Errorf("b's lineage: parent %v ancestors %v", b["parent"], b["ancestors"])
	}
	bb := p.sandbox(b)
	if got := sh(t, bb, "cat /opt/state ./w.txt; pgrep -c sleep || true"); got != "a1\nws\n0" {
		t.Errorf("b sees %q, want a1, the workspace and no process", got)
	}
	sh(t, bb, "echo b > /opt/b")

	c := p.post("/v2/sandboxes/"+b["id"].(string)+"/fork", map[string]any{"metadata": map[string]string{"k": "v"}}, 201)
	anc := c["ancestors"].([]any)
	if len(anc) != 2 || anc[0] != c["parent"] || anc[1] != s1["snapshot_id"] {
		t.Errorf("c's lineage: parent %v ancestors %v", c["parent"], c["ancestors"])
	}
	cc := p.sandbox(c)
	if got := sh(t, cc, "cat /opt/state /opt/b; echo c > /opt/c"); got != "a1\nb" {
		t.Errorf("c sees %q", got)
	}
	for _, x := range []struct {
		name string
		s    *aio
		want string
	}{{"a", aa, "a2 none none"}, {"b", bb, "a1 b none"}} {
		if got := sh(t, x.s, "echo $(cat /opt/state) $(cat /opt/b 2>/dev/null || echo none) $(cat /opt/c 2>/dev/null || echo none)"); got != x.want {
			t.Errorf("%s sees %q, want %q", x.name, got, x.want)
		}
	}

	// A fork whose create is refused takes no snapshot.
	resp, out := p.client().raw("POST", "/v2/sandboxes/"+b["id"].(string)+"/fork", map[string]any{"on_timeout": "explode"})
	if resp.StatusCode != 400 {
		t.Errorf("a refused fork: %d %s", resp.StatusCode, out)
	}
	resp, out = p.client().raw("DELETE", "/v2/snapshots/"+s1["snapshot_id"].(string), nil)
	if resp.StatusCode != 409 || !strings.Contains(string(out), "is in use by sandbox "+b["id"].(string)) {
		t.Errorf("delete a used snapshot: %d %s", resp.StatusCode, out)
	}
	resp, out = p.client().raw("GET", "/v2/snapshots", nil)
	var list struct{ Snapshots []map[string]any }
	_ = json.Unmarshal(out, &list)
	if resp.StatusCode != 200 || len(list.Snapshots) != 2 {
		t.Errorf("list: %d %s", resp.StatusCode, out)
	}
	resp, _ = p.client().raw("DELETE", "/v2/sandboxes/"+c["id"].(string), nil)
	if resp.StatusCode != 204 {
		t.Fatalf("delete c: %d", resp.StatusCode)
	}
	if resp, out := p.client().raw("DELETE", "/v2/snapshots/"+c["parent"].(string), nil); resp.StatusCode != 204 {
		t.Errorf("delete an unused snapshot: %d %s", resp.StatusCode, out)
	}
	if resp, _ := p.client().raw("GET", "/v2/snapshots/"+c["parent"].(string), nil); resp.StatusCode != 404 {
		t.Errorf("a deleted snapshot: %d", resp.StatusCode)
	}

	resp, out = p.client().raw("POST", "/v2/sandboxes/"+p.create(nil)["id"].(string)+"/snapshots", nil)
	if resp.StatusCode != 409 || !strings.Contains(string(out), "is not a whole machine") {
		t.Errorf("snapshot of a plain sandbox: %d %s", resp.StatusCode, out)
	}
	plain := startPool(t, "pool-plain-token", "--warm", "0")
	s := plain.create(nil)
	resp, out = plain.client().raw("POST", "/v2/sandboxes/"+s["id"].(string)+"/snapshots", nil)
	if want := `{"error":{"code":501,"message":"snapshots are of whole machines: start the pool with --machine"}}`; resp.StatusCode != 501 || strings.TrimSpace(string(out)) != want {
		t.Errorf("snapshot without --machine: %d %s", resp.StatusCode, out)
	}
}

// TestPoolDeletePaused: deleting a paused sandbox whose shell session is
// open ends it (its processes are thawed into their end) well within
// the pool's shutdown bound, instead of waiting for frozen processes.
func TestPoolDeletePaused(t *testing.T) {
	p := startPool(t, "pool-paused-token", "--warm", "0")
	s := p.create(nil)
	sh(t, p.sandbox(s), "echo hi")
	p.post("/v2/sandboxes/"+s["id"].(string)+"/pause", nil, 200)
	// Within less than the pool's bound (10 s), which a wait for frozen
	// processes would use up: the end must not wait for them at all.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "DELETE", p.URL+"/v2/sandboxes/"+s["id"].(string), nil)
	req.Header.Set("Authorization", "Bearer pool-paused-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("delete of a paused sandbox: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Errorf("delete of a paused sandbox: %d", resp.StatusCode)
	}
}
