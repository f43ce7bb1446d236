package sio

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// validJSONCases are inputs where a validator is easy to get wrong; each
// is checked against json.Valid (and seeds FuzzValidJSON).
var validJSONCases = []struct {
	name, in string
}{
	{"empty", ""},
	{"space only", " \t\r\n"},
	{"literals", `[true,false,null]`},
	{"literal cut", `[tru]`},
	{"literal longer", `truex`},
	{"literal prefix", `nul`},
	{"numbers", `[0,-0,1,-1,10,1.5,-1.5e10,1E+2,1e-2,0.0,123456789012345678901234567890]`},
	{"leading zero", `01`},
	{"leading zero in array", `[01]`},
	{"minus alone", `-`},
	{"minus space", `- 1`},
	{"dot end", `1.`},
	{"dot start", `.5`},
	{"exponent end", `1e`},
	{"exponent sign end", `1e+`},
	{"plus sign", `+1`},
	{"hex", `0x10`},
	{"number then letter", `[1a]`},
	{"strings", `["", "a", "\" \\ \/ \b \f \n \r \t", "\u00e9\uD83D\uDE00", "\uABCD\uabcd"]`},
	{"lone surrogate escape", `"\ud800"`},
	{"bad escape", `"\x"`},
	{"short unicode escape", `"\u12"`},
	{"non-hex unicode escape", `"\u12G4"`},
	{"escape at end", `"\`},
	{"escaped quote then end", `"\"`},
	{"raw tab", "\"a\tb\""},
	{"raw newline", "\"a\nb\""},
	{"raw NUL", "\"\x00\""},
	{"raw 0x1f after 40 bytes", "\"" + strings.Repeat("x", 40) + "\x1f\""},
	{"DEL", "\"\x7f\""},
	{"invalid UTF-8", "\"\xff\xfe\""},
	{"truncated UTF-8", "\"\xe2\x82\""},
	{"UTF-8 surrogate", "\"\xed\xa0\x80\""},
	{"invalid UTF-8 outside a string", "[1]\xff"},
	{"BOM", "\xef\xbb\xbf[1]"},
	{"objects", `{"a":1,"b":{"c":[{}]},"d":[],"e":{}}`},
	{"object key not string", `{1:2}`},
	{"object no colon", `{"a" 1}`},
	{"object no value", `{"a":}`},
	{"object trailing comma", `{"a":1,}`},
	{"object missing close", `{"a":1`},
	{"object closed by bracket", `{"a":1]`},
	{"array closed by brace", `[1}`},
	{"array trailing comma", `[1,]`},
	{"array leading comma", `[,1]`},
	{"array double comma", `[1,,2]`},
	{"array missing comma", `[1 2]`},
	{"array missing close", `[1`},
	{"two values", `[1] [2]`},
	{"trailing garbage", `[1]x`},
	{"white space everywhere", " [ 1 , { \"a\" : [ ] } , \"x\" ] \n"},
	{"vertical tab is not space", "\v[1]"},
	{"non-breaking space is not space", "\u00a0[1]"},
	{"event", `["client:put_blob",{"agent":"a","blob":"QUJD"}]`},
	{"nested arrays", `[[1,[2,[3]]],[]]`},
	{"escaped quotes in a long string", `["` + strings.Repeat(`ab\"`, 30) + `"]`},
	{"deep valid", strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)},
	{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)},
	{"deep mixed valid", strings.Repeat(`{"a":[`, maxDepth/2) + strings.Repeat(`]}`, maxDepth/2)},
	{"deep mixed too deep", `[` + strings.Repeat(`{"a":[`, maxDepth/2) + strings.Repeat(`]}`, maxDepth/2) + `]`},
	{"deep unclosed", strings.Repeat("[", 50)},
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, tc := range validJSONCases {
		t.Run(tc.name, func(t *testing.T) {
			want := json.Valid([]byte(tc.in))
			if got := validJSON([]byte(tc.in)); got != want {
				t.Fatalf("validJSON(%.60q) = %v, json.Valid %v", tc.in, got, want)
			}
		})
	}
}

// TestSplitArgs pins the elements and errors of the one-pass split.
func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in    string
		event bool
		name  string
		args  []string
		err   string // "" when accepted
	}{
		{`["ev",1,"x",{"a":[1,2]},[],null]`, true, "ev", []string{`1`, `"x"`, `{"a":[1,2]}`, `[]`, `null`}, ""},
		{` [ "ev" , 1 ] `, true, "ev", []string{`1`}, ""},
		{`["\u0065v"]`, true, "ev", []string{}, ""},
		{`["é"]`, true, "é", []string{}, ""},
		{"[\"\xff\"]", true, "\ufffd", []string{}, ""},
		{`[]`, false, "", []string{}, ""},
		{`[1,2]`, false, "", []string{`1`, `2`}, ""},
		{`[]`, true, "", nil, "event without a name"},
		{`[1]`, true, "", nil, "event without a name"},
		{`{"a":1}`, false, "", nil, "payload is not an array"},
		{`[1,]`, false, "", nil, "invalid JSON"},
		{"[\"a\x01\"]", false, "", nil, "invalid JSON"},
	}
	for _, tt := range tests {
		name, args, err := splitArgs([]byte(tt.in), tt.event)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("splitArgs(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || name != tt.name || len(args) != len(tt.args) {
			t.Errorf("splitArgs(%q) = %q, %q, %v", tt.in, name, args, err)
			continue
		}
		for i := range args {
			if string(args[i]) != tt.args[i] {
				t.Errorf("splitArgs(%q) arg %d = %s, want %s", tt.in, i, args[i], tt.args[i])
			}
		}
	}
}

// TestScanStringLinear checks that a long string full of escapes, with
// its closing quote at the far end, is validated in linear time.
func TestScanStringLinear(t *testing.T) {
	in := []byte(`["` + strings.Repeat(`\n`, 1<<20) + `"]`)
	start := time.Now()
	if !validJSON(in) {
		t.Fatal("refused")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("2 MiB of escapes took %s", d)
	}
}

// BenchmarkSplitArgs measures the receive-side check of a client:put_blob
// chunk (256 KiB as base64) against json.Valid plus the old splitter.
func BenchmarkSplitArgs(b *testing.B) {
	data := []byte(`["client:put_blob",{"agent":"a","req_id":"r","computer":"c","chunk_offset":0,"eof":false,"blob":"` +
		strings.Repeat("QUJD", 256<<10/3) + `"}]`)
	b.Run("scanJSON", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, _, err := splitArgs(data, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid+splitArray", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if !json.Valid(data) {
				b.Fatal("invalid")
			}
			splitArray(data)
		}
	})
}
