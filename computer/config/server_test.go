package config

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

func ptr[T any](v T) *T { return &v }

func mustParse(t *testing.T, doc string) *File {
	t.Helper()
	f, err := Parse([]byte(doc), "test.json")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMergedToolMeta(t *testing.T) {
	s := Server{
		BundleID:        "b",
		DefaultToolMeta: &smcp.ToolMeta{AutoApply: ptr(false), Tags: []string{"default"}, RetObjectMapper: map[string]any{"a": "b"}},
		ToolMeta: map[string]smcp.ToolMeta{
			"read":  {AutoApply: ptr(true)},
			"write": {Tags: []string{}, Alias: ptr("put")},
			"empty": {},
		},
	}
	tests := []struct {
		tool string
		want smcp.ToolMeta
	}{
		{"read", smcp.ToolMeta{AutoApply: ptr(true), Tags: []string{"default"}, RetObjectMapper: map[string]any{"a": "b"}}},
		{"write", smcp.ToolMeta{AutoApply: ptr(false), Tags: []string{}, Alias: ptr("put"), RetObjectMapper: map[string]any{"a": "b"}}},
		{"empty", *s.DefaultToolMeta},
		{"unlisted", *s.DefaultToolMeta},
	}
	for _, tt := range tests {
		if got := s.MergedToolMeta(tt.tool); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("MergedToolMeta(%q) = %+v, want %+v", tt.tool, got, tt.want)
		}
	}
	if got := (Server{}).MergedToolMeta("x"); !reflect.DeepEqual(got, smcp.ToolMeta{}) {
		t.Errorf("zero server: %+v", got)
	}
	if s.DefaultToolMeta.Alias != nil || s.DefaultToolMeta.AutoApply == nil || *s.DefaultToolMeta.AutoApply {
		t.Error("MergedToolMeta modified the default")
	}
}

func TestExposedNameAndForbidden(t *testing.T) {
	f := mustParse(t, `{"name": "Web Search", "type": "stdio", "server_parameters": {"command": "c"},
		"forbidden_tools": ["delete", "Web_Search__wipe", "Web_Search__drop"],
		"tool_meta": {"search": {"alias": "find"}, "wipe_all": {"alias": "wipe"}, "drop": {"alias": "remove"}}}`)
	s := f.Servers[0]
	names := map[string]string{
		"search":   "Web_Search__find",
		"fetch":    "Web_Search__fetch",
		"a__b":     "Web_Search__a__b",
		"wipe_all": "Web_Search__wipe",
	}
	for tool, want := range names {
		if got := s.ExposedName(tool); got != want {
			t.Errorf("ExposedName(%q) = %q, want %q", tool, got, want)
		}
	}
	forbidden := map[string]bool{
		"delete":             true,  // original name
		"wipe_all":           true,  // exposed name through its alias
		"wipe":               true,  // a tool literally named wipe is exposed as Web_Search__wipe too
		"drop":               false, // its exposed name is Web_Search__remove, not Web_Search__drop
		"search":             false,
		"Web_Search__delete": false,
	}
	for tool, want := range forbidden {
		if got := s.Forbidden(tool); got != want {
			t.Errorf("Forbidden(%q) = %v, want %v", tool, got, want)
		}
	}
}

func TestCheckAliases(t *testing.T) {
	s := mustParse(t, `{"name": "s", "type": "stdio", "server_parameters": {"command": "c"},
		"forbidden_tools": ["hidden"],
		"tool_meta": {"b": {"alias": "a"}, "hidden": {"alias": "a"}, "c": {"alias": "x.y"}}}`).Servers[0]
	got := s.CheckAliases([]string{"a", "hidden", "b", "c", "a", "d"})
	want := []Diagnostic{{Server: "s", Field: "tool_meta.b.alias",
		Message: `tools "a" and "b" are both exposed as "s__a"; only "a" is reachable`}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CheckAliases = %+v", got)
	}
	if d := s.CheckAliases([]string{"c", "d"}); d != nil {
		t.Errorf("no collision: %+v", d)
	}

	def := mustParse(t, `{"name": "s", "type": "stdio", "server_parameters": {"command": "c"}, "default_tool_meta": {"alias": "same"}}`).Servers[0]
	got = def.CheckAliases([]string{"one", "two", "three"})
	if len(got) != 2 || got[0].Field != "default_tool_meta.alias" ||
		got[1].String() != `server "s": default_tool_meta.alias: tools "one" and "three" are both exposed as "s__same"; only "one" is reachable` {
		t.Errorf("default alias: %+v", got)
	}
}

const secretDoc = `{
	"inputs": [
		{"type": "promptString", "id": "token", "password": true, "default": "PW-DEFAULT-7731"},
		{"type": "promptString", "id": "user", "default": "alice"}
	],
	"servers": {
		"files": {"type": "stdio", "server_parameters": {"command": "fs", "args": ["--root", "/srv"],
			"env": {"API_KEY": "ENV-SECRET-5521", "TOKEN": "${input:token}"}, "cwd": "/srv", "unknown_secret": "UNKNOWN-SECRET-9"}},
		"remote": {"type": "streamable", "server_parameters": {"url": "https://bob:URL-PASS-1@example.com/mcp?api_key=QUERY-SECRET-3&plain#FRAG-SECRET-4",
			"headers": {"Authorization": "Bearer HEADER-SECRET-8812", "X-Token": "${input:token}"}, "timeout": "PT9S"}}
	}
}`

var secrets = []string{"ENV-SECRET-5521", "HEADER-SECRET-8812", "PW-DEFAULT-7731", "URL-PASS-1", "QUERY-SECRET-3", "FRAG-SECRET-4", "UNKNOWN-SECRET-9", "plain", "RESOLVED-TOKEN-0042"}

func TestRedact(t *testing.T) {
	f := mustParse(t, secretDoc)
	files, remote := f.Servers[0], f.Servers[1]

	// Render first: Redact must still show nothing resolved.
	r := &Resolver{Inputs: f.Inputs, Env: func(name string) (string, bool) {
		if name == "A2C_SMCP_token" {
			return "RESOLVED-TOKEN-0042", true
		}
		return "", false
	}}
	rendered, err := r.Render(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	if rendered.HTTP.Headers["X-Token"] != "RESOLVED-TOKEN-0042" {
		t.Fatalf("render: %+v", rendered.HTTP.Headers)
	}

	for _, s := range []Server{files, remote, rendered} {
		c := s.Redact()
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range secrets {
			if strings.Contains(string(b), secret) {
				t.Errorf("Redact of %s leaks %q: %s", s.BundleID, secret, b)
			}
		}
		if c.BundleID == nil || *c.BundleID != s.BundleID {
			t.Errorf("bundle_id missing: %s", b)
		}
	}
	got, _ := json.Marshal(files.Redact())
	want := `{"name":"files","bundle_id":"files","type":"stdio","disabled":false,"forbidden_tools":[],"tool_meta":{},` +
		`"server_parameters":{"command":"fs","args":["--root","/srv"],"env":{"API_KEY":"******","TOKEN":"******"},"cwd":"/srv"}}`
	if string(got) != want {
		t.Errorf("files:\n got %s\nwant %s", got, want)
	}
	got, _ = json.Marshal(rendered.Redact())
	want = `{"name":"remote","bundle_id":"remote","type":"streamable","disabled":false,"forbidden_tools":[],"tool_meta":{},` +
		`"server_parameters":{"url":"https://******@example.com/mcp?api_key=******\u0026******#******",` +
		`"headers":{"Authorization":"******","X-Token":"******"},"timeout":"PT9S"}}`
	if string(got) != want {
		t.Errorf("remote:\n got %s\nwant %s", got, want)
	}

	// Redact must not alias the server's own slices and maps.
	c := files.Redact()
	c.ForbiddenTools = append(c.ForbiddenTools, "x")
	c.ToolMeta["x"] = smcp.ToolMeta{}
	if len(files.Raw.ForbiddenTools) != 0 || len(files.Raw.ToolMeta) != 0 {
		t.Error("Redact aliases Raw")
	}
	// A Raw whose parameters are unreadable redacts to an empty object.
	broken := files
	broken.Raw.ServerParameters = json.RawMessage(`"ENV-SECRET-5521"`)
	if p := broken.Redact().ServerParameters; string(p) != "{}" {
		t.Errorf("broken parameters: %s", p)
	}
}

func TestRedactedInputs(t *testing.T) {
	f := mustParse(t, secretDoc)
	got := Redacted(f.Inputs)
	if got[0].Default != nil || string(got[1].Default) != `"alice"` {
		t.Errorf("Redacted = %+v", got)
	}
	if string(f.Inputs[0].Default) != `"PW-DEFAULT-7731"` {
		t.Error("Redacted modified its argument")
	}
	if Redacted(nil) != nil {
		t.Error("Redacted(nil) != nil")
	}
}

func TestComputerConfig(t *testing.T) {
	f := mustParse(t, secretDoc)
	ret, err := f.ComputerConfig(smcp.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ret)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range secrets {
		if strings.Contains(string(b), secret) {
			t.Errorf("get_config leaks %q: %s", secret, b)
		}
	}
	servers, err := ret.DecodeServers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers["files"].Name != "files" || servers["remote"].Type != "streamable" {
		t.Errorf("servers = %+v", servers)
	}
	inputs, err := ret.DecodeInputs()
	if err != nil || len(inputs) != 2 {
		t.Fatalf("inputs = %+v, %v", inputs, err)
	}
	// What get_config returns is itself a loadable file with the same ids.
	again, err := Parse(b, "get_config.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(again); !reflect.DeepEqual(got, []string{"files|files|files|stdio", "remote|remote|remote|streamable"}) {
		t.Errorf("reloaded servers = %q", got)
	}
	if s, ok := f.Lookup("remote"); !ok || s.Key != "remote" {
		t.Errorf("Lookup = %+v, %v", s, ok)
	}
	if _, ok := f.Lookup("nope"); ok {
		t.Error("Lookup found a missing server")
	}
}

// TestParseErrorsHoldNoSecrets feeds documents whose broken field sits next
// to, or is, a secret, and checks that no message repeats it.
func TestParseErrorsHoldNoSecrets(t *testing.T) {
	const secret = "TOP-SECRET-4242"
	docs := []string{
		`{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "", "env": {"K": "` + secret + `"}}}}}`,
		`{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "c", "env": {"K": ["` + secret + `"]}}}}}`,
		`{"servers": {"a": {"type": "sse", "server_parameters": {"url": "ftp://x/?t=` + secret + `"}}}}`,
		`{"servers": {"a": {"type": "sse", "server_parameters": {"url": "/rel/` + secret + `"}}}}`,
		`{"servers": {"a": {"type": "sse", "server_parameters": {"url": "http://h/", "headers": {"A": {"v": "` + secret + `"}}}}}}`,
		`{"servers": {"a": {"type": "streamable", "server_parameters": {"url": "http://h/", "timeout": "` + secret + `"}}}}`,
		`{"servers": {"a": {"type": "sse", "server_parameters": {"url": "http://h/", "timeout": "` + secret + `"}}}}`,
		`{"inputs": [{"type": "pickString", "id": "p", "options": [{"label": "a", "value": "a"}], "default": "` + secret + `"}]}`,
		`{"inputs": [{"type": "pickString", "id": "p", "options": ["` + secret + `"]}]}`,
		`{"inputs": [{"type": "pickString", "id": "p", "options": [{"label": "` + secret + `", "value": 1}]}]}`,
		`{"inputs": [{"type": "command", "id": "c", "command": "x", "args": {"k": ["` + secret + `"]}}]}`,
		`{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "c", "env": {"K": "` + secret + `", "K": "` + secret + `"}}}}}`,
		"servers:\n  a: {type: stdio, server_parameters: {command: c, env: {K: " + secret + "}}}\n  b: [" + secret,
		`{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "c", "env": {"K": "` + secret + `"}}}}`,
	}
	for i, doc := range docs {
		_, err := Parse([]byte(doc), "x.json")
		if err == nil {
			t.Errorf("doc %d: no error", i)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "4242") {
			t.Errorf("doc %d: error leaks the secret: %v", i, err)
		}
	}
}
