package smcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// fixtureVector is one entry of testdata/bundle_id_conformance_vectors.json,
// the upstream A2C-SMCP 0.3.0 conformance fixture.
type fixtureVector struct {
	Desc   string `json:"desc"`
	Name   string `json:"name"`
	Config struct {
		Type     string            `json:"type"`
		Command  string            `json:"command"`
		Args     []string          `json:"args"`
		Env      map[string]string `json:"env"`
		URL      string            `json:"url"`
		Headers  map[string]string `json:"headers"`
		BundleID string            `json:"bundle_id"`
	} `json:"config"`
	Expected string `json:"expected_bundle_id"`
}

func TestBundleIDConformanceVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/bundle_id_conformance_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Vectors []fixtureVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Vectors) != 16 {
		t.Fatalf("fixture has %d vectors, want 16", len(fixture.Vectors))
	}
	for _, v := range fixture.Vectors {
		t.Run(v.Desc, func(t *testing.T) {
			c := v.Config
			id := Identity{Type: c.Type, Command: c.Command, Args: c.Args, Env: c.Env, URL: c.URL, Headers: c.Headers}
			got, err := ResolveBundleID(c.BundleID, v.Name, id)
			if err != nil || got != v.Expected {
				t.Errorf("ResolveBundleID(%q, %q, %+v) = %q, %v; want %q", c.BundleID, v.Name, id, got, err, v.Expected)
			}
			if !ValidBundleID(got) {
				t.Errorf("%q is not a valid bundle_id", got)
			}
		})
	}
}

func TestValidBundleID(t *testing.T) {
	tests := map[string]bool{
		"fs": true, "My_Server": true, "a-b--c": true, "bundle_8d2a9232fa76e8a5": true,
		"_lead": true, "trail-": true, "A1_b-2": true,
		"": false, "a__b": false, "__": false, "a.b": false, "a b": false, "a/b": false,
		"é": false, "a:b": false, "a\x00": false, "a___b": false,
	}
	for s, want := range tests {
		if got := ValidBundleID(s); got != want {
			t.Errorf("ValidBundleID(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestNormalizeBundleName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"everything", "everything"},
		{"My Server!", "My_Server"},
		{"a__b", "a_b"},
		{"a.b.c", "a_b_c"},
		{"a-b--c", "a-b--c"},
		{"__lead_trail__", "lead_trail"},
		{"MyServer", "MyServer"},
		{"my.api", "my_api"},
		{"a_-_b", "a_-_b"},
		{"-_-a-_-", "a"},
		{"a \t\n b", "a_b"},
		{"café au lait", "caf_au_lait"},
		{"数据 server", "server"},
		{"a😀b", "a_b"},
		{"a\xff\xfeb", "a_b"},
		{"你好世界", ""},
		{"!!!@@@", ""},
		{"", ""},
		{"_-_", ""},
	}
	for _, tt := range tests {
		got := NormalizeBundleName(tt.in)
		if got != tt.want {
			t.Errorf("NormalizeBundleName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got != "" && !ValidBundleID(got) {
			t.Errorf("NormalizeBundleName(%q) = %q, not a valid bundle_id", tt.in, got)
		}
	}
}

func TestIdentityTLV(t *testing.T) {
	id := Identity{Type: "stdio", Command: "npx", Args: []string{"-y", "é"}, Env: map[string]string{"B": "2", "A": "1"}}
	want := []byte{}
	put := func(s string) {
		want = append(want, 0, 0, 0, byte(len(s)))
		want = append(want, s...)
	}
	put("stdio")
	put("npx")
	want = append(want, 0, 0, 0, 2)
	put("-y")
	put("é")
	want = append(want, 0, 0, 0, 2)
	put("A")
	put("1")
	put("B")
	put("2")
	if got := id.TLV(); !bytes.Equal(got, want) {
		t.Errorf("TLV\n got %x\nwant %x", got, want)
	}

	// Excluded and equivalent inputs do not change the encoding.
	same := []struct{ a, b Identity }{
		{Identity{Type: "stdio", Command: "x"}, Identity{Type: "stdio", Command: "x", Args: []string{}, Env: map[string]string{}}},
		{Identity{Type: "stdio", Command: "x", URL: "ignored"}, Identity{Type: "stdio", Command: "x"}},
		{Identity{Type: "http", URL: "u"}, Identity{Type: "streamable", URL: "u"}},
		{Identity{Type: "HTTP", URL: "u", Headers: map[string]string{}}, Identity{Type: "streamable", URL: "u"}},
		{Identity{Type: "sse", URL: "u", Command: "ignored"}, Identity{Type: "sse", URL: "u"}},
	}
	for _, s := range same {
		if !bytes.Equal(s.a.TLV(), s.b.TLV()) {
			t.Errorf("TLV(%+v) != TLV(%+v)", s.a, s.b)
		}
	}
	differ := []struct{ a, b Identity }{
		{Identity{Type: "sse", URL: "u"}, Identity{Type: "streamable", URL: "u"}},
		{Identity{Type: "stdio", Command: "x", Args: []string{"a", "b"}}, Identity{Type: "stdio", Command: "x", Args: []string{"b", "a"}}},
		{Identity{Type: "stdio", Command: "x", Args: []string{"ab"}}, Identity{Type: "stdio", Command: "x", Args: []string{"a", "b"}}},
		{Identity{Type: "stdio", Command: "x", Env: map[string]string{"K": "${input:k}"}}, Identity{Type: "stdio", Command: "x", Env: map[string]string{"K": "secret"}}},
	}
	for _, d := range differ {
		if bytes.Equal(d.a.TLV(), d.b.TLV()) {
			t.Errorf("TLV(%+v) == TLV(%+v)", d.a, d.b)
		}
	}
}

func TestDeriveBundleID(t *testing.T) {
	id := Identity{Type: "stdio", Command: "npx", Args: []string{"-y", "everything"}, Env: map[string]string{}}
	if got := DeriveBundleID("你好世界", id); got != "bundle_8d2a9232fa76e8a5" {
		t.Errorf("DeriveBundleID = %q", got)
	}
	if got := DeriveBundleID("Files!", id); got != "Files" {
		t.Errorf("DeriveBundleID = %q", got)
	}
	for _, name := range []string{"", "!!!", "__", "ü", "\xff"} {
		got := DeriveBundleID(name, Identity{Type: "sse", URL: name})
		if !strings.HasPrefix(got, "bundle_") || len(got) != len("bundle_")+16 || !ValidBundleID(got) {
			t.Errorf("DeriveBundleID(%q) = %q", name, got)
		}
	}
}

func TestResolveBundleID(t *testing.T) {
	id := Identity{Type: "stdio", Command: "x"}
	if got, err := ResolveBundleID("custom_id", "whatever", id); got != "custom_id" || err != nil {
		t.Errorf("explicit: %q, %v", got, err)
	}
	if got, err := ResolveBundleID("", "My Server", id); got != "My_Server" || err != nil {
		t.Errorf("derived: %q, %v", got, err)
	}
	for _, bad := range []string{"a__b", "a.b", "a b", strings.Repeat("\n", 1000)} {
		got, err := ResolveBundleID(bad, "n", id)
		if !errors.Is(err, ErrInvalidBundleID) || got != "" {
			t.Errorf("ResolveBundleID(%.10q) = %q, %v", bad, got, err)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("error is %d bytes long", len(err.Error()))
		}
	}
}

func TestExposedName(t *testing.T) {
	tests := []struct{ bundle, tool, want string }{
		{"fs", "read_file", "fs__read_file"},
		{"bundle_8d2a9232fa76e8a5", "echo", "bundle_8d2a9232fa76e8a5__echo"},
		{"fs", "weird__name", "fs__weird__name"},
	}
	for _, tt := range tests {
		if got := ExposedName(tt.bundle, tt.tool); got != tt.want {
			t.Errorf("ExposedName(%q, %q) = %q, want %q", tt.bundle, tt.tool, got, tt.want)
		}
	}
}
