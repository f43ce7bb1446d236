package code

import (
	"testing"
)

// TestNodeTopLevelAwait: a cell with a top-level await answers its last
// expression's value, and its top-level declarations persist.
func TestNodeTopLevelAwait(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []struct {
		name, code string
		want       any // text/plain of the execute_result; nil: no result
	}{
		{"value after await", "await new Promise(r=>setTimeout(r,100)); 7", "7"},
		{"expression form", "await Promise.resolve('x')", "'x'"},
		{"const persists", "const x = await Promise.resolve(5)", nil},
		{"read in a plain cell", "x * 2", "10"},
		{"redeclared in a later await cell", "const x = await 6; x", "6"},
		{"let and destructuring", "let {a, b: [c]} = await Promise.resolve({a: 1, b: [2]}), d\na + c", "3"},
		{"persisted destructuring", "[a, c, typeof d]", "[ 1, 2, 'undefined' ]"},
		{"array pattern", "const arr = await Promise.all([1, 2])\nconst [p, q] = arr\np + q", "3"},
		{"var", "var v = await 4; var v; v", "4"},
		{"continued line", "await 0\nconst y = 1\n  + 1\ny", "2"},
		{"member on the next line", "await 0; const o = {\n  k: 1\n}\n.k\no", "1"},
		{"semicolons in strings and regexps", `await 0; const s = "a;b"; /;/.test(s) // trailing comment`, "true"},
		{"template with braces", "await 0; `v=${ {a: 1}.a }`", "'v=1'"},
		{"division after a name", "const g = await 3; g /2/ 1", "1.5"},
		{"function declaration", "async function f() { return 3 }\nawait f()", "3"},
		{"function persists", "typeof f", "'function'"},
		{"class declaration", "await 0\nclass K { m() { return 9 } }\nnew K().m()", "9"},
		{"class persists", "new K().m()", "9"},
		{"loop without braces runs fully", "await 0\nglobalThis.acc = 0\nfor (const n of [1, 2, 3])\n  acc += n\nacc", "6"},
		{"block last: no value", "await 0\nif (true) { 1 }", nil},
		{"declaration last: no value", "const z = await 1", nil},
		{"undefined last: no value", "await 0; console.log('hi')", nil},
		{"for await", "for await (const z of [Promise.resolve(8)]) { globalThis.fa = z }\nfa", "8"},
		{"trailing semicolons", "await 0;;", "0"},
		{"a harness name is free", "const fs = await Promise.resolve(require('fs')); typeof fs.readFileSync", "'function'"},
	} {
		r, rp := h.exec("javascript", "tla", c.code)
		if r.Status != StatusOK {
			t.Errorf("%s: %s", c.name, rp.raw)
			continue
		}
		var got any
		for i := range r.Outputs {
			if o := r.out(t, i); o.OutputType == OutputExecuteResult {
				got = o.Data["text/plain"]
			}
		}
		if got != c.want {
			t.Errorf("%s: result %v, want %v: %s", c.name, got, c.want, rp.raw)
		}
	}
	// an await cell that throws still reports the error
	if r, rp := h.exec("javascript", "tla", "await 0; throw new RangeError('nope')"); r.Status != StatusError || r.out(t, 0).Ename != "RangeError" {
		t.Errorf("%s", rp.raw)
	}
}
