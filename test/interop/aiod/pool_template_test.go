package aiod

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// pyPackage is a build that pip-installs a package of its own (made in
// the build machine's /tmp, no network) into the system Python.
var pyPackage = []string{
	`sleep 600 &`, // a daemon a step leaves behind, its output open: the step is done all the same
	`mkdir -p /tmp/pkg/a2chello && printf 'def hi():\n    return "hi from a template"\n' > /tmp/pkg/a2chello/__init__.py`,
	`printf '[project]\nname = "a2chello"\nversion = "1.0"\n[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n' > /tmp/pkg/pyproject.toml`,
	`/usr/bin/python3 -m pip install --quiet --no-index --no-build-isolation --break-system-packages /tmp/pkg`,
}

// TestPoolTemplates: the real aiod pool with --machine: a template built
// with pip install (into the system Python of a fresh machine, then
// snapshotted) is used by 10 creates at once, each with the package and
// none of each other's writes; the host's Python is unchanged; a
// failed build answers 422 with the command's output; a template's
// snapshot is in use (409) until the template is deleted.
func TestPoolTemplates(t *testing.T) {
	p := startPool(t, "pool-template-token", "--warm", "0", "--warm", "pyhello=2", "--max", "16", "--machine")
	tpl := p.post("/v2/templates", map[string]any{"name": "pyhello", "build": pyPackage}, 201)
	if tpl["name"] != "pyhello" || tpl["snapshot_id"] == nil || len(tpl["build"].([]any)) != 4 {
		t.Fatalf("template %v", tpl)
	}
	// Its warm machines (--warm pyhello=2) fill once it exists.
	warmRE := regexp.MustCompile(`aiod_pool_sandboxes\{state="warm"\} 2\b`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, m := p.client().raw("GET", "/metrics", nil)
		if warmRE.Match(m) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the template's warm machines did not fill:\n%s", m)
		}
	}
	var wg sync.WaitGroup
	out := make([]string, 10)
	for i := range out {
		wg.Go(func() {
			s := p.create(map[string]any{"template": "pyhello"})
			if s["template"] != "pyhello" || s["machine"] != true || s["parent"] != tpl["snapshot_id"] {
				t.Errorf("create %d: template %v machine %v parent %v", i, s["template"], s["machine"], s["parent"])
			}
			a := p.sandbox(s)
			out[i] = sh(t, a, fmt.Sprintf("/usr/bin/python3 -c 'import a2chello; print(a2chello.hi())'; echo %d > /opt/mine; sleep 0.3; cat /opt/mine", i))
		})
	}
	wg.Wait()
	_, m := p.client().raw("GET", "/metrics", nil)
	if !regexp.MustCompile(`aiod_pool_creates_total\{source="warm"\} 2\b`).Match(m) {
		t.Errorf("two of the creates were not served warm:\n%s", m)
	}
	for i, o := range out {
		if want := fmt.Sprintf("hi from a template\n%d", i); o != want {
			t.Errorf("create %d: %q, want %q", i, o, want)
		}
	}
	if matches, _ := os.ReadDir("/usr/local/lib/python3.11/dist-packages"); len(matches) > 0 {
		for _, m := range matches {
			if strings.HasPrefix(m.Name(), "a2chello") {
				t.Errorf("the package is on the host: %s", m.Name())
			}
		}
	}

	resp, body := p.client().raw("POST", "/v2/templates", map[string]any{"name": "broken", "build": []string{"echo building; false"}})
	if resp.StatusCode != 422 || !strings.Contains(string(body), `build[0] failed (exit status 1): building`) {
		t.Errorf("a failed build: %d %s", resp.StatusCode, body)
	}
	resp, body = p.client().raw("POST", "/v2/templates", map[string]any{"name": "pyhello", "from_snapshot": tpl["snapshot_id"]})
	if resp.StatusCode != 409 {
		t.Errorf("a name taken: %d %s", resp.StatusCode, body)
	}
	resp, body = p.client().raw("GET", "/v2/templates", nil)
	if resp.StatusCode != 200 || strings.Count(string(body), `"name"`) != 1 {
		t.Errorf("list: %d %s", resp.StatusCode, body)
	}
	// Every sandbox made from it deleted, the template still holds it.
	_, body = p.client().raw("GET", "/v2/sandboxes", nil)
	for _, id := range strings.Split(string(body), `"id":"`)[1:] {
		p.client().raw("DELETE", "/v2/sandboxes/"+id[:20], nil)
	}
	resp, body = p.client().raw("DELETE", "/v2/snapshots/"+tpl["snapshot_id"].(string), nil)
	if resp.StatusCode != 409 || !strings.Contains(string(body), "in use by template pyhello") {
		t.Errorf("delete the template's snapshot: %d %s", resp.StatusCode, body)
	}
	if resp, body := p.client().raw("DELETE", "/v2/templates/pyhello", nil); resp.StatusCode != 204 {
		t.Errorf("delete the template: %d %s", resp.StatusCode, body)
	}
	if resp, body := p.client().raw("DELETE", "/v2/snapshots/"+tpl["snapshot_id"].(string), nil); resp.StatusCode != 204 {
		t.Errorf("delete the snapshot: %d %s", resp.StatusCode, body)
	}
}
