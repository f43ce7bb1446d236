package testsum

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// The streams in testdata are real `go test -json` output of a small
// module (example.com/fix): mixed.json has a failed test, a build failure,
// a panic and two skips next to passing tests; timeout.json a test that
// outlived -timeout. Paths in them were shortened.
const fixModule = "example.com/fix"

func summarize(t *testing.T, file, allow string) (Summary, string) {
	t.Helper()
	f, err := os.Open("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := ParseAllowlist(strings.NewReader(allow))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sum, err := Summarize(f, &out, fixModule, rules)
	if err != nil {
		t.Fatal(err)
	}
	return sum, out.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name, file, allow string
		ok                bool
		last              string
		failed, unlisted  []string
		unused            []int
	}{
		{
			name: "nothing allowed", file: "mixed.json",
			last:     "4 passed, 3 failed, 2 skipped",
			failed:   []string{"bad TestFails", "nobuild (build, panic or timeout outside a test)", "panics TestPanics"},
			unlisted: []string{"ok TestSkip: ok_test.go:6: no widget here", "ok TestSub/b: ok_test.go:9: b is for later"},
		},
		{
			name: "both skips allowed", file: "mixed.json",
			allow:  "# why\nok TestSkip no widget on CI\n\nok TestSub/.* later\nother TestNone never used\n",
			last:   "4 passed, 3 failed, 2 skipped",
			failed: []string{"bad TestFails", "nobuild (build, panic or timeout outside a test)", "panics TestPanics"},
			unused: []int{5},
		},
		{
			name: "a pattern matches the whole name only", file: "mixed.json",
			allow:    "ok TestSk no prefix match\n* TestSub/b any package\n",
			last:     "4 passed, 3 failed, 2 skipped",
			failed:   []string{"bad TestFails", "nobuild (build, panic or timeout outside a test)", "panics TestPanics"},
			unlisted: []string{"ok TestSkip: ok_test.go:6: no widget here"},
			unused:   []int{1},
		},
		{
			name: "a timed-out test fails", file: "timeout.json",
			last:   "1 passed, 1 failed, 0 skipped",
			failed: []string{"hangs TestHangs (did not finish)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, out := summarize(t, tc.file, tc.allow)
			if got := lastLine(out); got != tc.last {
				t.Errorf("last line %q, want %q\n%s", got, tc.last, out)
			}
			if !reflect.DeepEqual(sum.FailedNames, tc.failed) {
				t.Errorf("failed %q, want %q", sum.FailedNames, tc.failed)
			}
			if !reflect.DeepEqual(sum.Unlisted, tc.unlisted) {
				t.Errorf("unlisted skips %q, want %q", sum.Unlisted, tc.unlisted)
			}
			if !reflect.DeepEqual(sum.Unused, tc.unused) {
				t.Errorf("unused lines %v, want %v", sum.Unused, tc.unused)
			}
			if sum.OK() != tc.ok {
				t.Errorf("OK() = %v", sum.OK())
			}
		})
	}
}

// TestSkipVerdict: on a run that otherwise passes, an allowed skip passes
// and one not on the list fails.
func TestSkipVerdict(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"m/p"}`,
		`{"Action":"run","Package":"m/p","Test":"TestA"}`,
		`{"Action":"output","Package":"m/p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"m/p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}`,
		`{"Action":"pass","Package":"m/p","Test":"TestA"}`,
		`{"Action":"run","Package":"m/p","Test":"TestRoot"}`,
		`{"Action":"output","Package":"m/p","Test":"TestRoot","Output":"    p_test.go:9: needs root\n"}`,
		`{"Action":"output","Package":"m/p","Test":"TestRoot","Output":"--- SKIP: TestRoot (0.00s)\n"}`,
		`{"Action":"skip","Package":"m/p","Test":"TestRoot"}`,
		`{"Action":"output","Package":"m/p","Output":"PASS\n"}`,
		`{"Action":"output","Package":"m/p","Output":"ok  \tm/p\t0.01s\n"}`,
		`{"Action":"pass","Package":"m/p"}`,
		`{"Action":"output","Package":"m/q","Output":"?   \tm/q\t[no test files]\n"}`,
		`{"Action":"skip","Package":"m/q"}`,
		`not an event: copied`,
	}, "\n") + "\n"
	for _, tc := range []struct {
		allow string
		ok    bool
		out   string
	}{
		{"p TestRoot CI runs as root; this is for laptops\n", true,
			"ok  \tm/p\t0.01s\n?   \tm/q\t[no test files]\nnot an event: copied\n\n== test summary\n1 passed, 0 failed, 1 skipped\n"},
		{"", false,
			"    p_test.go:9: needs root\n--- SKIP: TestRoot (0.00s)\nok  \tm/p\t0.01s\n?   \tm/q\t[no test files]\nnot an event: copied\n\n== test summary\n" +
				"SKIP not allowed: p TestRoot: p_test.go:9: needs root\n" +
				"1 skipped tests are not in the skip allowlist: make them run, or add a line with the reason\n" +
				"1 passed, 0 failed, 1 skipped\n"},
	} {
		rules, err := ParseAllowlist(strings.NewReader(tc.allow))
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		sum, err := Summarize(strings.NewReader(stream), &out, "m", rules)
		if err != nil {
			t.Fatal(err)
		}
		if sum.OK() != tc.ok || out.String() != tc.out {
			t.Errorf("allow %q: OK() = %v, output\n%s\nwant OK() = %v, output\n%s", tc.allow, sum.OK(), out.String(), tc.ok, tc.out)
		}
	}
}

// TestNoTests: an empty stream (go test never started) does not pass.
func TestNoTests(t *testing.T) {
	var out strings.Builder
	sum, err := Summarize(strings.NewReader(""), &out, "m", nil)
	if err != nil || sum.OK() || lastLine(out.String()) != "0 passed, 0 failed, 0 skipped" {
		t.Errorf("OK() = %v, err %v, output %q", sum.OK(), err, out.String())
	}
}

func TestParseAllowlist(t *testing.T) {
	rules, err := ParseAllowlist(strings.NewReader("# c\n\naiod/* Test(A|B)/x  two  words \n"))
	if err != nil || len(rules) != 1 {
		t.Fatalf("%v %v", rules, err)
	}
	if r := rules[0]; r.Package != "aiod/*" || !r.Test.MatchString("TestB/x") || r.Test.MatchString("TestB/xy") || r.Reason != "two  words" || r.Line != 3 {
		t.Errorf("rule %+v", r)
	}
	for _, bad := range []string{"pkg TestX\n", "pkg Test( reason\n", "[ TestX reason\n"} {
		if _, err := ParseAllowlist(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
