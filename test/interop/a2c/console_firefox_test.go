package a2c

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// TestConsoleFirefox drives the hub's web console (server/console) in
// Debian's firefox-esr over WebDriver BiDi, through "a2c up" with a
// token: the login typed with the keyboard, the offices, a tool call from
// a Computer's form, the live calls, the call's trace and the sandbox's
// files (opened, edited and saved with Ctrl+S). Every step fails on a
// JavaScript error or a console error, and takes a screenshot
// (A2C_FIREFOX_SHOTS=dir keeps them). TestConsole is the same walk, and
// more, in Chromium.
func TestConsoleFirefox(t *testing.T) {
	requireLinux(t)
	start := time.Now()
	b := harness.Firefox(t, harness.FirefoxOptions{})
	t.Logf("firefox-esr listening after %s", time.Since(start).Round(time.Millisecond))
	token := fmt.Sprintf("console-%016x", rand.Uint64())
	u := startUp(t, "--token", token)
	base := u.URL
	if m := consURLRE.FindStringSubmatch(u.Logs()); m != nil {
		base = strings.TrimRight(m[1], "/")
	}
	p := ffOpen(t, b)
	t.Logf("a2c up ready and a tab open after %s", time.Since(start).Round(time.Millisecond))
	var reqID, detail string // the form's call, and its page

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"login", func(t *testing.T) {
			p.navigate(t, base+"/")
			p.waitJS(t, `!!document.getElementById('token')`)
			p.named(t, "", "Token", "input") // a password field: no role of its own
			p.named(t, "button", "Sign in", "button")
			p.focus(t, "Token")
			p.keys(t, ffText(token), ffKey(ffEnter))
			p.waitJS(t, `location.hash === '#/offices' && document.querySelector('h1')?.textContent === 'Offices'`)
			var got struct {
				Cookies []struct {
					Name  string `json:"name"`
					Value struct {
						Value string `json:"value"`
					} `json:"value"`
					Path     string `json:"path"`
					HTTPOnly bool   `json:"httpOnly"`
					SameSite string `json:"sameSite"`
				} `json:"cookies"`
			}
			p.call(t, "storage.getCookies", map[string]any{"filter": map[string]any{"name": "a2c_console"}}, &got)
			if len(got.Cookies) != 1 {
				t.Fatalf("a2c_console cookies in Firefox: %+v, want one", got.Cookies)
			}
			if c := got.Cookies[0]; !c.HTTPOnly || c.SameSite != "strict" || c.Path != "/" || strings.Contains(c.Value.Value, token) {
				t.Errorf("cookie a2c_console: httpOnly=%t sameSite=%q path=%q (value holds the token: %t), want HttpOnly, strict, /, a session id",
					c.HTTPOnly, c.SameSite, c.Path, strings.Contains(c.Value.Value, token))
			}
			if js := p.eval(t, `document.cookie`); strings.Contains(js, "a2c_console") {
				t.Errorf("document.cookie shows the session cookie: %q", js)
			}
			p.shot(t, "login")
		}},
		{"offices", func(t *testing.T) {
			p.waitJS(t, `[...document.querySelectorAll('main tr')].some(r => r.querySelector('a')?.textContent === 'sandbox' && r.textContent.includes('computer'))`)
			p.shot(t, "offices")
		}},
		{"form", func(t *testing.T) {
			p.hash(t, "#/offices/default/computers/sandbox")
			p.waitJS(t, `!!document.querySelector('nav a[href$="/tools/sandbox__sandbox_execute_bash"]')`)
			p.eval(t, `(() => { document.querySelector('nav a[href$="/tools/sandbox__sandbox_execute_bash"]').focus(); return '' })()`)
			p.keys(t, ffKey(ffEnter))
			p.waitJS(t, `document.querySelector('h2.tool-title')?.textContent === 'sandbox__sandbox_execute_bash' && !!document.querySelector('main form button[type=submit]')`)
			p.named(t, "button", "Call tool", "button")
			p.focus(t, "cmd")
			p.keys(t, ffText("echo hello-firefox"))
			p.tabTo(t, `main form button[type=submit]`)
			p.keys(t, ffText(" "))
			p.waitJS(t, `[...document.querySelectorAll('.result pre.text')].some(e => e.textContent.includes('hello-firefox'))`)
			detail = p.eval(t, `document.querySelector('.result-card a[href^="#/calls/"]').getAttribute('href')`)
			parts := strings.Split(detail, "/")
			if len(parts) != 4 || parts[2] == "" || parts[3] == "" {
				t.Fatalf("call detail link %q", detail)
			}
			reqID = parts[3]
			p.shot(t, "form")
		}},
		{"calls", func(t *testing.T) {
			p.hash(t, "#/calls")
			p.waitJS(t, fmt.Sprintf(`!!document.querySelector('tr[data-key$="%s"] .badge.console')`, reqID))
			p.waitJS(t, `document.querySelector('.badge.live') !== null`)
			// a call made while the page is open arrives over the stream
			// (EventSource in Firefox)
			live := p.eval(t, `(async () => {
				const r = await fetch('/api/console/offices/default/computers/sandbox/call', {method: 'POST',
					headers: {'Content-Type': 'application/json'},
					body: JSON.stringify({tool: 'sandbox__sandbox_execute_bash', arguments: {cmd: 'echo live-firefox'}})});
				const j = await r.json();
				return r.status === 200 ? j.req_id : 'status ' + r.status + ' ' + JSON.stringify(j);
			})()`)
			if live == "" || strings.HasPrefix(live, "status ") {
				t.Fatalf("the page's own call: %s", live)
			}
			p.waitJS(t, fmt.Sprintf(`!!document.querySelector('tr[data-key$="%s"][data-state=done] .badge.console')`, live))
			p.shot(t, "calls")
		}},
		{"detail", func(t *testing.T) {
			p.hash(t, detail)
			for _, span := range []string{"a2c.hub.relay", "a2c.computer.tool_call", "aiod.command"} {
				p.waitJS(t, fmt.Sprintf(`!!document.querySelector('.tl-row[data-span="%s"]')`, span))
			}
			if n := p.eval(t, `String(document.querySelectorAll('.tl-row .badge.error').length)`); n != "0" {
				t.Errorf("%s spans of a call that went well are marked as errors", n)
			}
			// Firefox lays the bars out: every one is drawn, inside its track
			if bad := p.eval(t, `[...document.querySelectorAll('.tl-bar')].filter(b => {
				const r = b.getBoundingClientRect(), track = b.parentElement.getBoundingClientRect();
				return r.width < 2 || r.height < 2 || r.left < track.left - 1 || r.right > track.right + 1;
			}).map(b => b.title).join(' | ')`); bad != "" {
				t.Errorf("timeline bars not drawn inside their track: %s", bad)
			}
			p.shot(t, "detail")
		}},
		{"files", func(t *testing.T) {
			file := filepath.Join(u.Workspace, "firefox-notes.txt")
			if err := os.WriteFile(file, []byte("written by the test\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p.hash(t, "#/sandboxes/sandbox/files")
			p.waitJS(t, `!!document.querySelector('button[aria-label="Open firefox-notes.txt"]')`)
			p.eval(t, `(() => { document.querySelector('button[aria-label="Open firefox-notes.txt"]').focus(); return '' })()`)
			p.keys(t, ffKey(ffEnter))
			p.waitJS(t, `document.querySelector('.editor textarea')?.value === 'written by the test\n'`)
			p.focus(t, "Contents")
			p.eval(t, `(() => { document.activeElement.select(); return '' })()`)
			p.keys(t, ffText("edited in Firefox"))
			p.keys(t, ffChord(ffControl, "s"))
			p.waitJS(t, `document.querySelector('.editor [role=status]')?.textContent.startsWith('Saved')`)
			if b, err := os.ReadFile(file); err != nil || string(b) != "edited in Firefox" {
				t.Errorf("on disk after the save: %q, %v", b, err)
			}
			p.shot(t, "files")
		}},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			p.errs() // the errors of an earlier step are its own
			s.run(t)
			p.checkErrors(t)
		})
		if !ok {
			return
		}
	}
}

// WebDriver's key values for the keys that are not text.
const (
	ffEnter   = "\uE007"
	ffTab     = "\uE004"
	ffControl = "\uE009"
)

// ffText is the key actions that type s.
func ffText(s string) []map[string]any {
	var a []map[string]any
	for _, r := range s {
		a = append(a, map[string]any{"type": "keyDown", "value": string(r)}, map[string]any{"type": "keyUp", "value": string(r)})
	}
	return a
}

// ffKey is one key's press.
func ffKey(k string) []map[string]any { return ffText(k) }

// ffChord is key pressed while mod is held.
func ffChord(mod, key string) []map[string]any {
	return []map[string]any{{"type": "keyDown", "value": mod}, {"type": "keyDown", "value": key},
		{"type": "keyUp", "value": key}, {"type": "keyUp", "value": mod}}
}

// ffPage is one Firefox tab, driven over WebDriver BiDi, that collects
// the page's JavaScript errors and console errors (log.entryAdded).
type ffPage struct {
	bidi *harness.BiDi
	ctx  string // the browsing context (the tab)
	dir  string // screenshots

	mu    sync.Mutex
	found []string // errors since the last errs
}

// ffOpen starts a BiDi session, listens to log entries and gives the
// first tab a 1280x800 view.
func ffOpen(t *testing.T, b *harness.FirefoxBrowser) *ffPage {
	t.Helper()
	p := &ffPage{bidi: b.Session(t), dir: os.Getenv("A2C_FIREFOX_SHOTS")}
	if p.dir == "" {
		p.dir = t.TempDir()
	}
	p.bidi.OnEvent(func(ev harness.BiDiEvent) {
		if ev.Method != "log.entryAdded" {
			return
		}
		var e struct {
			Type       string `json:"type"`
			Level      string `json:"level"`
			Text       string `json:"text"`
			Method     string `json:"method"`
			StackTrace *struct {
				CallFrames []struct {
					URL  string `json:"url"`
					Line int    `json:"lineNumber"`
				} `json:"callFrames"`
			} `json:"stackTrace"`
		}
		if json.Unmarshal(ev.Params, &e) != nil {
			p.add("an unreadable log entry: " + string(ev.Params))
			return
		}
		if e.Type == "javascript" || e.Level == "error" {
			where := ""
			if e.StackTrace != nil && len(e.StackTrace.CallFrames) > 0 {
				where = fmt.Sprintf(" at %s:%d", e.StackTrace.CallFrames[0].URL, e.StackTrace.CallFrames[0].Line)
			}
			p.add(fmt.Sprintf("%s %s%s: %s%s", e.Type, e.Level, ffSuffix(e.Method), e.Text, where))
		}
	})
	p.call(t, "session.subscribe", map[string]any{"events": []string{"log.entryAdded"}}, nil)
	// a tab of its own: the one Firefox starts with never has the
	// window's focus when headless, and without it Firefox does not
	// activate a focused button from the keyboard
	var c struct {
		Context string `json:"context"`
	}
	p.call(t, "browsingContext.create", map[string]any{"type": "tab"}, &c)
	p.ctx = c.Context
	if f := p.eval(t, `document.hasFocus()`); f != "true" {
		t.Fatalf("the new tab has no focus (document.hasFocus() = %s)", f)
	}
	p.call(t, "browsingContext.setViewport", map[string]any{"context": p.ctx,
		"viewport": map[string]any{"width": 1280, "height": 800}, "devicePixelRatio": 1}, nil)
	return p
}

func ffSuffix(method string) string {
	if method == "" {
		return ""
	}
	return " (console." + method + ")"
}

func (p *ffPage) add(s string) {
	p.mu.Lock()
	p.found = append(p.found, s)
	p.mu.Unlock()
}

// errs returns and forgets the errors seen so far.
func (p *ffPage) errs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.found
	p.found = nil
	return e
}

// checkErrors fails t on any error the page reported during the step.
func (p *ffPage) checkErrors(t *testing.T) {
	t.Helper()
	p.eval(t, `''`) // a round trip lets earlier entries in
	for _, e := range p.errs() {
		t.Errorf("the page reported: %s", e)
	}
}

// call runs one BiDi command (20 s at most).
func (p *ffPage) call(t *testing.T, method string, params, result any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.bidi.Call(ctx, method, params, result); err != nil {
		t.Fatalf("%v\n%s", err, p.dump())
	}
}

// ffEvalResult is script.evaluate's answer.
type ffEvalResult struct {
	Type   string `json:"type"` // success or exception
	Result struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"result"`
	ExceptionDetails struct {
		Text string `json:"text"`
	} `json:"exceptionDetails"`
}

// evaluate runs js (awaited when a promise) in the page and returns its
// value as a string: strings as they are, anything else as JSON.
func (p *ffPage) evaluate(ctx context.Context, js string) (string, error) {
	var r ffEvalResult
	err := p.bidi.Call(ctx, "script.evaluate", map[string]any{
		"expression":      `(async () => { const v = await (` + js + `); return typeof v === 'string' ? v : String(JSON.stringify(v)); })()`,
		"target":          map[string]any{"context": p.ctx},
		"awaitPromise":    true,
		"resultOwnership": "none",
	}, &r)
	if err != nil {
		return "", err
	}
	if r.Type != "success" {
		return "", fmt.Errorf("%s", r.ExceptionDetails.Text)
	}
	var s string
	if err := json.Unmarshal(r.Result.Value, &s); err != nil {
		return "", fmt.Errorf("a %s result: %w", r.Result.Type, err)
	}
	return s, nil
}

func (p *ffPage) eval(t *testing.T, js string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := p.evaluate(ctx, js)
	if err != nil {
		t.Fatalf("evaluating %s: %v\n%s", js, err, p.dump())
	}
	return s
}

// waitJS polls (every 25 ms, 15 s at most) until js is truthy and returns
// its value as eval does. An evaluation that fails (a navigation destroyed
// the page's realm) only polls again.
func (p *ffPage) waitJS(t *testing.T, js string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(time.Second))
		s, err := p.evaluate(ctx, `(async () => { const v = await (`+js+`); return v ? v : ''; })()`)
		cancel()
		if err == nil && s != "" && s != `""` {
			return s
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s (last error: %v)\n%s", js, last, p.dump())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// dump is the page's address, visible text and errors, for a failure.
func (p *ffPage) dump() string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := p.evaluate(ctx, `location.href + '\n' + document.body.innerText.slice(0, 3000)`)
	if err != nil {
		s = "(no page text: " + err.Error() + ")"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return "page: " + s + "\npage errors: " + strings.Join(p.found, "\n")
}

// navigate loads url and waits until the document is complete.
func (p *ffPage) navigate(t *testing.T, url string) {
	t.Helper()
	p.call(t, "browsingContext.navigate", map[string]any{"context": p.ctx, "url": url, "wait": "complete"}, nil)
}

// hash moves the app to a route (a same-document navigation).
func (p *ffPage) hash(t *testing.T, h string) {
	t.Helper()
	b, _ := json.Marshal(h)
	p.eval(t, `(() => { location.hash = `+string(b)+`; return '' })()`)
	p.waitJS(t, `location.hash === `+string(b))
}

// named asserts that Firefox's accessibility tree holds exactly one
// element of the tag with the accessible name (what a screen reader
// announces), of the role unless role is empty, found with
// browsingContext.locateNodes.
func (p *ffPage) named(t *testing.T, role, name, tag string) {
	t.Helper()
	var r struct {
		Nodes []struct {
			Value struct {
				LocalName string `json:"localName"`
			} `json:"value"`
		} `json:"nodes"`
	}
	v := map[string]any{"name": name}
	if role != "" {
		v["role"] = role
	}
	p.call(t, "browsingContext.locateNodes", map[string]any{"context": p.ctx,
		"locator": map[string]any{"type": "accessibility", "value": v}}, &r)
	n := 0
	for _, e := range r.Nodes {
		if e.Value.LocalName == tag {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d <%s>s (role %q) named %q in Firefox's accessibility tree, want 1: %+v", n, tag, role, name, r.Nodes)
	}
}

// keys presses keys on the keyboard (input.performActions), as a user
// would on the focused element.
func (p *ffPage) keys(t *testing.T, actions ...[]map[string]any) {
	t.Helper()
	var all []map[string]any
	for _, a := range actions {
		all = append(all, a...)
	}
	p.call(t, "input.performActions", map[string]any{"context": p.ctx,
		"actions": []map[string]any{{"type": "key", "id": "keyboard", "actions": all}}}, nil)
}

// focus focuses the control that the label whose own text is label
// names (its for attribute).
func (p *ffPage) focus(t *testing.T, label string) {
	t.Helper()
	b, _ := json.Marshal(label)
	p.waitJS(t, `(() => {
		const l = [...document.querySelectorAll('label[for]')].find(l => (l.firstChild?.textContent || '').trim() === `+string(b)+`);
		const c = l && document.getElementById(l.htmlFor);
		if (!c) return '';
		c.focus();
		return document.activeElement === c ? c.id : '';
	})()`)
}

// tabTo presses Tab until the element of the CSS selector has the focus
// (30 presses at most): it must be reachable with the keyboard.
func (p *ffPage) tabTo(t *testing.T, sel string) {
	t.Helper()
	b, _ := json.Marshal(sel)
	for range 30 {
		if p.eval(t, `document.activeElement === document.querySelector(`+string(b)+`) ? 'y' : 'n'`) == "y" {
			return
		}
		p.keys(t, ffKey(ffTab))
	}
	t.Fatalf("%s not reached with Tab", sel)
}

// shot saves a screenshot of the whole page, after checking that the page
// shows no JavaScript value that slipped into its text.
func (p *ffPage) shot(t *testing.T, name string) {
	t.Helper()
	if junk := p.eval(t, `(document.querySelector('main').innerText.match(/\bundefined\b|\bNaN\b|\[object Object\]|^null$/m) || [''])[0]`); junk != "" {
		t.Errorf("the page shows %q", junk)
	}
	p.eval(t, `(() => { window.scrollTo(0, 0); document.activeElement?.blur(); return '' })()`)
	var r struct {
		Data string `json:"data"`
	}
	p.call(t, "browsingContext.captureScreenshot", map[string]any{"context": p.ctx, "origin": "document"}, &r)
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(p.dir, "firefox-"+name+".png")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", f)
}
