package config

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

func FuzzParse(f *testing.F) {
	seeds := []string{
		secretDoc,
		`{"name": "x", "type": "stdio", "server_parameters": {"command": "c"}}`,
		`[{"name": "", "type": "http", "server_parameters": {"url": "https://h/mcp", "headers": {"a": "b"}, "timeout": "PT1S"}},
		  {"name": "", "type": "sse", "server_parameters": {"url": "https://h/sse", "timeout": 1.5}}]`,
		`{"inputs": [{"type": "pickString", "id": "p", "options": [{"label": "A", "value": "a"}, {"label": "A", "value": "b"}], "default": "a"}],
		  "mcp_servers": [{"name": "a", "type": "stdio", "server_parameters": {"command": "${input:p}"}, "tool_meta": {"t": {"alias": "u", "tags": []}}}]}`,
		"servers:\n  a:\n    type: stdio\n    server_parameters: {command: c, env: {K: v}}\n  b: &b {type: sse, server_parameters: {url: 'http://h/'}}\n  c: {<<: *b}\n",
		"- {name: 你好, type: stdio, server_parameters: {command: c}, default_tool_meta: {alias: a}}\n",
		"",
		"null",
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, asYAML bool) {
		name := "fuzz"
		if asYAML {
			name = "fuzz.yaml"
		}
		file, err := Parse(data, name)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is %T, want *Error", err, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, s := range file.Servers {
			if !smcp.ValidBundleID(s.BundleID) {
				t.Fatalf("invalid bundle_id %q", s.BundleID)
			}
			if seen[s.BundleID] {
				t.Fatalf("bundle_id %q kept twice", s.BundleID)
			}
			seen[s.BundleID] = true
			switch s.Type {
			case smcp.ServerTypeStdio:
				if s.Stdio == nil || s.HTTP != nil || s.Stdio.Command == "" {
					t.Fatalf("stdio server %+v", s)
				}
			case smcp.ServerTypeSSE, smcp.ServerTypeStreamable:
				if s.HTTP == nil || s.Stdio != nil || s.HTTP.Timeout < 0 || s.HTTP.SSEReadTimeout < 0 {
					t.Fatalf("%s server %+v", s.Type, s)
				}
			default:
				t.Fatalf("unknown type %q", s.Type)
			}
			if !json.Valid(s.Raw.ServerParameters) {
				t.Fatalf("Raw.ServerParameters is not JSON: %q", s.Raw.ServerParameters)
			}
			b, err := json.Marshal(s.Redact())
			if err != nil {
				t.Fatalf("marshal Redact: %v", err)
			}
			var back smcp.MCPServerConfig
			if err := json.Unmarshal(b, &back); err != nil || back.BundleID == nil || *back.BundleID != s.BundleID {
				t.Fatalf("Redact round trip: %s, %v", b, err)
			}
			s.CheckAliases([]string{"a", "b", s.Name})
		}
		if _, err := file.ComputerConfig(smcp.DefaultProfile()); err != nil {
			t.Fatalf("ComputerConfig: %v", err)
		}
	})
}

// Values the FuzzRender resolver substitutes; none holds '$', '{' or '}',
// so an output can hold a placeholder only if substitution left one.
var fuzzValues = []string{"DEFAULT-A", "OPT-X", "RUN-C", "ENV-A", "ENV-HOME"}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"${input:a}", "x${env:HOME}y", "${input:${input:a}}", "$${input:b}}", "${input:d}", "${input:c}${input:a}",
		"${x${input:b}", "${input:a", "}${input:c}{", "${env:}", "${input:}", "${input:zz}", "plain",
	} {
		f.Add(s)
	}
	declared := []string{"a", "b", "c", "d"}
	f.Fuzz(func(t *testing.T, tmpl string) {
		r := &Resolver{
			Inputs: []smcp.MCPServerInput{
				{Type: smcp.InputPromptString, ID: "a", Default: []byte(`"DEFAULT-A"`)},
				{Type: smcp.InputPickString, ID: "b", Options: []smcp.PickStringOption{{Label: "X", Value: "OPT-X"}, {Label: "Y", Value: "OPT-Y"}}, Default: []byte(`"OPT-X"`)},
				{Type: smcp.InputCommand, ID: "c", Command: "c"},
				{Type: smcp.InputPromptString, ID: "d"},
			},
			Env: env(map[string]string{"A2C_SMCP_a_s": "ENV-A", "HOME": "ENV-HOME"}),
			Run: func(context.Context, string, map[string]string) (string, error) { return "RUN-C", nil },
		}
		servers := []Server{
			{BundleID: "s", Stdio: &Stdio{Command: tmpl, Args: []string{tmpl, "x" + tmpl}, Env: map[string]string{"K": tmpl}, Cwd: tmpl}},
			{BundleID: "s", HTTP: &HTTP{URL: "https://h/" + tmpl, Headers: map[string]string{"H": tmpl}}},
		}
		for _, s := range servers {
			out, err := r.Render(context.Background(), s)
			if err != nil {
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is %T", err, err)
				}
				for _, v := range fuzzValues {
					if strings.Contains(err.Error(), v) && !strings.Contains(tmpl, v) {
						t.Fatalf("error %q holds the value %q", err, v)
					}
				}
				continue
			}
			var texts []string
			if out.Stdio != nil {
				texts = append(texts, out.Stdio.Command, out.Stdio.Cwd, out.Stdio.Env["K"])
				texts = append(texts, out.Stdio.Args...)
				if s.Stdio.Command != tmpl {
					t.Fatal("Render modified its argument")
				}
			}
			if out.HTTP != nil {
				texts = append(texts, out.HTTP.URL, out.HTTP.Headers["H"])
			}
			for _, text := range texts {
				for _, id := range declared {
					if strings.Contains(text, "${input:"+id+"}") {
						t.Fatalf("template %q rendered to %q, which still holds ${input:%s}", tmpl, text, id)
					}
				}
			}
			if !strings.Contains(tmpl, "${") && out.Stdio != nil && out.Stdio.Command != tmpl {
				t.Fatalf("template without placeholders changed: %q -> %q", tmpl, out.Stdio.Command)
			}
		}
	})
}
