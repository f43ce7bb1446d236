package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2c-smcp/a2c-go/smcp"
)

func TestEnvName(t *testing.T) {
	tests := []struct{ id, bundle, tool, want string }{
		{"api_key", "feishu_mcp", "", "A2C_SMCP_api_key_feishu_mcp"},
		{"api-key", "feishu.mcp", "", "A2C_SMCP_api_key_feishu_mcp"},
		{"token", "", "", "A2C_SMCP_token"},
		{"Token", "My-Server", "search.v2", "A2C_SMCP_Token_My_Server_search_v2"},
		{"k", "", "tool", "A2C_SMCP_k_tool"},
		{"密钥", "b", "", "A2C_SMCP____b"},   // one '_' per code point, not per byte
		{"a\xffb", "", "", "A2C_SMCP_a_b"}, // an invalid byte is one code point
		{"a b$c", "x__y", "", "A2C_SMCP_a_b_c_x__y"},
	}
	for _, tt := range tests {
		if got := EnvName(tt.id, tt.bundle, tt.tool); got != tt.want {
			t.Errorf("EnvName(%q, %q, %q) = %q, want %q", tt.id, tt.bundle, tt.tool, got, tt.want)
		}
	}
}

// env returns an Env func backed by m.
func env(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func stdioServer(bundleID string, env map[string]string) Server {
	return Server{BundleID: bundleID, Type: smcp.ServerTypeStdio, Stdio: &Stdio{Command: "c", Env: env}}
}

func TestResolverChain(t *testing.T) {
	in := smcp.MCPServerInput{Type: smcp.InputPromptString, ID: "key", Default: []byte(`"from-default"`)}
	prompt := func(_ context.Context, got smcp.MCPServerInput) (string, error) {
		if got.ID != "key" {
			t.Errorf("prompted for %q", got.ID)
		}
		return "from-prompt", nil
	}
	empty := func(context.Context, smcp.MCPServerInput) (string, error) { return "", nil }
	tests := []struct {
		name   string
		env    map[string]string
		prompt func(context.Context, smcp.MCPServerInput) (string, error)
		in     smcp.MCPServerInput
		want   string
	}{
		{"specific env wins", map[string]string{"A2C_SMCP_key_srv": "specific", "A2C_SMCP_key": "general"}, prompt, in, "specific"},
		{"general env next", map[string]string{"A2C_SMCP_key_other": "x", "A2C_SMCP_key": "general"}, prompt, in, "general"},
		{"empty env value counts", map[string]string{"A2C_SMCP_key": ""}, prompt, in, ""},
		{"prompt next", nil, prompt, in, "from-prompt"},
		{"empty answer takes the default", nil, empty, in, "from-default"},
		{"empty answer without default", nil, empty, smcp.MCPServerInput{Type: smcp.InputPromptString, ID: "key"}, ""},
		{"no terminal takes the default", nil, func(context.Context, smcp.MCPServerInput) (string, error) {
			return "", fmt.Errorf("no tty: %w", ErrNoPrompt)
		}, in, "from-default"},
		{"default last", nil, nil, in, "from-default"},
		{"numeric default", nil, nil, smcp.MCPServerInput{Type: smcp.InputPromptString, ID: "key", Default: []byte(`42`)}, "42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Resolver{Inputs: []smcp.MCPServerInput{tt.in}, Env: env(tt.env), Prompt: tt.prompt}
			s := stdioServer("srv", map[string]string{"K": "<${input:key}>"})
			got, err := r.Render(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if v := got.Stdio.Env["K"]; v != "<"+tt.want+">" {
				t.Errorf("K = %q, want %q", v, "<"+tt.want+">")
			}
		})
	}
}

func TestRenderFields(t *testing.T) {
	r := &Resolver{
		Inputs: []smcp.MCPServerInput{
			{Type: smcp.InputPromptString, ID: "a", Default: []byte(`"A"`)},
			{Type: smcp.InputPromptString, ID: "host", Default: []byte(`"example.com"`)},
		},
		Env: env(map[string]string{"HOME": "/home/u", "TOKEN": "t0k"}),
	}
	s := Server{BundleID: "s", Type: "stdio", Stdio: &Stdio{
		Command: "${env:HOME}/bin/${input:a}",
		Args:    []string{"--a=${input:a}", "${input:a}${input:a}", "$${input:a}", "${HOME}", "${x${input:a}}", "plain"},
		Env:     map[string]string{"T": "${env:TOKEN}", "N": ""},
		Cwd:     "${env:HOME}",
	}}
	s.Raw.Name = "raw"
	got, err := r.Render(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := &Stdio{
		Command: "/home/u/bin/A",
		Args:    []string{"--a=A", "AA", "$A", "${HOME}", "${xA}", "plain"},
		Env:     map[string]string{"T": "t0k", "N": ""},
		Cwd:     "/home/u",
	}
	if !reflect.DeepEqual(got.Stdio, want) {
		t.Errorf("Stdio = %+v, want %+v", got.Stdio, want)
	}
	if s.Stdio.Command != "${env:HOME}/bin/${input:a}" || s.Stdio.Args[0] != "--a=${input:a}" || s.Stdio.Env["T"] != "${env:TOKEN}" {
		t.Error("Render modified its argument")
	}
	if got.Raw.Name != "raw" {
		t.Error("Raw not carried over")
	}

	h := Server{BundleID: "h", Type: "streamable", HTTP: &HTTP{
		URL:     "https://${input:host}/mcp",
		Headers: map[string]string{"Authorization": "Bearer ${env:TOKEN}"},
	}}
	gh, err := r.Render(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if gh.HTTP.URL != "https://example.com/mcp" || gh.HTTP.Headers["Authorization"] != "Bearer t0k" || h.HTTP.URL != "https://${input:host}/mcp" {
		t.Errorf("HTTP = %+v", gh.HTTP)
	}
}

// TestPickString runs the pickString vectors of the conformance tests
// (§5, runtime contract §5.12) that concern resolution: ① a stored value
// matching an option value renders that value (not its label); ② one
// matching none is an invalid_selection error naming the input, never the
// default or the first option; ③ no user value takes the default, else the
// first option, and nothing is stored; ⑥ duplicate labels and values are
// fine. (④, ⑤ and ⑦ are load-time checks: see TestParseErrors.)
func TestPickString(t *testing.T) {
	opts := []smcp.PickStringOption{{Label: "Europe", Value: "eu"}, {Label: "United States", Value: "us"},
		{Label: "Europe", Value: "eu-2"}, {Label: "Also US", Value: "us"}}
	withDefault := smcp.MCPServerInput{Type: smcp.InputPickString, ID: "region", Options: opts, Default: []byte(`"us"`)}
	noDefault := smcp.MCPServerInput{Type: smcp.InputPickString, ID: "region", Options: opts}
	nullDefault := smcp.MCPServerInput{Type: smcp.InputPickString, ID: "region", Options: opts, Default: []byte(`null`)}
	answer := func(a string) func(context.Context, smcp.MCPServerInput) (string, error) {
		return func(context.Context, smcp.MCPServerInput) (string, error) { return a, nil }
	}
	noTerminal := func(context.Context, smcp.MCPServerInput) (string, error) {
		return "", fmt.Errorf("no terminal: %w", ErrNoPrompt)
	}
	const invalid = `server "s": server_parameters.env.R: input "region": invalid_selection: `
	tests := []struct {
		name    string
		in      smcp.MCPServerInput
		env     map[string]string
		prompt  func(context.Context, smcp.MCPServerInput) (string, error)
		want    string
		wantErr string
	}{
		{"1 env value", withDefault, map[string]string{"A2C_SMCP_region": "eu-2"}, nil, "eu-2", ""},
		{"1 server-specific env value", withDefault, map[string]string{"A2C_SMCP_region_s": "eu", "A2C_SMCP_region": "us"}, nil, "eu", ""},
		{"1 answered value", withDefault, nil, answer("eu"), "eu", ""},
		{"1 duplicate value", noDefault, nil, answer("us"), "us", ""},
		{"2 env label is not a value", withDefault, map[string]string{"A2C_SMCP_region": "Europe"}, nil, "",
			invalid + `environment variable A2C_SMCP_region is the value of none of its options`},
		{"2 env value gone", withDefault, map[string]string{"A2C_SMCP_region": "mars-SECRET"}, answer("eu"), "",
			invalid + `environment variable A2C_SMCP_region is the value of none of its options`},
		{"2 empty env value", noDefault, map[string]string{"A2C_SMCP_region": ""}, nil, "",
			invalid + `environment variable A2C_SMCP_region is the value of none of its options`},
		{"2 answer not a value", withDefault, nil, answer("mars-SECRET"), "",
			invalid + `the answer is the value of none of its options`},
		{"3 empty answer takes the default", withDefault, nil, answer(""), "us", ""},
		{"3 no prompt takes the default", withDefault, nil, nil, "us", ""},
		{"3 no terminal takes the default", withDefault, nil, noTerminal, "us", ""},
		{"3 no default takes the first option", noDefault, nil, answer(""), "eu", ""},
		{"3 null default takes the first option", nullDefault, nil, nil, "eu", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Resolver{Inputs: []smcp.MCPServerInput{tt.in}, Env: env(tt.env), Prompt: tt.prompt}
			got, err := r.Render(context.Background(), stdioServer("s", map[string]string{"R": "${input:region}"}))
			if tt.wantErr != "" {
				var ce *Error
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrInvalidSelection) || !errors.As(err, &ce) ||
					ce.Input != "region" || ce.Category() != CategoryInvalidSelection {
					t.Fatalf("error = %#v\nwant %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Errorf("error quotes the value: %v", err)
				}
				return
			}
			if err != nil || got.Stdio.Env["R"] != tt.want {
				t.Fatalf("R = %q, %v; want %q", got.Stdio.Env["R"], err, tt.want)
			}
		})
	}

	// ③ The first option is never stored: once the options change, the
	// next rendering takes the new first one.
	r := &Resolver{Inputs: []smcp.MCPServerInput{noDefault}, Env: env(nil), Prompt: answer("")}
	s := stdioServer("s", map[string]string{"R": "${input:region}"})
	if got, err := r.Render(context.Background(), s); err != nil || got.Stdio.Env["R"] != "eu" {
		t.Fatalf("first = %v, %v", got.Stdio, err)
	}
	changed := noDefault
	changed.Options = []smcp.PickStringOption{{Label: "Asia", Value: "ap"}, {Label: "Europe", Value: "eu"}}
	r.SetInputs([]smcp.MCPServerInput{changed})
	if got, err := r.Render(context.Background(), s); err != nil || got.Stdio.Env["R"] != "ap" {
		t.Fatalf("after the options changed = %v, %v", got.Stdio, err)
	}

	// ② A stored answer whose option has gone is invalid, not replaced.
	r2 := &Resolver{Inputs: []smcp.MCPServerInput{withDefault}, Env: env(nil), Prompt: answer("eu-2")}
	if got, err := r2.Render(context.Background(), s); err != nil || got.Stdio.Env["R"] != "eu-2" {
		t.Fatalf("stored = %v, %v", got.Stdio, err)
	}
	gone := withDefault
	gone.Options = opts[:2]
	r2.SetInputs([]smcp.MCPServerInput{gone})
	if _, err := r2.Render(context.Background(), s); !errors.Is(err, ErrInvalidSelection) {
		t.Fatalf("stored answer no longer an option: %v", err)
	}

	// A default outside the options (possible when Inputs are built by
	// hand) is rejected too.
	bad := withDefault
	bad.Default = []byte(`"mars"`)
	r3 := &Resolver{Inputs: []smcp.MCPServerInput{bad}, Env: env(nil)}
	if _, err := r3.Render(context.Background(), s); !errors.Is(err, ErrInvalidSelection) {
		t.Errorf("bad default: %v", err)
	}
}

// TestReresolution runs the input re-resolution vectors (conformance §5,
// runtime contract §5.13) that a Resolver decides: every Render resolves
// anew (① a start and ② a restart see the latest values: the environment is
// read again, a command run again); ⑤ within one Render an input is
// resolved once; a prompted answer is the user's stored value, asked once.
// (③, ④ and ⑥ concern when the Computer renders: see package computer.)
func TestReresolution(t *testing.T) {
	var runs atomic.Int32
	var prompts atomic.Int32
	vars := map[string]string{"A2C_SMCP_fromenv": "e1"}
	var mu sync.Mutex
	r := &Resolver{
		Inputs: []smcp.MCPServerInput{
			{Type: smcp.InputCommand, ID: "cmd", Command: "gen"},
			{Type: smcp.InputPromptString, ID: "fromenv"},
			{Type: smcp.InputPromptString, ID: "asked"},
		},
		Env: func(name string) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			v, ok := vars[name]
			return v, ok
		},
		Run: func(context.Context, string, map[string]string) (string, error) {
			return fmt.Sprintf("run-%d\n", runs.Add(1)), nil
		},
		Prompt: func(context.Context, smcp.MCPServerInput) (string, error) {
			return fmt.Sprintf("answer-%d", prompts.Add(1)), nil
		},
	}
	s := Server{BundleID: "s", Stdio: &Stdio{Command: "c", Args: []string{"${input:cmd}", "x${input:cmd}"},
		Env: map[string]string{"A": "${input:cmd}", "E": "${input:fromenv}", "P": "${input:asked}", "P2": "${input:asked}"}}}
	render := func() *Stdio {
		t.Helper()
		got, err := r.Render(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		return got.Stdio
	}
	first := render()
	if first.Args[0] != "run-1" || first.Args[1] != "xrun-1" || first.Env["A"] != "run-1" || runs.Load() != 1 {
		t.Errorf("one render ran the command %d times: %v %v", runs.Load(), first.Args, first.Env)
	}
	if first.Env["E"] != "e1" || first.Env["P"] != "answer-1" || first.Env["P2"] != "answer-1" {
		t.Errorf("first env = %v", first.Env)
	}
	mu.Lock()
	vars["A2C_SMCP_fromenv"] = "e2"
	mu.Unlock()
	second := render()
	if second.Args[0] != "run-2" || second.Env["A"] != "run-2" || second.Env["E"] != "e2" || second.Env["P"] != "answer-1" {
		t.Errorf("second render = %v %v; want a new command run, the new env value and the stored answer", second.Args, second.Env)
	}
	if prompts.Load() != 1 {
		t.Errorf("asked %d times, want once", prompts.Load())
	}
	// The rendering given out is a copy: the raw configuration is untouched.
	if s.Stdio.Args[0] != "${input:cmd}" || s.Stdio.Env["A"] != "${input:cmd}" {
		t.Errorf("Render changed its argument: %v", s.Stdio)
	}
}

func TestCommandInput(t *testing.T) {
	in := smcp.MCPServerInput{Type: smcp.InputCommand, ID: "tok", Command: "pass", Args: map[string]string{"entry": "mcp/tok"}}
	var calls atomic.Int32
	run := func(_ context.Context, command string, args map[string]string) (string, error) {
		calls.Add(1)
		if command != "pass" || args["entry"] != "mcp/tok" {
			return "", fmt.Errorf("unexpected call %q %v", command, args)
		}
		return "RUN-SECRET-77\n", nil
	}
	r := &Resolver{Inputs: []smcp.MCPServerInput{in}, Env: env(nil), Run: run,
		Prompt: func(context.Context, smcp.MCPServerInput) (string, error) {
			t.Error("a command input must not prompt")
			return "", nil
		}}
	s := stdioServer("s", map[string]string{"A": "${input:tok}", "B": "x${input:tok}"})
	got, err := r.Render(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stdio.Env["A"] != "RUN-SECRET-77" || got.Stdio.Env["B"] != "xRUN-SECRET-77" || calls.Load() != 1 {
		t.Errorf("env = %v, calls = %d", got.Stdio.Env, calls.Load())
	}

	// The environment still wins over the command.
	r2 := &Resolver{Inputs: []smcp.MCPServerInput{in}, Env: env(map[string]string{"A2C_SMCP_tok_s": "e"}), Run: run}
	if got, err := r2.Render(context.Background(), s); err != nil || got.Stdio.Env["A"] != "e" {
		t.Errorf("env override: %v %v", got.Stdio, err)
	}

	// Without a runner.
	r3 := &Resolver{Inputs: []smcp.MCPServerInput{in}, Env: env(nil)}
	_, err = r3.Render(context.Background(), s)
	want := `server "s": server_parameters.env.A: input "tok": no value: command inputs cannot run here; set A2C_SMCP_tok_s or A2C_SMCP_tok`
	if err == nil || err.Error() != want || !errors.Is(err, ErrNoValue) {
		t.Errorf("no runner: %v", err)
	}

	// A failing runner is wrapped.
	boom := errors.New("exit status 1")
	r4 := &Resolver{Inputs: []smcp.MCPServerInput{in}, Env: env(nil),
		Run: func(context.Context, string, map[string]string) (string, error) { return "", boom }}
	_, err = r4.Render(context.Background(), s)
	if !errors.Is(err, boom) || err.Error() != `server "s": server_parameters.env.A: input "tok": running its command: exit status 1` {
		t.Errorf("runner error: %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	inputs := []smcp.MCPServerInput{
		{Type: smcp.InputPromptString, ID: "k"},
		{Type: smcp.InputPromptString, ID: "host", Default: []byte(`"not a host/SECRET-HOST"`)},
	}
	promptErr := errors.New("no terminal")
	tests := []struct {
		name   string
		s      Server
		prompt func(context.Context, smcp.MCPServerInput) (string, error)
		want   string
		is     error
	}{
		{"missing value", stdioServer("srv", map[string]string{"K": "${input:k}"}), nil,
			`server "srv": server_parameters.env.K: input "k": no value; set A2C_SMCP_k_srv or A2C_SMCP_k`, ErrNoValue},
		{"unknown input", Server{BundleID: "srv", Stdio: &Stdio{Command: "${input:nope}"}}, nil,
			`server "srv": server_parameters.command: input "nope": unknown input`, ErrUnknownInput},
		{"missing env", Server{BundleID: "srv", Stdio: &Stdio{Command: "c", Args: []string{"ok", "${env:NOPE}"}}}, nil,
			`server "srv": server_parameters.args[1]: environment variable "NOPE": no value`, ErrNoValue},
		{"empty env name", Server{BundleID: "srv", Stdio: &Stdio{Command: "c", Cwd: "${env:}"}}, nil,
			`server "srv": server_parameters.cwd: ${env:}: no value: empty variable name`, ErrNoValue},
		{"unterminated", Server{BundleID: "srv", Stdio: &Stdio{Command: "c", Args: []string{"${input:k"}}}, nil,
			`server "srv": server_parameters.args[0]: malformed ${input:...} or ${env:...} placeholder`, nil},
		{"nested", Server{BundleID: "srv", HTTP: &HTTP{URL: "https://h/", Headers: map[string]string{"X Y": "${input:${env:V}}"}}}, nil,
			`server "srv": server_parameters.headers["X Y"]: malformed ${input:...} or ${env:...} placeholder`, nil},
		{"prompt fails", stdioServer("srv", map[string]string{"K": "${input:k}"}),
			func(context.Context, smcp.MCPServerInput) (string, error) { return "", promptErr },
			`server "srv": server_parameters.env.K: input "k": prompt: no terminal`, promptErr},
		{"no terminal and no default", stdioServer("srv", map[string]string{"K": "${input:k}"}),
			func(context.Context, smcp.MCPServerInput) (string, error) {
				return "", fmt.Errorf("x: %w", ErrNoPrompt)
			},
			`server "srv": server_parameters.env.K: input "k": no value; set A2C_SMCP_k_srv or A2C_SMCP_k`, ErrNoValue},
		{"bad URL after substitution", Server{BundleID: "srv", HTTP: &HTTP{URL: "https://${input:host}/mcp"}}, nil,
			`server "srv": server_parameters.url: not an absolute http or https URL after substitution`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Resolver{Inputs: inputs, Env: env(map[string]string{"V": "k"}), Prompt: tt.prompt}
			_, err := r.Render(context.Background(), tt.s)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n got: %v\nwant: %s", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Server != "srv" || ce.Index != -1 {
				t.Errorf("error %#v", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error does not wrap %v", tt.is)
			}
			wantCat := CategoryValidation
			if tt.is == ErrNoValue || tt.is == ErrUnknownInput {
				wantCat = CategoryMissingInput
			}
			if ce != nil && ce.Category() != wantCat {
				t.Errorf("category = %s, want %s", ce.Category(), wantCat)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error leaks a value: %v", err)
			}
		})
	}
}

// TestRenderErrorsHoldNoSecrets resolves real values and then fails on a
// later field: the message may name inputs and variables, never values.
func TestRenderErrorsHoldNoSecrets(t *testing.T) {
	const secret = "RESOLVED-SECRET-991"
	r := &Resolver{
		Inputs: []smcp.MCPServerInput{
			{Type: smcp.InputPromptString, ID: "k", Password: ptr(true)},
			{Type: smcp.InputPickString, ID: "p", Options: []smcp.PickStringOption{{Label: "A", Value: "a"}}},
		},
		Env: env(map[string]string{"A2C_SMCP_k": secret, "A2C_SMCP_p": secret, "SECRET_VAR": secret}),
	}
	servers := []Server{
		{BundleID: "s", HTTP: &HTTP{URL: "https://h/?t=${input:k}&${env:SECRET_VAR}", Headers: map[string]string{"A": "${input:missing}"}}},
		{BundleID: "s", HTTP: &HTTP{URL: "${input:k}"}},
		{BundleID: "s", HTTP: &HTTP{URL: "ftp://${env:SECRET_VAR}/"}},
		{BundleID: "s", Stdio: &Stdio{Command: "${input:k}", Args: []string{"${input:p}"}}},
		{BundleID: "s", Stdio: &Stdio{Command: "${env:SECRET_VAR}", Env: map[string]string{"X": "${env:MISSING}"}}},
	}
	for i, s := range servers {
		_, err := r.Render(context.Background(), s)
		if err == nil {
			t.Errorf("server %d: no error", i)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "991") {
			t.Errorf("server %d: error leaks the value: %v", i, err)
		}
	}
}

func TestResolverCache(t *testing.T) {
	var prompts atomic.Int32
	r := &Resolver{
		Inputs: []smcp.MCPServerInput{{Type: smcp.InputPromptString, ID: "k"}},
		Env:    env(nil),
		Prompt: func(_ context.Context, in smcp.MCPServerInput) (string, error) {
			return fmt.Sprintf("answer-%d", prompts.Add(1)), nil
		},
	}
	ctx := context.Background()
	a := stdioServer("a", map[string]string{"X": "${input:k}", "Y": "${input:k}"})
	b := stdioServer("b", map[string]string{"X": "${input:k}"})
	ga, err := r.Render(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	ga2, _ := r.Render(ctx, a)
	gb, _ := r.Render(ctx, b)
	if ga.Stdio.Env["X"] != "answer-1" || ga.Stdio.Env["Y"] != "answer-1" || ga2.Stdio.Env["X"] != "answer-1" || gb.Stdio.Env["X"] != "answer-2" {
		t.Errorf("a = %v, a again = %v, b = %v", ga.Stdio.Env, ga2.Stdio.Env, gb.Stdio.Env)
	}
	r.Forget("a")
	ga3, _ := r.Render(ctx, a)
	gb2, _ := r.Render(ctx, b)
	if ga3.Stdio.Env["X"] != "answer-3" || gb2.Stdio.Env["X"] != "answer-2" {
		t.Errorf("after Forget(a): a = %v, b = %v", ga3.Stdio.Env, gb2.Stdio.Env)
	}
	r.Forget("")
	gb3, _ := r.Render(ctx, b)
	if gb3.Stdio.Env["X"] != "answer-4" {
		t.Errorf("after Forget(\"\"): b = %v", gb3.Stdio.Env)
	}

	// Failures are not cached.
	fail := true
	r2 := &Resolver{Inputs: r.Inputs, Env: env(nil), Prompt: func(context.Context, smcp.MCPServerInput) (string, error) {
		if fail {
			return "", errors.New("cancelled by user")
		}
		return "ok", nil
	}}
	if _, err := r2.Render(ctx, a); err == nil {
		t.Fatal("want an error")
	}
	fail = false
	if g, err := r2.Render(ctx, a); err != nil || g.Stdio.Env["X"] != "ok" {
		t.Errorf("retry: %v, %v", g.Stdio, err)
	}
}

func TestResolverConcurrent(t *testing.T) {
	var prompts atomic.Int32
	release := make(chan struct{})
	r := &Resolver{
		Inputs: []smcp.MCPServerInput{{Type: smcp.InputPromptString, ID: "k"}},
		Env:    env(nil),
		Prompt: func(context.Context, smcp.MCPServerInput) (string, error) {
			prompts.Add(1)
			<-release
			return "v", nil
		},
	}
	s := stdioServer("a", map[string]string{"X": "${input:k}"})
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := r.Render(context.Background(), s)
			if err == nil {
				results[i] = g.Stdio.Env["X"]
			}
		}()
	}
	close(release)
	wg.Wait()
	for i, v := range results {
		if v != "v" {
			t.Errorf("goroutine %d got %q", i, v)
		}
	}
	if n := prompts.Load(); n != 1 {
		t.Errorf("prompted %d times, want 1", n)
	}

	// A waiter gives up with its context.
	block := make(chan struct{})
	defer close(block)
	started := make(chan struct{})
	r2 := &Resolver{Inputs: r.Inputs, Env: env(nil), Prompt: func(context.Context, smcp.MCPServerInput) (string, error) {
		close(started)
		<-block
		return "late", nil
	}}
	go r2.Render(context.Background(), s)
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r2.Render(ctx, s); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: %v", err)
	}
}

func TestScanPlaceholders(t *testing.T) {
	tests := []struct {
		in        string
		want      []string
		malformed bool
	}{
		{"", nil, false},
		{"plain", nil, false},
		{"${input:a}", []string{"input:a"}, false},
		{"x${env:A}y${input:b}z", []string{"env:A", "input:b"}, false},
		{"${HOME}", nil, false},
		{"${x${input:a}}", []string{"input:a"}, false},
		{"}${input:a}", []string{"input:a"}, false},
		{"${input:a", nil, true},
		{"${env:", nil, true},
		{"${input:${input:a}}", []string{"input:a"}, true},
		{"${input:}", []string{"input:"}, false},
		{"$${input:a}}", []string{"input:a"}, false},
	}
	for _, tt := range tests {
		phs, bad := scanPlaceholders(tt.in)
		var got []string
		for _, p := range phs {
			kind := "env:"
			if p.input {
				kind = "input:"
			}
			got = append(got, kind+p.name)
			if tt.in[p.start:p.end] != "${"+kind+p.name+"}" {
				t.Errorf("%q: span %q", tt.in, tt.in[p.start:p.end])
			}
		}
		if !reflect.DeepEqual(got, tt.want) || bad != tt.malformed {
			t.Errorf("scanPlaceholders(%q) = %q, %v; want %q, %v", tt.in, got, bad, tt.want, tt.malformed)
		}
	}
}
