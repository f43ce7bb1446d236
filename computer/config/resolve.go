package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// EnvPrefix starts the name of every environment variable that supplies an
// input; see [EnvName].
const EnvPrefix = "A2C_SMCP_"

// EnvName returns the environment variable that supplies input inputID:
// [EnvPrefix] followed by the input id and, when not empty, "_" and the
// bundle_id and "_" and the tool name. In each part every code point other
// than an ASCII letter, digit or '_' becomes '_'; case is kept. For example
// EnvName("api-key", "feishu.mcp", "") is "A2C_SMCP_api_key_feishu_mcp".
func EnvName(inputID, bundleID, tool string) string {
	var b strings.Builder
	b.WriteString(EnvPrefix)
	envSegment(&b, inputID)
	if bundleID != "" {
		b.WriteByte('_')
		envSegment(&b, bundleID)
	}
	if tool != "" {
		b.WriteByte('_')
		envSegment(&b, tool)
	}
	return b.String()
}

func envSegment(b *strings.Builder, s string) {
	for _, r := range s {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
}

// Resolver substitutes the ${input:ID} and ${env:NAME} placeholders of a
// [Server]. A Resolver is safe for concurrent use and must not be copied
// after first use.
//
// Every [Resolver.Render] resolves the inputs it meets afresh: the
// Computer renders a server's raw configuration before each real start of
// it (the first, and every restart), so that a start never reuses an
// earlier rendering (0.3.2, runtime contract §5.13). Within one Render an
// input is resolved once, however often it appears. An input's value comes
// from the first of:
//
//  1. the environment variable EnvName(id, bundle_id, ""), then
//     EnvName(id, "", "") (see [EnvName]), read anew each time;
//  2. for a command input, Run, run anew each time (its output is never
//     kept); for any other input, the user's answer: the stored one if
//     the user was asked before for this server, else Prompt's, which is
//     then stored (per input id and bundle_id, so that servers do not see
//     each other's answers, until [Resolver.Forget]);
//  3. when there is no user value (no answer, an empty answer, or a Prompt
//     error wrapping [ErrNoPrompt]), the input's default;
//  4. for a pickString, its first option's value (never stored).
//
// A pickString value from the environment or the user must be the value
// of one of its options, or Render fails with [ErrInvalidSelection]: it
// never falls back to the default or the first option. ${env:NAME} reads
// Env(NAME) and nothing else. Substitution makes a single pass: a
// substituted value is never scanned for placeholders.
type Resolver struct {
	// Inputs are the declared inputs, usually [File].Inputs. Set it before
	// the first Render; later, use [Resolver.SetInputs].
	Inputs []smcp.MCPServerInput
	// Env looks up an environment variable; nil means [os.LookupEnv].
	Env func(name string) (string, bool)
	// Prompt asks the user for the value of a promptString or pickString
	// input; nil means there is nobody to ask. An error wrapping
	// [ErrNoPrompt] means the same; any other error is wrapped in the
	// error of Render, so it must not contain the answer.
	Prompt func(ctx context.Context, in smcp.MCPServerInput) (string, error)
	// Run runs the command of a command input, with its args, and returns
	// its output; one trailing line break is removed. nil makes command
	// inputs fail unless the environment supplies them. Its error is
	// wrapped in the error of Render, so it must not contain the output.
	Run func(ctx context.Context, command string, args map[string]string) (string, error)

	mu      sync.Mutex
	answers map[cacheKey]*cacheEntry // the user's stored answers
}

type cacheKey struct{ input, bundleID string }

// cacheEntry is one asked question: done closes when the answer (or a
// failure, which is not kept) is known.
type cacheEntry struct {
	done chan struct{}
	val  string
	err  error
}

// SetInputs replaces the declared inputs, as a configuration reload does.
// Stored answers are kept, and checked against the new declarations when
// next used.
func (r *Resolver) SetInputs(inputs []smcp.MCPServerInput) {
	r.mu.Lock()
	r.Inputs = inputs
	r.mu.Unlock()
}

func (r *Resolver) inputs() []smcp.MCPServerInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Inputs
}

// Forget drops the stored answers of the server bundleID, or of every
// server when bundleID is "", so that the next Render asks again.
func (r *Resolver) Forget(bundleID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.answers {
		if bundleID == "" || k.bundleID == bundleID {
			delete(r.answers, k)
		}
	}
}

// Render returns a copy of s whose Stdio (Command, Args, Env values, Cwd)
// or HTTP (URL, Headers values) have their placeholders substituted, every
// input resolved anew (see [Resolver]). The
// copy has its own Stdio and HTTP; the other fields, Raw included, are
// shared with s and unchanged. After substitution the URL must be an
// absolute http or https URL.
//
// The error is an [*Error] naming the server by bundle_id, the field and,
// when an input caused it, the input (Input); it wraps [ErrUnknownInput],
// [ErrNoValue] or [ErrInvalidSelection] when one of those is the cause (see
// [Error.Category]), and never contains a value.
func (r *Resolver) Render(ctx context.Context, s Server) (Server, error) {
	out := s
	var err error
	rc := &rendering{r: r, bundleID: s.BundleID, inputs: r.inputs(), memo: map[string]string{}}
	sub := func(field, text string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = rc.expand(ctx, field, text)
		return v
	}
	if s.Stdio != nil {
		st := *s.Stdio
		st.Command = sub("server_parameters.command", s.Stdio.Command)
		if s.Stdio.Args != nil {
			st.Args = make([]string, len(s.Stdio.Args))
			for i, a := range s.Stdio.Args {
				st.Args[i] = sub(fmt.Sprintf("server_parameters.args[%d]", i), a)
			}
		}
		if s.Stdio.Env != nil {
			st.Env = make(map[string]string, len(s.Stdio.Env))
			for _, k := range sortedKeys(s.Stdio.Env) {
				st.Env[k] = sub(joinPath([]string{"server_parameters.env", pathKey(k)}), s.Stdio.Env[k])
			}
		}
		st.Cwd = sub("server_parameters.cwd", s.Stdio.Cwd)
		out.Stdio = &st
	}
	if s.HTTP != nil {
		h := *s.HTTP
		h.URL = sub("server_parameters.url", s.HTTP.URL)
		if err == nil && !validHTTPURL(h.URL) {
			err = &Error{Server: s.BundleID, Index: -1, Field: "server_parameters.url",
				Message: "not an absolute http or https URL after substitution"}
		}
		if s.HTTP.Headers != nil {
			h.Headers = make(map[string]string, len(s.HTTP.Headers))
			for _, k := range sortedKeys(s.HTTP.Headers) {
				h.Headers[k] = sub(joinPath([]string{"server_parameters.headers", pathKey(k)}), s.HTTP.Headers[k])
			}
		}
		out.HTTP = &h
	}
	if err != nil {
		return Server{}, err
	}
	// Every value an input gave (a password, a command's output, any) is
	// the caller's to keep out of what it shows: see Server.Secrets.
	out.Secrets = nil
	for _, v := range rc.memo {
		if len(v) >= minSecret && !slices.Contains(out.Secrets, v) {
			out.Secrets = append(out.Secrets, v)
		}
	}
	return out, nil
}

// minSecret is the shortest input value Server.Secrets holds: a shorter
// one masked in a message would mask words, not secrets.
const minSecret = 4

// placeholder is one ${input:ID} or ${env:NAME} in a string, at
// text[start:end].
type placeholder struct {
	start, end int
	input      bool
	name       string
}

// scanPlaceholders finds the placeholders of text. A placeholder runs from
// "${" to the first '}' after it, and its body may not contain "${" (the
// innermost candidate wins). malformed reports a "${input:" or "${env:"
// that does not begin a placeholder, such as an unterminated one. Other
// "${...}" text is left alone.
func scanPlaceholders(text string) (phs []placeholder, malformed bool) {
	lit := 0 // start of the current literal run
	for i := 0; i < len(text); {
		rel := strings.IndexByte(text[i:], '}')
		if rel < 0 {
			break
		}
		closeAt := i + rel
		open := strings.LastIndex(text[i:closeAt], "${")
		if open >= 0 {
			open += i
			body := text[open+2 : closeAt]
			ph := placeholder{start: open, end: closeAt + 1}
			ok := true
			switch {
			case strings.HasPrefix(body, "input:"):
				ph.input, ph.name = true, body[len("input:"):]
			case strings.HasPrefix(body, "env:"):
				ph.name = body[len("env:"):]
			default:
				ok = false
			}
			if ok {
				malformed = malformed || hasPlaceholderPrefix(text[lit:open])
				phs = append(phs, ph)
				lit = ph.end
			}
		}
		i = closeAt + 1
	}
	malformed = malformed || hasPlaceholderPrefix(text[lit:])
	return phs, malformed
}

func hasPlaceholderPrefix(s string) bool {
	return strings.Contains(s, "${input:") || strings.Contains(s, "${env:")
}

// rendering is the state of one Render: the inputs as they were when it
// began, and the values resolved so far (so that an input used twice is
// resolved, and a command run, once).
type rendering struct {
	r        *Resolver
	bundleID string
	inputs   []smcp.MCPServerInput
	memo     map[string]string
}

// expand substitutes the placeholders of text, a field of the server.
func (rc *rendering) expand(ctx context.Context, field, text string) (string, error) {
	phs, malformed := scanPlaceholders(text)
	fail := func(msg, input string, err error) error {
		return &Error{Server: rc.bundleID, Index: -1, Field: field, Input: input, Message: msg, Err: err}
	}
	if malformed {
		return "", fail("malformed ${input:...} or ${env:...} placeholder", "", nil)
	}
	if len(phs) == 0 {
		return text, nil
	}
	var b strings.Builder
	last := 0
	for _, ph := range phs {
		b.WriteString(text[last:ph.start])
		last = ph.end
		var v, input string
		var err error
		if ph.input {
			input = ph.name
			v, err = rc.input(ctx, ph.name)
		} else {
			v, err = rc.r.env(ph.name)
		}
		if err != nil {
			return "", fail("", input, err)
		}
		b.WriteString(v)
	}
	b.WriteString(text[last:])
	return b.String(), nil
}

func (r *Resolver) lookupEnv(name string) (string, bool) {
	if r.Env != nil {
		return r.Env(name)
	}
	return os.LookupEnv(name)
}

func (r *Resolver) env(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("${env:}: %w: empty variable name", ErrNoValue)
	}
	v, ok := r.lookupEnv(name)
	if !ok {
		return "", fmt.Errorf("environment variable %s: %w", quote(name), ErrNoValue)
	}
	return v, nil
}

// input returns the value of input id in this rendering.
func (rc *rendering) input(ctx context.Context, id string) (string, error) {
	if v, ok := rc.memo[id]; ok {
		return v, nil
	}
	var in *smcp.MCPServerInput
	for i := range rc.inputs {
		if rc.inputs[i].ID == id {
			in = &rc.inputs[i]
			break
		}
	}
	if in == nil {
		return "", fmt.Errorf("input %s: %w", quote(id), ErrUnknownInput)
	}
	v, err := rc.r.resolve(ctx, *in, rc.bundleID)
	if err != nil {
		return "", err
	}
	rc.memo[id] = v
	return v, nil
}

// resolve runs the resolution chain of in for server bundleID.
func (r *Resolver) resolve(ctx context.Context, in smcp.MCPServerInput, bundleID string) (string, error) {
	names := []string{EnvName(in.ID, "", "")}
	if bundleID != "" {
		names = []string{EnvName(in.ID, bundleID, ""), names[0]}
	}
	for _, name := range names {
		if v, ok := r.lookupEnv(name); ok {
			return checkOption(in, v, "environment variable "+name)
		}
	}
	if in.Type == smcp.InputCommand {
		if r.Run == nil {
			return "", fmt.Errorf("input %s: %w: command inputs cannot run here; set %s", quote(in.ID), ErrNoValue, strings.Join(names, " or "))
		}
		out, err := r.Run(ctx, in.Command, in.Args)
		if err != nil {
			return "", fmt.Errorf("input %s: running its command: %w", quote(in.ID), err)
		}
		out = strings.TrimSuffix(out, "\n")
		out = strings.TrimSuffix(out, "\r")
		return out, nil
	}
	asked := false
	if r.Prompt != nil {
		v, err := r.answer(ctx, in, bundleID)
		switch {
		case errors.Is(err, ErrNoPrompt):
		case err != nil:
			return "", fmt.Errorf("input %s: prompt: %w", quote(in.ID), err)
		case v != "":
			return checkOption(in, v, "the answer")
		default:
			asked = true
		}
	}
	// No user value: the default, else a pickString's first option. The
	// default was checked at load, but Inputs may be built by hand.
	if def, ok := defaultValue(in.Default); ok {
		return checkOption(in, def, "the default")
	}
	if in.Type == smcp.InputPickString && len(in.Options) > 0 {
		return in.Options[0].Value, nil
	}
	if asked && in.Type == smcp.InputPromptString {
		return "", nil // asked, and answered with nothing
	}
	return "", fmt.Errorf("input %s: %w; set %s", quote(in.ID), ErrNoValue, strings.Join(names, " or "))
}

// answer returns the user's answer for in and server bundleID: the stored
// one, or Prompt's, which is then stored. Concurrent calls for one key
// share one question; failures are not stored.
func (r *Resolver) answer(ctx context.Context, in smcp.MCPServerInput, bundleID string) (string, error) {
	key := cacheKey{in.ID, bundleID}
	r.mu.Lock()
	if e, ok := r.answers[key]; ok {
		r.mu.Unlock()
		select {
		case <-e.done:
			return e.val, e.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if r.answers == nil {
		r.answers = map[cacheKey]*cacheEntry{}
	}
	e := &cacheEntry{done: make(chan struct{})}
	r.answers[key] = e
	r.mu.Unlock()

	e.val, e.err = r.Prompt(ctx, in)
	if e.err != nil {
		e.val = ""
		r.mu.Lock()
		if r.answers[key] == e {
			delete(r.answers, key)
		}
		r.mu.Unlock()
	}
	close(e.done)
	return e.val, e.err
}

// checkOption returns v when in allows it; source names where v came from.
func checkOption(in smcp.MCPServerInput, v, source string) (string, error) {
	if in.Type == smcp.InputPickString && !in.HasOption(v) {
		return "", fmt.Errorf("input %s: %w: %s is the value of none of its options", quote(in.ID), ErrInvalidSelection, source)
	}
	return v, nil
}

// defaultValue returns an input's default as text: a JSON string's value,
// or the JSON text of another non-null scalar.
func defaultValue(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false
	}
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case bool, float64:
		return strings.TrimSpace(string(raw)), true
	}
	return "", false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
