package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// summary is what shape tests compare: key, name, bundle_id and type of
// each server, in order.
func summary(f *File) []string {
	var out []string
	for _, s := range f.Servers {
		out = append(out, fmt.Sprintf("%s|%s|%s|%s", s.Key, s.Name, s.BundleID, s.Type))
	}
	return out
}

func TestParseShapes(t *testing.T) {
	tests := []struct {
		name string
		file string
		doc  string
		want []string
	}{
		{"single JSON", "a.json",
			`{"name": "weather", "type": "stdio", "server_parameters": {"command": "weather-mcp"}}`,
			[]string{"|weather|weather|stdio"}},
		{"single YAML", "a.yaml",
			"name: weather\ntype: stdio\nserver_parameters:\n  command: weather-mcp\n",
			[]string{"|weather|weather|stdio"}},
		{"list JSON", "a.json",
			`[{"name": "b", "type": "sse", "server_parameters": {"url": "http://127.0.0.1:9/sse"}},
			  {"name": "a", "type": "streamable", "server_parameters": {"url": "https://example.com/mcp"}}]`,
			[]string{"|b|b|sse", "|a|a|streamable"}},
		{"list YAML", "a.yml",
			"- name: b\n  type: sse\n  server_parameters: {url: 'http://127.0.0.1:9/sse'}\n" +
				"- name: a\n  type: streamable\n  server_parameters: {url: 'https://example.com/mcp'}\n",
			[]string{"|b|b|sse", "|a|a|streamable"}},
		{"document JSON", "a.json",
			`{"inputs": [], "servers": {"fs": {"type": "stdio", "server_parameters": {"command": "fs"}},
			  "web": {"name": "Web Search", "type": "http", "server_parameters": {"url": "https://example.com/mcp"}}}}`,
			[]string{"fs|fs|fs|stdio", "web|Web Search|Web_Search|streamable"}},
		{"document YAML", "a.yaml",
			"inputs: []\nservers:\n  fs:\n    type: stdio\n    server_parameters: {command: fs}\n" +
				"  web:\n    name: Web Search\n    type: HTTP\n    server_parameters: {url: 'https://example.com/mcp'}\n",
			[]string{"fs|fs|fs|stdio", "web|Web Search|Web_Search|streamable"}},
		{"document with a servers list", "a.json",
			`{"servers": [{"name": "x", "type": "stdio", "server_parameters": {"command": "x"}}]}`,
			[]string{"|x|x|stdio"}},
		{"mcp_servers list (conformance fixtures)", "a.json",
			`{"mcp_servers": [{"name": "echo", "bundle_id": "echo-1", "type": "stdio", "server_parameters": {"command": "fixture-echo-server"}}]}`,
			[]string{"|echo|echo-1|stdio"}},
		{"key that is a valid bundle_id does not override the name", "a.json",
			`{"servers": {"weather_v2": {"name": "Weather", "type": "stdio", "server_parameters": {"command": "w"}}}}`,
			[]string{"weather_v2|Weather|Weather|stdio"}},
		{"get_config output loads back", "a.json",
			`{"inputs": null, "servers": {"Weather": {"name": "Weather", "bundle_id": "Weather", "type": "stdio", "disabled": false,
			  "forbidden_tools": [], "tool_meta": {}, "server_parameters": {"command": "w", "env": {"K": "******"}}}}}`,
			[]string{"Weather|Weather|Weather|stdio"}},
		{"YAML anchors and merge keys", "a.yaml",
			"base: &base\n  type: stdio\n  server_parameters: {command: x}\n" +
				"servers:\n  one:\n    <<: *base\n  two:\n    <<: *base\n    server_parameters: {command: y}\n",
			[]string{"one|one|one|stdio", "two|two|two|stdio"}},
		{"sniffed JSON without extension", "config",
			"  \n{\"name\": \"j\", \"type\": \"stdio\", \"server_parameters\": {\"command\": \"j\"}}",
			[]string{"|j|j|stdio"}},
		{"sniffed YAML without extension", "config",
			"name: y\ntype: stdio\nserver_parameters: {command: y}\n",
			[]string{"|y|y|stdio"}},
		{"byte order mark", "a.json",
			"\xef\xbb\xbf[{\"name\": \"b\", \"type\": \"stdio\", \"server_parameters\": {\"command\": \"b\"}}]",
			[]string{"|b|b|stdio"}},
		{"empty YAML", "a.yaml", "", nil},
		{"YAML comment only", "a.yaml", "# nothing yet\n", nil},
		{"JSON null", "a.json", "null", nil},
		{"empty object", "a.json", "{}", nil},
		{"empty list", "a.json", "[]", nil},
		{"null servers", "a.json", `{"servers": null}`, nil},
		{"inputs only", "a.json", `{"inputs": [{"type": "promptString", "id": "k"}]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc), tt.file)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := summary(f); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("servers = %q, want %q", got, tt.want)
			}
			if f.Path != "" {
				t.Errorf("Path = %q, want empty for Parse", f.Path)
			}
			if len(f.Diagnostics) != 0 {
				t.Errorf("unexpected diagnostics %v", f.Diagnostics)
			}
		})
	}
}

// TestParseOrder checks that servers come out in the order the file lists
// them, not in any map order, for both formats.
func TestParseOrder(t *testing.T) {
	keys := []string{"zulu", "alpha", "mike", "bravo", "yankee", "charlie", "x-ray", "delta", "whiskey", "echo",
		"victor", "foxtrot", "uniform", "golf", "tango", "hotel", "sierra", "india", "romeo", "juliet"}
	var js, ys strings.Builder
	js.WriteString(`{"servers": {`)
	ys.WriteString("servers:\n")
	for i, k := range keys {
		if i > 0 {
			js.WriteString(",")
		}
		fmt.Fprintf(&js, `%q: {"type": "stdio", "server_parameters": {"command": "c"}}`, k)
		fmt.Fprintf(&ys, "  %s:\n    type: stdio\n    server_parameters: {command: c}\n", k)
	}
	js.WriteString("}}")
	for _, doc := range []struct{ name, text string }{{"a.json", js.String()}, {"a.yaml", ys.String()}} {
		for run := 0; run < 5; run++ {
			f, err := Parse([]byte(doc.text), doc.name)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, s := range f.Servers {
				got = append(got, s.BundleID)
				if s.Index != i {
					t.Errorf("%s: server %q has Index %d, want %d", doc.name, s.Key, s.Index, i)
				}
			}
			if !reflect.DeepEqual(got, keys) {
				t.Fatalf("%s: order %q, want %q", doc.name, got, keys)
			}
		}
	}
}

// TestPickStringDeclarations runs the load-time pickString vectors of the
// conformance tests (§5) that must pass: ④ an explicit null default is no
// default; ⑥ duplicate labels and values are legal. (The refusals, ④ a
// default matching no value, ⑤ empty options, labels or values and ⑦ the
// string form, are in TestParseErrors.)
func TestPickStringDeclarations(t *testing.T) {
	f, err := Parse([]byte(`{"inputs": [
		{"type": "pickString", "id": "a", "options": [{"label": "X", "value": "1"}, {"label": "X", "value": "1"}, {"label": "Y", "value": "1"}], "default": null},
		{"type": "pickString", "id": "b", "options": [{"label": "X", "value": "1"}, {"label": "X", "value": "2"}], "default": "2"}]}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Inputs[0].Default != nil || len(f.Inputs[0].Options) != 3 || string(f.Inputs[1].Default) != `"2"` ||
		f.Inputs[1].Options[1] != (smcp.PickStringOption{Label: "X", Value: "2"}) {
		t.Errorf("inputs = %+v", f.Inputs)
	}
	var ce *Error
	_, err = Parse([]byte(`{"inputs": [{"type": "pickString", "id": "a", "options": ["x"]}]}`), "x.json")
	if !errors.As(err, &ce) || ce.Category() != CategoryValidation || ce.Field != "inputs[0].options" {
		t.Errorf("string form: %#v", err)
	}
}

func TestParseFields(t *testing.T) {
	const doc = `
inputs:
  - {type: promptString, id: token, description: API token, password: true}
  - {type: pickString, id: region, options: [{label: Europe, value: eu}, {label: US, value: us}], default: eu}
  - {type: command, id: cwd, command: pwd, args: {shell: sh}}
servers:
  files:
    name: Local files
    type: stdio
    disabled: true
    forbidden_tools: [rm, Local_files__format_disk]
    default_tool_meta: {auto_apply: false, tags: [fs]}
    tool_meta:
      read: {auto_apply: true, alias: cat, ret_object_mapper: {content: text}}
    vrl: '. = .'
    future_field: {anything: 1}
    server_parameters:
      command: npx
      args: ["-y", "@modelcontextprotocol/server-filesystem", "${input:cwd}"]
      env: {TOKEN: "${input:token}", REGION: "${input:region}"}
      cwd: /tmp
      encoding: utf-8
      encoding_error_handler: replace
  remote:
    type: streamable
    server_parameters:
      url: https://example.com/mcp
      headers: {Authorization: "Bearer ${input:token}"}
      timeout: PT10S
      sse_read_timeout: P1DT2H
      terminate_on_close: false
  events:
    type: sse
    server_parameters: {url: "http://127.0.0.1:8080/sse", timeout: 2.5}
`
	f, err := Parse([]byte(doc), "servers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Inputs) != 3 || f.Inputs[0].ID != "token" || !*f.Inputs[0].Password ||
		string(f.Inputs[1].Default) != `"eu"` || !reflect.DeepEqual(f.Inputs[1].Options, []smcp.PickStringOption{{Label: "Europe", Value: "eu"}, {Label: "US", Value: "us"}}) ||
		f.Inputs[2].Command != "pwd" || f.Inputs[2].Args["shell"] != "sh" {
		t.Errorf("inputs = %+v", f.Inputs)
	}
	files, remote, events := f.Servers[0], f.Servers[1], f.Servers[2]

	tr, fa := true, false
	alias := "cat"
	want := Server{
		Key: "files", Index: 0, Name: "Local files", BundleID: "Local_files", Type: "stdio", Disabled: true,
		ForbiddenTools:  []string{"rm", "Local_files__format_disk"},
		ToolMeta:        map[string]smcp.ToolMeta{"read": {AutoApply: &tr, Alias: &alias, RetObjectMapper: map[string]any{"content": "text"}}},
		DefaultToolMeta: &smcp.ToolMeta{AutoApply: &fa, Tags: []string{"fs"}},
		Stdio: &Stdio{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "${input:cwd}"},
			Env: map[string]string{"TOKEN": "${input:token}", "REGION": "${input:region}"}, Cwd: "/tmp"},
	}
	got := files
	got.Raw = smcp.MCPServerConfig{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files =\n%+v\nwant\n%+v", got, want)
	}
	wantParams := `{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","${input:cwd}"],` +
		`"env":{"TOKEN":"${input:token}","REGION":"${input:region}"},"cwd":"/tmp","encoding":"utf-8","encoding_error_handler":"replace"}`
	if string(files.Raw.ServerParameters) != wantParams {
		t.Errorf("Raw.ServerParameters = %s\nwant %s", files.Raw.ServerParameters, wantParams)
	}
	if files.Raw.Name != "Local files" || files.Raw.Type != "stdio" || files.Raw.BundleID != nil ||
		files.Raw.VRL == nil || *files.Raw.VRL != ". = ." || !files.Raw.Disabled {
		t.Errorf("Raw = %+v", files.Raw)
	}

	wantHTTP := &HTTP{URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${input:token}"},
		Timeout: 10 * time.Second, SSEReadTimeout: 26 * time.Hour, TerminateOnClose: false}
	if !reflect.DeepEqual(remote.HTTP, wantHTTP) || remote.Stdio != nil || remote.BundleID != "remote" {
		t.Errorf("remote = %+v %+v", remote, remote.HTTP)
	}
	wantSSE := &HTTP{URL: "http://127.0.0.1:8080/sse", Timeout: 2500 * time.Millisecond, SSEReadTimeout: DefaultSSEReadTimeout}
	if !reflect.DeepEqual(events.HTTP, wantSSE) {
		t.Errorf("events = %+v", events.HTTP)
	}
}

func TestHTTPDefaults(t *testing.T) {
	f, err := Parse([]byte(`[
		{"name": "s", "type": "streamable", "server_parameters": {"url": "https://h/mcp"}},
		{"name": "e", "type": "sse", "server_parameters": {"url": "https://h/sse", "terminate_on_close": true}},
		{"name": "n", "type": "streamable", "server_parameters": {"url": "https://h/mcp", "timeout": 12, "sse_read_timeout": "PT0S"}}
	]`), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []HTTP{
		{URL: "https://h/mcp", Timeout: DefaultStreamableTimeout, SSEReadTimeout: DefaultStreamableSSEReadTimeout, TerminateOnClose: true},
		{URL: "https://h/sse", Timeout: DefaultSSETimeout, SSEReadTimeout: DefaultSSEReadTimeout},
		{URL: "https://h/mcp", Timeout: 12 * time.Second, TerminateOnClose: true},
	}
	for i, s := range f.Servers {
		if !reflect.DeepEqual(*s.HTTP, want[i]) {
			t.Errorf("server %d: %+v, want %+v", i, *s.HTTP, want[i])
		}
	}
}

// TestParseErrors lists every validation error with its exact message.
func TestParseErrors(t *testing.T) {
	stdio := func(params string) string {
		return `{"servers": {"w": {"type": "stdio", "server_parameters": ` + params + `}}}`
	}
	sse := func(params string) string {
		return `{"servers": {"w": {"type": "sse", "server_parameters": ` + params + `}}}`
	}
	streamable := func(params string) string {
		return `{"servers": {"w": {"type": "streamable", "server_parameters": ` + params + `}}}`
	}
	server := func(fields string) string {
		return `{"servers": {"w": {"type": "stdio", "server_parameters": {"command": "c"}, ` + fields + `}}}`
	}
	input := func(in string) string { return `{"inputs": [` + in + `]}` }
	tests := []struct {
		name, file, doc, want string
	}{
		// server_parameters of stdio
		{"command missing (YAML)", "servers.yaml", "servers:\n  weather:\n    type: stdio\n    server_parameters: {args: []}\n",
			`servers.yaml: server "weather": server_parameters.command: required`},
		{"command null", "x.json", stdio(`{"command": null}`), `x.json: server "w": server_parameters.command: required`},
		{"command empty", "x.json", stdio(`{"command": "  "}`), `x.json: server "w": server_parameters.command: must not be empty`},
		{"command not a string", "x.json", stdio(`{"command": ["npx"]}`), `x.json: server "w": server_parameters.command: expected a string, got an array`},
		{"args not an array", "x.json", stdio(`{"command": "c", "args": "-y"}`), `x.json: server "w": server_parameters.args: expected an array of strings, got a string`},
		{"args element", "x.json", stdio(`{"command": "c", "args": ["a", 2]}`), `x.json: server "w": server_parameters.args[1]: expected a string, got a number`},
		{"env not an object", "x.json", stdio(`{"command": "c", "env": ["A=1"]}`), `x.json: server "w": server_parameters.env: expected an object of strings, got an array`},
		{"env value", "x.json", stdio(`{"command": "c", "env": {"PORT": 8080}}`), `x.json: server "w": server_parameters.env.PORT: expected a string, got a number`},
		{"env value with odd key", "x.json", stdio(`{"command": "c", "env": {"A B": true}}`), `x.json: server "w": server_parameters.env["A B"]: expected a string, got a boolean`},
		{"env value null", "x.json", stdio(`{"command": "c", "env": {"K": null}}`), `x.json: server "w": server_parameters.env.K: expected a string, got null`},
		{"cwd", "x.json", stdio(`{"command": "c", "cwd": 1}`), `x.json: server "w": server_parameters.cwd: expected a string, got a number`},
		{"encoding", "x.json", stdio(`{"command": "c", "encoding": 8}`), `x.json: server "w": server_parameters.encoding: expected a string, got a number`},
		{"encoding_error_handler", "x.json", stdio(`{"command": "c", "encoding_error_handler": "skip"}`),
			`x.json: server "w": server_parameters.encoding_error_handler: must be "strict", "ignore" or "replace"`},

		// server_parameters of sse and streamable
		{"url missing", "x.json", sse(`{}`), `x.json: server "w": server_parameters.url: required`},
		{"url empty", "x.json", sse(`{"url": ""}`), `x.json: server "w": server_parameters.url: required`},
		{"url relative", "x.json", sse(`{"url": "/sse"}`), `x.json: server "w": server_parameters.url: not an absolute http or https URL`},
		{"url scheme", "x.json", streamable(`{"url": "ftp://example.com/mcp"}`), `x.json: server "w": server_parameters.url: not an absolute http or https URL`},
		{"url without host", "x.json", streamable(`{"url": "http:///mcp"}`), `x.json: server "w": server_parameters.url: not an absolute http or https URL`},
		{"url opaque", "x.json", streamable(`{"url": "http:example.com"}`), `x.json: server "w": server_parameters.url: not an absolute http or https URL`},
		{"url scheme before a placeholder", "x.json", streamable(`{"url": "ws://${input:host}/mcp"}`), `x.json: server "w": server_parameters.url: not an absolute http or https URL`},
		{"url type", "x.json", streamable(`{"url": 80}`), `x.json: server "w": server_parameters.url: expected a string, got a number`},
		{"headers", "x.json", sse(`{"url": "http://h/", "headers": "Authorization: x"}`), `x.json: server "w": server_parameters.headers: expected an object of strings, got a string`},
		{"header value", "x.json", sse(`{"url": "http://h/", "headers": {"X-N": 1}}`), `x.json: server "w": server_parameters.headers.X-N: expected a string, got a number`},
		{"sse timeout as string", "x.json", sse(`{"url": "http://h/", "timeout": "5"}`), `x.json: server "w": server_parameters.timeout: expected a number of seconds, got a string`},
		{"sse timeout negative", "x.json", sse(`{"url": "http://h/", "sse_read_timeout": -1}`), `x.json: server "w": server_parameters.sse_read_timeout: must not be negative`},
		{"sse timeout huge", "x.json", sse(`{"url": "http://h/", "timeout": 1e300}`), `x.json: server "w": server_parameters.timeout: out of range`},
		{"streamable timeout not ISO", "x.json", streamable(`{"url": "http://h/", "timeout": "30s"}`),
			`x.json: server "w": server_parameters.timeout: invalid ISO 8601 duration (such as "PT30S"): an ISO 8601 duration starts with "P"`},
		{"streamable timeout negative", "x.json", streamable(`{"url": "http://h/", "sse_read_timeout": "-PT5M"}`),
			`x.json: server "w": server_parameters.sse_read_timeout: invalid ISO 8601 duration (such as "PT30S"): negative duration`},
		{"streamable timeout negative number", "x.json", streamable(`{"url": "http://h/", "timeout": -0.5}`),
			`x.json: server "w": server_parameters.timeout: must not be negative`},
		{"streamable timeout type", "x.json", streamable(`{"url": "http://h/", "timeout": true}`),
			`x.json: server "w": server_parameters.timeout: expected an ISO 8601 duration such as "PT30S", got a boolean`},
		{"terminate_on_close", "x.json", streamable(`{"url": "http://h/", "terminate_on_close": "yes"}`),
			`x.json: server "w": server_parameters.terminate_on_close: expected a boolean, got a string`},

		// server fields
		{"type missing", "x.json", `{"servers": {"w": {"server_parameters": {"command": "c"}}}}`, `x.json: server "w": type: required`},
		{"type unknown", "x.json", `{"servers": {"w": {"type": "grpc", "server_parameters": {}}}}`,
			`x.json: server "w": type: unknown server type "grpc"; expected "stdio", "sse" or "streamable"`},
		{"type is case-sensitive", "x.json", `{"servers": {"w": {"type": "Stdio", "server_parameters": {}}}}`,
			`x.json: server "w": type: unknown server type "Stdio"; expected "stdio", "sse" or "streamable"`},
		{"type not a string", "x.json", `{"servers": {"w": {"type": 1, "server_parameters": {}}}}`, `x.json: server "w": type: expected a string, got a number`},
		{"server_parameters missing", "x.json", `{"servers": {"w": {"type": "stdio"}}}`, `x.json: server "w": server_parameters: required`},
		{"server_parameters not an object", "x.json", `{"servers": {"w": {"type": "stdio", "server_parameters": ["c"]}}}`,
			`x.json: server "w": server_parameters: expected an object, got an array`},
		{"bundle_id charset", "x.json", server(`"bundle_id": "a.b"`),
			`x.json: server "w": bundle_id: invalid bundle_id "a.b": only ASCII letters, digits, '_' and '-' are allowed, and no "__"`},
		{"bundle_id double underscore", "x.json", server(`"bundle_id": "a__b"`),
			`x.json: server "w": bundle_id: invalid bundle_id "a__b": only ASCII letters, digits, '_' and '-' are allowed, and no "__"`},
		{"bundle_id non-ASCII", "x.json", server(`"bundle_id": "天气"`),
			`x.json: server "w": bundle_id: invalid bundle_id "\u5929\u6c14": only ASCII letters, digits, '_' and '-' are allowed, and no "__"`},
		{"bundle_id type", "x.json", server(`"bundle_id": 7`), `x.json: server "w": bundle_id: expected a string, got a number`},
		{"name type (keyed)", "x.json", server(`"name": {}`), `x.json: server "w": name: expected a string, got an object`},
		{"name type (list)", "x.json", `[{"name": 1, "type": "stdio", "server_parameters": {"command": "c"}}]`, `x.json: server #0: name: expected a string, got a number`},
		{"named server in a list", "x.json", `[{"name": "ok", "type": "stdio", "server_parameters": {"command": "c"}}, {"name": "bad", "type": "stdio", "server_parameters": {}}]`,
			`x.json: server "bad": server_parameters.command: required`},
		{"disabled", "x.json", server(`"disabled": "no"`), `x.json: server "w": disabled: expected a boolean, got a string`},
		{"forbidden_tools", "x.json", server(`"forbidden_tools": "rm"`), `x.json: server "w": forbidden_tools: expected an array of strings, got a string`},
		{"forbidden_tools element", "x.json", server(`"forbidden_tools": [null]`), `x.json: server "w": forbidden_tools[0]: expected a string, got null`},
		{"tool_meta", "x.json", server(`"tool_meta": []`), `x.json: server "w": tool_meta: expected an object, got an array`},
		{"tool_meta entry", "x.json", server(`"tool_meta": {"read": "auto"}`), `x.json: server "w": tool_meta.read: expected an object, got a string`},
		{"auto_apply", "x.json", server(`"tool_meta": {"read": {"auto_apply": "yes"}}`), `x.json: server "w": tool_meta.read.auto_apply: expected a boolean, got a string`},
		{"alias empty", "x.json", server(`"tool_meta": {"read": {"alias": ""}}`), `x.json: server "w": tool_meta.read.alias: must not be empty`},
		{"alias type", "x.json", server(`"tool_meta": {"read": {"alias": 1}}`), `x.json: server "w": tool_meta.read.alias: expected a string, got a number`},
		{"tags", "x.json", server(`"tool_meta": {"a.b": {"tags": [1]}}`), `x.json: server "w": tool_meta["a.b"].tags[0]: expected a string, got a number`},
		{"ret_object_mapper", "x.json", server(`"tool_meta": {"read": {"ret_object_mapper": "x"}}`), `x.json: server "w": tool_meta.read.ret_object_mapper: expected an object, got a string`},
		{"default_tool_meta", "x.json", server(`"default_tool_meta": 5`), `x.json: server "w": default_tool_meta: expected an object, got a number`},
		{"default_tool_meta alias", "x.json", server(`"default_tool_meta": {"alias": ""}`), `x.json: server "w": default_tool_meta.alias: must not be empty`},
		{"vrl", "x.json", server(`"vrl": false`), `x.json: server "w": vrl: expected a string, got a boolean`},
		{"server not an object (keyed)", "x.json", `{"servers": {"w": "npx"}}`, `x.json: server "w": expected an object, got a string`},
		{"server not an object (list)", "x.json", `[{"name": "a", "type": "stdio", "server_parameters": {"command": "c"}}, 5]`, `x.json: server #1: expected an object, got a number`},

		// document shape
		{"top-level string", "x.json", `"servers"`, `x.json: expected a server object, a list of servers or an object with "servers", got a string`},
		{"top-level YAML scalar", "x.yaml", "42\n", `x.yaml: expected a server object, a list of servers or an object with "servers", got a number`},
		{"unrecognized object", "x.json", `{"server": {}}`, `x.json: expected a server object, a list of servers or an object with "servers"`},
		{"mcpServers", "x.json", `{"mcpServers": {"fs": {"command": "npx"}}}`,
			`x.json: mcpServers: not supported: use "servers", whose values are A2C server objects with "type" and "server_parameters"`},
		{"servers and mcp_servers", "x.json", `{"servers": {}, "mcp_servers": []}`, `x.json: mcp_servers: cannot be used together with "servers"`},
		{"servers not a collection", "x.json", `{"servers": "fs"}`, `x.json: servers: expected an object or an array, got a string`},
		{"mcp_servers not a collection", "x.json", `{"mcp_servers": 1}`, `x.json: mcp_servers: expected an object or an array, got a number`},
		{"duplicate bundle_id across keys", "x.json",
			`{"servers": {"a": {"name": "Same", "type": "stdio", "server_parameters": {"command": "a"}},
			              "b": {"name": "Same", "type": "stdio", "server_parameters": {"command": "b"}}}}`,
			`x.json: server "b": bundle_id: "Same" is also the bundle_id of server "a"; keys of one file must resolve to distinct bundle_ids`},
		{"keys normalizing to one bundle_id", "x.yaml",
			"servers:\n  My Server: {type: stdio, server_parameters: {command: a}}\n  My_Server: {type: stdio, server_parameters: {command: b}}\n",
			`x.yaml: server "My_Server": bundle_id: "My_Server" is also the bundle_id of server "My Server"; keys of one file must resolve to distinct bundle_ids`},
		{"explicit bundle_id equal to another key's", "x.json",
			`{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "a"}},
			              "b": {"bundle_id": "a", "type": "stdio", "server_parameters": {"command": "b"}}}}`,
			`x.json: server "b": bundle_id: "a" is also the bundle_id of server "a"; keys of one file must resolve to distinct bundle_ids`},

		// inputs
		{"inputs not an array", "x.json", `{"inputs": {}}`, `x.json: inputs: expected an array, got an object`},
		{"input not an object", "x.json", input(`"token"`), `x.json: inputs[0]: expected an object, got a string`},
		{"input type missing", "x.json", input(`{"id": "k"}`), `x.json: inputs[0].type: required`},
		{"input type unknown", "x.json", input(`{"type": "secret", "id": "k"}`),
			`x.json: inputs[0].type: unknown input type "secret"; expected "promptString", "pickString" or "command"`},
		{"input id missing", "x.json", input(`{"type": "promptString"}`), `x.json: inputs[0].id: required`},
		{"input id empty", "x.json", input(`{"type": "promptString", "id": ""}`), `x.json: inputs[0].id: required`},
		{"input id duplicate", "x.json", input(`{"type": "promptString", "id": "k"}, {"type": "promptString", "id": "k"}`),
			`x.json: inputs[1].id: duplicate input id "k"`},
		{"input description", "x.json", input(`{"type": "promptString", "id": "k", "description": 1}`), `x.json: inputs[0].description: expected a string, got a number`},
		{"input default type", "x.json", input(`{"type": "promptString", "id": "k", "default": 1}`), `x.json: inputs[0].default: expected a string, got a number`},
		{"input password", "x.json", input(`{"type": "promptString", "id": "k", "password": "yes"}`), `x.json: inputs[0].password: expected a boolean, got a string`},
		{"pickString without options", "x.json", input(`{"type": "pickString", "id": "k"}`),
			`x.json: inputs[0].options: required: a list of options [{"label": "...", "value": "..."}]`},
		{"pickString null options", "x.json", input(`{"type": "pickString", "id": "k", "options": null}`),
			`x.json: inputs[0].options: required: a list of options [{"label": "...", "value": "..."}]`},
		{"pickString options not a list", "x.json", input(`{"type": "pickString", "id": "k", "options": {"label": "a", "value": "a"}}`),
			`x.json: inputs[0].options: must be [{"label": "...", "value": "..."}], got an object`},
		{"pickString empty options", "x.json", input(`{"type": "pickString", "id": "k", "options": []}`),
			`x.json: inputs[0].options: must be [{"label": "...", "value": "..."}] with at least one option, got an empty list`},
		{"pickString old string form", "x.json", input(`{"type": "pickString", "id": "k", "options": ["a", "b"]}`),
			`x.json: inputs[0].options: must be [{"label": "...", "value": "..."}], got a list of strings (the form before protocol 0.3.2); write each option as {"label": "shown", "value": "used"}`},
		{"pickString option a number", "x.json", input(`{"type": "pickString", "id": "k", "options": [1]}`),
			`x.json: inputs[0].options[0]: must be {"label": "...", "value": "..."}, got a number`},
		{"pickString option mixed with a string", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "A", "value": "a"}, "b"]}`),
			`x.json: inputs[0].options[1]: must be {"label": "...", "value": "..."}, got a string`},
		{"pickString label missing", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"value": "a"}]}`),
			`x.json: inputs[0].options[0].label: required`},
		{"pickString value missing", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "A"}]}`),
			`x.json: inputs[0].options[0].value: required`},
		{"pickString value null", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "A", "value": null}]}`),
			`x.json: inputs[0].options[0].value: required`},
		{"pickString empty label", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "", "value": "a"}]}`),
			`x.json: inputs[0].options[0].label: must not be empty`},
		{"pickString empty value", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "A", "value": ""}]}`),
			`x.json: inputs[0].options[0].value: must not be empty`},
		{"pickString value a number", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "A", "value": 1}]}`),
			`x.json: inputs[0].options[0].value: expected a string, got a number`},
		{"pickString default", "x.json", input(`{"type": "pickString", "id": "k", "options": [{"label": "b", "value": "a"}], "default": "b"}`),
			`x.json: inputs[0].default: not the value of any option`},
		{"command without command", "x.json", input(`{"type": "command", "id": "k"}`), `x.json: inputs[0].command: required`},
		{"command args", "x.json", input(`{"type": "command", "id": "k", "command": "c", "args": {"n": 1}}`), `x.json: inputs[0].args.n: expected a string, got a number`},
		{"env names of two inputs collide", "x.json", input(`{"type": "promptString", "id": "api-key"}, {"type": "promptString", "id": "api_key"}`),
			`x.json: inputs: environment variable A2C_SMCP_api_key would name both input "api-key" and input "api_key"`},
		{"env name of an input and of an input of a server collide", "x.json",
			`{"inputs": [{"type": "promptString", "id": "a"}, {"type": "promptString", "id": "a_b"}],
			  "servers": {"b": {"type": "stdio", "server_parameters": {"command": "${input:a}"}}}}`,
			`x.json: inputs: environment variable A2C_SMCP_a_b would name both input "a_b" and input "a" of server "b"`},

		// syntax
		{"duplicate key (JSON)", "x.json", `{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "c", "env": {"K": "1", "K": "2"}}}}}`,
			`x.json: invalid JSON: servers.a.server_parameters.env: duplicate key "K"`},
		{"duplicate server key (JSON)", "x.json", `{"servers": {"a": {}, "a": {}}}`, `x.json: invalid JSON: servers: duplicate key "a"`},
		{"duplicate key (YAML)", "x.yaml", "servers:\n  a: {type: stdio}\n  a: {type: sse}\n", `x.yaml: invalid YAML: servers: duplicate key "a"`},
		{"JSON number out of range", "x.json", `[{"name": "a", "type": "sse", "server_parameters": {"url": "http://h/", "timeout": 1e999}}]`,
			`x.json: invalid JSON: [0].server_parameters.timeout: number out of range`},
		{"YAML infinity", "x.yaml", "name: a\ntype: sse\nserver_parameters: {url: 'http://h/', timeout: .inf}\n",
			`x.yaml: invalid YAML: line 3: infinite and NaN numbers are not supported`},
		{"YAML two documents", "x.yaml", "name: a\n---\nname: b\n", `x.yaml: invalid YAML: more than one YAML document`},
		{"YAML syntax", "x.yaml", "servers:\n  a: [\n", `x.yaml: invalid YAML: line 2: did not find expected node content`},
		{"YAML non-scalar key", "x.yaml", "? [a]\n: b\n", `x.yaml: invalid YAML: line 1: mapping keys must be scalars`},
		{"JSON syntax", "x.json", "{\"servers\": {\n  \"a\": }\n}", `x.json: invalid JSON: line 2: invalid character '}' looking for beginning of value`},
		{"JSON trailing data", "x.json", `{} {}`, `x.json: invalid JSON: unexpected data after the top-level value`},
		{"JSON truncated", "x.json", `{"servers": {`, `x.json: invalid JSON: unexpected end of JSON input`},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if seen[tt.name] {
			t.Fatalf("duplicate test name %q", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc), tt.file)
			if err == nil {
				t.Fatalf("Parse succeeded with %d servers; want error %q", len(f.Servers), tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error is %T, want *Error", err)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	_, err := Parse([]byte(`[{"type": "stdio", "server_parameters": {"command": "c"}}, {"type": "stdio", "server_parameters": {"env": {}}}]`), "list.json")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is %T", err, err)
	}
	want := Error{File: "list.json", Server: "", Index: 1, Field: "server_parameters.command", Message: "required"}
	if *ce != want {
		t.Errorf("error = %+v, want %+v", *ce, want)
	}
	if got := ce.Error(); got != "list.json: server #1: server_parameters.command: required" {
		t.Errorf("Error() = %q", got)
	}
}

// TestBundleIDConformance runs the upstream fixture through Parse, with each
// vector written as a server object, in JSON and in YAML.
func TestBundleIDConformance(t *testing.T) {
	raw, err := os.ReadFile("../../smcp/testdata/bundle_id_conformance_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Vectors []struct {
			Desc   string                     `json:"desc"`
			Name   string                     `json:"name"`
			Config map[string]json.RawMessage `json:"config"`
			Want   string                     `json:"expected_bundle_id"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Vectors) != 16 {
		t.Fatalf("%d vectors, want 16", len(fixture.Vectors))
	}
	for _, v := range fixture.Vectors {
		t.Run(v.Desc, func(t *testing.T) {
			obj := map[string]any{"name": v.Name}
			params := map[string]json.RawMessage{}
			for k, val := range v.Config {
				switch k {
				case "type", "bundle_id":
					obj[k] = val
				default:
					params[k] = val
				}
			}
			obj["server_parameters"] = params
			doc, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			// JSON is a subset of YAML (flow style), so the same bytes
			// exercise the YAML decoder too.
			for _, file := range []string{"v.json", "v.yaml"} {
				f, err := Parse(doc, file)
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				s := f.Servers[0]
				_, explicit := v.Config["bundle_id"]
				if s.BundleID != v.Want || s.Explicit != explicit {
					t.Errorf("%s: bundle_id %q (explicit %v), want %q (explicit %v)", file, s.BundleID, s.Explicit, v.Want, explicit)
				}
			}
		})
	}
}

func TestBundleIDDerivation(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"name normalized", `{"name": "My Server!", "type": "stdio", "server_parameters": {"command": "npx"}}`, "My_Server"},
		{"CJK name falls back to a hash of the raw identity", `{"name": "你好世界", "type": "stdio", "server_parameters": {"command": "npx", "args": ["-y", "everything"], "env": {}}}`,
			"bundle_8d2a9232fa76e8a5"},
		{"missing name and empty env are the same as empty ones", `{"type": "stdio", "server_parameters": {"command": "npx", "args": ["-y", "everything"]}}`,
			"bundle_8d2a9232fa76e8a5"},
		{"http label hashes as streamable", `{"name": "", "type": "http", "server_parameters": {"url": "https://api.example.com/mcp", "headers": {}}}`,
			"bundle_b413b61fe2e77b15"},
		{"excluded fields do not change the hash", `{"name": "", "type": "streamable", "disabled": true, "forbidden_tools": ["x"],
			"server_parameters": {"url": "https://api.example.com/mcp", "timeout": "PT1S", "terminate_on_close": false}}`,
			"bundle_b413b61fe2e77b15"},
		{"empty explicit bundle_id is absent", `{"name": "n", "bundle_id": "", "type": "stdio", "server_parameters": {"command": "x"}}`, "n"},
		{"null explicit bundle_id is absent", `{"name": "n", "bundle_id": null, "type": "stdio", "server_parameters": {"command": "x"}}`, "n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc), "x.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Servers[0].BundleID; got != tt.want {
				t.Errorf("bundle_id %q, want %q", got, tt.want)
			}
		})
	}
	// Placeholders are hashed literally: rendering does not change the id,
	// and two configs that differ only in a placeholder's name differ.
	a := `[{"name": "", "type": "stdio", "server_parameters": {"command": "x", "env": {"K": "${input:a}"}}}]`
	b := `[{"name": "", "type": "stdio", "server_parameters": {"command": "x", "env": {"K": "${input:b}"}}}]`
	fa, err1 := Parse([]byte(a), "a.json")
	fb, err2 := Parse([]byte(b), "b.json")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	want := smcp.DeriveBundleID("", smcp.Identity{Type: "stdio", Command: "x", Env: map[string]string{"K": "${input:a}"}})
	if fa.Servers[0].BundleID != want || fa.Servers[0].BundleID == fb.Servers[0].BundleID {
		t.Errorf("bundle_ids %q and %q; want %q and a different one", fa.Servers[0].BundleID, fb.Servers[0].BundleID, want)
	}
}

func TestDuplicateBundleID(t *testing.T) {
	const doc = `[
		{"name": "weather", "disabled": true, "type": "stdio", "server_parameters": {"command": "first"}},
		{"name": "other", "type": "stdio", "server_parameters": {"command": "x"}},
		{"name": "Weather!", "bundle_id": "weather", "type": "stdio", "server_parameters": {"command": "second"}},
		{"name": "weather", "type": "sse", "server_parameters": {"url": "http://h/"}}
	]`
	f, err := Parse([]byte(doc), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(f); !reflect.DeepEqual(got, []string{"|weather|weather|stdio", "|other|other|stdio"}) {
		t.Errorf("servers = %q", got)
	}
	if f.Servers[0].Stdio.Command != "first" {
		t.Errorf("kept %q, want the first", f.Servers[0].Stdio.Command)
	}
	want := []string{
		`server "weather": bundle_id: duplicate bundle_id: server #2 ("Weather!") is ignored; server #0 ("weather"), the first in the file, is used`,
		`server "weather": bundle_id: duplicate bundle_id: server #3 ("weather") is ignored; server #0 ("weather"), the first in the file, is used`,
	}
	var got []string
	for _, d := range f.Diagnostics {
		got = append(got, d.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diagnostics\n got: %q\nwant: %q", got, want)
	}
}

func TestDefaultAliasDiagnostic(t *testing.T) {
	f, err := Parse([]byte(`{"name": "s", "type": "stdio", "server_parameters": {"command": "c"}, "default_tool_meta": {"alias": "x"}}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []Diagnostic{{Server: "s", Field: "default_tool_meta.alias",
		Message: "an alias in default_tool_meta gives every tool the same exposed name, so only one tool is reachable; set aliases in tool_meta instead"}}
	if !reflect.DeepEqual(f.Diagnostics, want) {
		t.Errorf("diagnostics = %+v", f.Diagnostics)
	}
}

func TestPlaceholderURLIsCheckedLater(t *testing.T) {
	for _, u := range []string{"${input:url}", "https://${input:host}/mcp", "HTTP://h/${env:P}", "${env:SCHEME}://h"} {
		f, err := Parse([]byte(`{"name": "s", "type": "streamable", "server_parameters": {"url": "`+u+`"}}`), "x.json")
		if err != nil {
			t.Fatal(err)
		}
		if f.Servers[0].HTTP.URL != u {
			t.Errorf("URL = %q", f.Servers[0].HTTP.URL)
		}
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	doc := `{"version": 2, "inputs": [{"type": "promptString", "id": "k", "extra": [1]}],
		"servers": {"a": {"type": "stdio", "env_file": ".env", "server_parameters": {"command": "c", "shell": true},
		"tool_meta": {"t": {"future": 1}}}}}`
	f, err := Parse([]byte(doc), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 1 || len(f.Inputs) != 1 {
		t.Errorf("servers %d, inputs %d", len(f.Servers), len(f.Inputs))
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yamlDoc := "servers:\n  a:\n    type: stdio\n    server_parameters: {command: c}\n"
	jsonDoc := `{"servers": {"a": {"type": "stdio", "server_parameters": {"command": "c"}}}}`
	for _, p := range []string{
		write("a.yaml", yamlDoc), write("a.yml", yamlDoc), write("a.YAML", yamlDoc), write("a.conf", yamlDoc),
		write("a.json", jsonDoc), write("a", jsonDoc),
		// a .yaml file is YAML even when it looks like JSON; JSON is YAML.
		write("b.yaml", jsonDoc),
	} {
		f, err := Load(p)
		if err != nil {
			t.Fatalf("Load(%s): %v", p, err)
		}
		if f.Path != p || len(f.Servers) != 1 || f.Servers[0].BundleID != "a" {
			t.Errorf("Load(%s) = %+v", p, f)
		}
	}
	// A .json file that is not JSON is sniffed, so YAML is taken.
	if _, err := Load(write("c.json", yamlDoc)); err != nil {
		t.Errorf("YAML in .json: %v", err)
	}
	p := write("bad.yaml", "servers:\n  a: {type: stdio, server_parameters: {}}\n")
	if _, err := Load(p); err == nil || err.Error() != p+`: server "a": server_parameters.command: required` {
		t.Errorf("error = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := write("big.json", strings.Repeat(" ", MaxFileSize+1))
	if _, err := Load(big); err == nil || err.Error() != big+": larger than 8388608 bytes" {
		t.Errorf("large file: %v", err)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	if _, err := Parse([]byte(deep), "x.json"); err == nil || !strings.Contains(err.Error(), "nesting too deep") {
		t.Errorf("deep JSON: %v", err)
	}
	// A YAML alias bomb expands past the node budget and is rejected
	// quickly instead of allocating billions of nodes.
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	bomb += "servers: *i\n"
	start := time.Now()
	_, err := Parse([]byte(bomb), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Errorf("alias bomb: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("alias bomb took %v", d)
	}
}
