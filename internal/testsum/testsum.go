package testsum

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Rule is one line of the skip allowlist: a skipped test whose package
// matches Package (a path.Match pattern on the import path relative to
// the module, "." for the module's root) and whose full name (with
// subtests, "TestX/sub") matches Test in full is allowed to skip, for
// Reason.
type Rule struct {
	Package string
	Test    *regexp.Regexp
	Reason  string
	Line    int // in the allowlist, for the report of unused lines
}

// ParseAllowlist reads an allowlist: one rule a line, as three
// whitespace-separated parts "PACKAGE TEST REASON..." (the reason is the
// rest of the line and may not be empty); blank lines and lines starting
// with # are comments.
func ParseAllowlist(r io.Reader) ([]Rule, error) {
	var rules []Rule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("line %d: want PACKAGE TEST REASON, got %q", n, line)
		}
		if _, err := path.Match(f[0], ""); err != nil {
			return nil, fmt.Errorf("line %d: package pattern %q: %w", n, f[0], err)
		}
		re, err := regexp.Compile("^(?:" + f[1] + ")$")
		if err != nil {
			return nil, fmt.Errorf("line %d: test pattern: %w", n, err)
		}
		// line starts with f[0]; after it and its spaces, f[1].
		reason := strings.TrimSpace(strings.TrimSpace(line[len(f[0]):])[len(f[1]):])
		rules = append(rules, Rule{Package: f[0], Test: re, Reason: reason, Line: n})
	}
	return rules, sc.Err()
}

// Summary is what a run counted. Tests are counted at every level:
// a subtest is a test, and so is its parent.
type Summary struct {
	Passed, Failed, Skipped int
	// FailedNames are the failed tests ("pkg TestX") and the packages
	// that failed outside any test ("pkg (build, panic or timeout)").
	FailedNames []string
	// Unlisted are the skips no rule allows ("pkg TestX: reason").
	Unlisted []string
	// Unused are the allowlist lines that allowed no skip of this run.
	Unused []int
}

// OK reports whether the run passes: at least one test ran, none failed
// and every skip is allowed.
func (s *Summary) OK() bool {
	return s.Failed == 0 && len(s.Unlisted) == 0 && s.Passed+s.Failed > 0
}

// event is one line of `go test -json` (cmd/test2json), with the build
// events of Go 1.24 and later (ImportPath, FailedBuild).
type event struct {
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Output      string
	FailedBuild string
}

// run is the state of one summary while the stream goes by. Test output is
// held per test until the test ends: printed if it failed, dropped if it
// passed, as go test does without -v.
type run struct {
	out    io.Writer
	module string
	rules  []Rule
	used   map[int]bool
	held   map[string][]string // pkg + "\x00" + test: its output so far
	failed map[string]int      // failed tests by package
	builds map[string]bool     // build-fail import paths not yet matched by a package failure
	sum    Summary
}

// Summarize copies the stream of `go test -json` events from in to out as
// go test's usual text while it arrives, then writes the summary, ending
// with the line "N passed, N failed, N skipped". module is the module's
// path, trimmed from package names for the rules and the report. Lines
// that are not events are copied as they are. The error is only in
// reading in or writing out; whether the run passed is Summary.OK.
func Summarize(in io.Reader, out io.Writer, module string, rules []Rule) (Summary, error) {
	r := &run{out: out, module: module, rules: rules, used: map[int]bool{},
		held: map[string][]string{}, failed: map[string]int{}, builds: map[string]bool{}}
	br := bufio.NewReader(in)
	var werr error
	write := func(s string) {
		if werr == nil {
			_, werr = io.WriteString(out, s)
		}
	}
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			var e event
			if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &e) == nil && e.Action != "" {
				write(r.handle(&e))
			} else {
				write(line)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r.sum, fmt.Errorf("testsum: reading the events: %w", err)
		}
	}
	write(r.finish())
	return r.sum, werr
}

// handle takes one event and returns the text to write now.
func (r *run) handle(e *event) string {
	pkg := r.rel(e.Package)
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		return e.Output
	case "build-fail":
		r.builds[e.ImportPath] = true
		return ""
	case "output":
		if framing(e.Output) {
			return ""
		}
		if e.Test != "" {
			r.held[key] = append(r.held[key], e.Output)
			return ""
		}
		if e.Output == "PASS\n" { // go test without -v prints only "ok"
			return ""
		}
		return e.Output
	case "pass":
		if e.Test == "" {
			r.dropPackage(e.Package)
			return ""
		}
		r.sum.Passed++
		delete(r.held, key)
	case "skip":
		if e.Test == "" { // a package without tests
			return ""
		}
		r.sum.Skipped++
		lines := r.held[key]
		delete(r.held, key)
		if !r.allowed(pkg, e.Test) {
			r.sum.Unlisted = append(r.sum.Unlisted, pkg+" "+e.Test+": "+skipReason(lines))
			return strings.Join(lines, "")
		}
	case "fail":
		if e.Test != "" {
			r.sum.Failed++
			r.failed[e.Package]++
			r.sum.FailedNames = append(r.sum.FailedNames, pkg+" "+e.Test)
			lines := r.held[key]
			delete(r.held, key)
			return strings.Join(lines, "")
		}
		// The package failed. Tests still open were running when its
		// binary ended (a panic, the timeout): they failed, and their
		// output holds why. A package with no failed test at all
		// failed to build or outside any test: one failure.
		var b strings.Builder
		for _, k := range r.open(e.Package) {
			r.sum.Failed++
			r.failed[e.Package]++
			r.sum.FailedNames = append(r.sum.FailedNames, pkg+" "+k+" (did not finish)")
			b.WriteString(strings.Join(r.held[e.Package+"\x00"+k], ""))
			delete(r.held, e.Package+"\x00"+k)
		}
		delete(r.builds, e.Package)
		if e.FailedBuild != "" {
			delete(r.builds, e.FailedBuild)
		}
		if r.failed[e.Package] == 0 {
			r.sum.Failed++
			r.sum.FailedNames = append(r.sum.FailedNames, pkg+" (build, panic or timeout outside a test)")
		}
		return b.String()
	}
	return ""
}

// finish counts what the stream left open and returns the closing summary.
func (r *run) finish() string {
	for ip := range r.builds { // a build failure no package event reported
		r.sum.Failed++
		r.sum.FailedNames = append(r.sum.FailedNames, r.rel(ip)+" (build failed)")
	}
	var b strings.Builder
	for k, lines := range r.held { // the stream ended inside a test
		pkg, test, _ := strings.Cut(k, "\x00")
		if test == "" {
			continue
		}
		r.sum.Failed++
		r.sum.FailedNames = append(r.sum.FailedNames, r.rel(pkg)+" "+test+" (did not finish)")
		b.WriteString(strings.Join(lines, ""))
	}
	for _, rule := range r.rules {
		if !r.used[rule.Line] {
			r.sum.Unused = append(r.sum.Unused, rule.Line)
		}
	}
	sort.Strings(r.sum.FailedNames)
	sort.Strings(r.sum.Unlisted)
	b.WriteString("\n== test summary\n")
	for _, n := range r.sum.FailedNames {
		fmt.Fprintf(&b, "FAIL %s\n", n)
	}
	for _, n := range r.sum.Unlisted {
		fmt.Fprintf(&b, "SKIP not allowed: %s\n", n)
	}
	if len(r.sum.Unlisted) > 0 {
		fmt.Fprintf(&b, "%d skipped tests are not in the skip allowlist: make them run, or add a line with the reason\n", len(r.sum.Unlisted))
	}
	if len(r.sum.Unused) > 0 {
		fmt.Fprintf(&b, "allowlist lines that allowed no skip in this run: %v\n", r.sum.Unused)
	}
	if r.sum.Passed+r.sum.Failed == 0 {
		b.WriteString("no test ran\n")
	}
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped\n", r.sum.Passed, r.sum.Failed, r.sum.Skipped)
	return b.String()
}

// open lists the tests of pkg that started and have not ended.
func (r *run) open(pkg string) []string {
	var tests []string
	for k := range r.held {
		if p, test, _ := strings.Cut(k, "\x00"); p == pkg && test != "" {
			tests = append(tests, test)
		}
	}
	sort.Strings(tests)
	return tests
}

// dropPackage forgets what a package that passed left held.
func (r *run) dropPackage(pkg string) {
	for _, t := range r.open(pkg) {
		delete(r.held, pkg+"\x00"+t)
	}
}

// allowed reports whether a rule allows the skip, marking it used.
func (r *run) allowed(pkg, test string) bool {
	for _, rule := range r.rules {
		if ok, _ := path.Match(rule.Package, pkg); ok && rule.Test.MatchString(test) {
			r.used[rule.Line] = true
			return true
		}
	}
	return false
}

// rel is an import path relative to the module ("." for its root).
func (r *run) rel(pkg string) string {
	if pkg == r.module {
		return "."
	}
	return strings.TrimPrefix(pkg, r.module+"/")
}

// framing is test2json's progress lines, which go test without -v does
// not print.
func framing(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// skipReason is the last line a skipped test logged (t.Skip's message
// comes before its "--- SKIP" line).
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "--- ") {
			return l
		}
	}
	return "(no reason given)"
}
