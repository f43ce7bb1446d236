package a2c

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/chromedp/chromedp/remote"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

var consURLRE = regexp.MustCompile(`(?m)^a2c up: console url=(\S+)`)

// TestConsole drives the hub's web console (server/console) in Debian's
// Chromium through "a2c up" with a token: the login, the offices, a
// Computer's tool form used with the keyboard only, the live calls, a
// call's trace, the sandbox's files, a streamed command and a python
// cell. Every step fails on a JavaScript error or a console error, and
// takes a screenshot (A2C_CONSOLE_SHOTS=dir keeps them; A2C_README_SHOT=1
// writes docs/img/console.png).
func TestConsole(t *testing.T) {
	requireLinux(t)
	token := fmt.Sprintf("console-%016x", rand.Uint64())
	u := startUp(t, "--token", token)
	base := u.URL
	if m := consURLRE.FindStringSubmatch(u.Logs()); m != nil {
		base = strings.TrimRight(m[1], "/")
	}
	p := consOpen(t)
	a := dialAgent(t, u.URL, "go-agent", agent.Options{Auth: map[string]any{"x-api-key": token}})
	if err := a.Join(ctx10(t), "default"); err != nil {
		t.Fatal(err)
	}
	var reqID string // the console's call of the form step

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"login", func(t *testing.T) {
			p.do(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
			if n := p.eval(t, `document.querySelectorAll('link[rel=icon][href^="data:"]').length`); n != "1" {
				t.Errorf("login page: %s data: icons, want 1 (no favicon request)", n)
			}
			p.focus(t, "Token")
			p.do(t, chromedp.KeyEvent("not-the-token"), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `(document.getElementById('login-error')?.textContent || '').trim() !== ''`)
			if msg := p.eval(t, `document.getElementById('login-error').textContent`); !strings.Contains(strings.ToLower(msg), "token") {
				t.Errorf("wrong token: error %q, want one about the token", msg)
			}
			if d := p.eval(t, `document.getElementById('token').getAttribute('aria-describedby') || ''`); d != "login-error" {
				t.Errorf("the token field is described by %q, want the error", d)
			}
			p.checkNames(t, 2)
			p.shot(t, "login-error")
			p.focus(t, "Token")
			p.do(t, chromedp.KeyEvent(token), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `location.hash === '#/offices' && document.querySelector('h1')?.textContent === 'Offices'`)
			cookies, err := chromedp.Call(p.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, c := range cookies.Cookies {
				if c.Name != "a2c_console" {
					continue
				}
				found = true
				if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/" || c.Value == token || strings.Contains(c.Value, token) {
					t.Errorf("cookie a2c_console: httpOnly=%t sameSite=%q path=%q (value holds the token: %t), want HttpOnly, Strict, /, a session id",
						c.HTTPOnly, c.SameSite, c.Path, strings.Contains(c.Value, token))
				}
			}
			if !found {
				t.Errorf("no a2c_console cookie: %+v", cookies.Cookies)
			}
			if js := p.eval(t, `document.cookie`); strings.Contains(js, "a2c_console") {
				t.Errorf("document.cookie shows the session cookie: %q", js)
			}
		}},
		{"offices", func(t *testing.T) {
			p.hash(t, "#/offices")
			p.waitJS(t, `[...document.querySelectorAll('main tr')].some(r => r.querySelector('a')?.textContent === 'sandbox' && r.textContent.includes('computer'))`)
			row := p.eval(t, `[...document.querySelectorAll('main tr')].find(r => r.querySelector('a')?.textContent === 'sandbox').innerText`)
			if !regexp.MustCompile(`computer\s+sandbox\s+\S+\s+\d\d:\d\d:\d\d`).MatchString(row) {
				t.Errorf("the sandbox's row %q: want role, name, protocol version and connected since", row)
			}
			p.waitJS(t, `document.querySelector('main').textContent.includes('go-agent')`)
			p.shot(t, "offices")
		}},
		{"form", func(t *testing.T) {
			p.hash(t, "#/offices/default/computers/sandbox")
			p.waitJS(t, `!!document.querySelector('a[href$="/tools/sandbox__sandbox_execute_bash"]')`)
			// keyboard only: the tool's link, then the form
			p.do(t, chromedp.Focus(chromedp.CSS(`nav a[href$="/tools/sandbox__sandbox_execute_bash"]`)), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `document.querySelector('h2.tool-title')?.textContent === 'sandbox__sandbox_execute_bash' && !!document.querySelector('main form button[type=submit]')`)
			if auto := p.eval(t, `document.querySelector('.badge.auto, .badge.approval').textContent`); auto != "auto_apply" && auto != "approval: Computer policy" {
				t.Errorf("approval badge %q", auto)
			}
			p.checkNames(t, 3)
			// an empty required field: the form says so and keeps the focus there
			p.focus(t, "cmd")
			p.do(t, chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `document.activeElement.getAttribute('aria-invalid') === 'true'`)
			if desc := p.eval(t, `document.activeElement.getAttribute('aria-describedby').split(' ').map(id => document.getElementById(id).textContent).join(' | ')`); !strings.Contains(desc, "Enter a value") {
				t.Errorf("the empty cmd is described by %q, want its error", desc)
			}
			p.do(t, chromedp.KeyEvent("echo hello-console"))
			p.tabTo(t, `main form button[type=submit]`)
			p.do(t, chromedp.KeyEvent(" "))
			p.waitJS(t, `[...document.querySelectorAll('.result pre.text')].some(e => e.textContent.includes('hello-console'))`)
			if st := p.eval(t, `document.querySelector('[role=status][aria-live=polite]').textContent`); !strings.Contains(st, "finished") {
				t.Errorf("live status %q, want the call finished", st)
			}
			href := p.eval(t, `document.querySelector('.result-card a[href^="#/calls/"]').getAttribute('href')`)
			parts := strings.Split(href, "/")
			if len(parts) != 4 || parts[2] == "" || parts[3] == "" {
				t.Fatalf("call detail link %q", href)
			}
			reqID = parts[3]
			p.shot(t, "form")
		}},
		{"calls", func(t *testing.T) {
			p.hash(t, "#/calls")
			p.waitJS(t, fmt.Sprintf(`!!document.querySelector('tr[data-key$="%s"] .badge.console')`, reqID))
			p.waitJS(t, `document.querySelector('.badge.live') !== null`)
			// an Agent's call appears live, running then done, without the badge
			arg := sleepArg(1)
			killSleeps(t, arg)
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err := a.CallTool(ctx, agent.Call{Computer: "sandbox", Tool: "sandbox__sandbox_execute_bash",
					Params: map[string]any{"cmd": "sleep " + arg + "; echo agent-call"}, Timeout: 15 * time.Second})
				done <- err
			}()
			p.waitJS(t, `[...document.querySelectorAll('tbody tr[data-state=running]')].some(r => r.textContent.includes('go-agent'))`)
			p.shot(t, "calls-running")
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			p.waitJS(t, `[...document.querySelectorAll('tbody tr[data-state=done]')].some(r => r.textContent.includes('go-agent') && r.querySelector('.badge.ok'))`)
			if n := p.eval(t, `String([...document.querySelectorAll('tbody tr')].filter(r => r.textContent.includes('go-agent') && r.querySelector('.badge.console')).length)`); n != "0" {
				t.Errorf("%s Agent rows carry the console badge", n)
			}
			if d := p.eval(t, `document.querySelector('.live-bar').textContent`); !strings.Contains(d, "Dropped events 0") {
				t.Errorf("the stream bar %q: want a dropped count of 0", d)
			}
			// the office filter is a labelled select that keeps its rows
			p.focus(t, "Office")
			p.eval(t, `(() => { const s = document.activeElement; s.value = 'default'; s.dispatchEvent(new Event('change')); return '' })()`)
			p.waitJS(t, `location.hash === '#/calls?office=default' && document.querySelector('.badge.live') && document.querySelectorAll('tbody tr[data-state]').length >= 2`)
			p.checkNames(t, 1)
			p.shot(t, "calls")
		}},
		{"detail", func(t *testing.T) {
			p.do(t, chromedp.Focus(chromedp.CSS(fmt.Sprintf(`tr[data-key$="%s"] td.tool a`, reqID))), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `!!document.querySelector('.tl-row[data-span="a2c.hub.relay"]') && !!document.querySelector('.tl-row[data-span="a2c.computer.tool_call"]')`)
			// in a2c up every hop records into one place: the sandbox's command is there too
			p.waitJS(t, `!!document.querySelector('.tl-row[data-span="aiod.command"]')`)
			if err := p.eval(t, `String(document.querySelectorAll('.tl-row .badge.error').length)`); err != "0" {
				t.Errorf("%s spans of a call that went well are marked as errors", err)
			}
			if os.Getenv("A2C_README_SHOT") == "1" {
				p.readmeShot(t)
			}
			// a span's attributes open with the keyboard
			p.do(t, chromedp.Focus(chromedp.CSS(`.tl-row[data-span="a2c.hub.relay"] button`)), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `document.querySelector('.tl-row[data-span="a2c.hub.relay"] .tl-attrs:not([hidden])')?.textContent.includes('a2c.req_id')`)
			if c := p.eval(t, `document.querySelector('main .badge.console') ? 'yes' : 'no'`); c != "yes" {
				t.Error("the console's call shows no console badge on its page")
			}
			p.shot(t, "detail")
		}},
		{"files", func(t *testing.T) {
			file := filepath.Join(u.Workspace, "console-notes.txt")
			if err := os.WriteFile(file, []byte("written by the test\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p.hash(t, "#/sandboxes/sandbox/files")
			p.waitJS(t, `!!document.querySelector('button[aria-label="Open console-notes.txt"]')`)
			p.do(t, chromedp.Focus(chromedp.CSS(`button[aria-label="Open console-notes.txt"]`)), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `document.querySelector('.editor textarea')?.value === 'written by the test\n'`)
			p.focus(t, "Contents")
			p.eval(t, `(() => { document.activeElement.select(); return '' })()`)
			p.do(t, chromedp.KeyEvent("edited in the browser"))
			p.do(t, chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
			p.waitJS(t, `document.querySelector('.editor [role=status]').textContent.startsWith('Saved')`)
			if b, err := os.ReadFile(file); err != nil || string(b) != "edited in the browser" {
				t.Errorf("on disk after the save: %q, %v", b, err)
			}
			// a new file
			p.focus(t, "New file in this folder")
			p.do(t, chromedp.KeyEvent("made-here.txt"), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `document.querySelector('#editor-title')?.textContent.endsWith('/made-here.txt')`)
			if st, err := os.Stat(filepath.Join(u.Workspace, "made-here.txt")); err != nil || st.Size() != 0 {
				t.Errorf("made-here.txt: %v, %v", st, err)
			}
			p.checkNames(t, 4)
			p.shot(t, "files")
		}},
		{"command", func(t *testing.T) {
			p.hash(t, "#/sandboxes/sandbox/command")
			p.waitJS(t, `!!document.querySelector('pre.term')`)
			p.focus(t, "Command")
			p.do(t, chromedp.KeyEvent("for i in 1 2 3; do echo $i; sleep 0.3; done; echo err >&2"),
				chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
			first := p.waitJS(t, `(() => { const t = document.querySelector('pre.term').textContent; return t.includes('1\n') ? t : '' })()`)
			if _, out, _ := strings.Cut(first, "\n"); strings.Contains(out, "3") { // after the echoed command line
				t.Errorf("1 and 3 came together (%q): the output did not stream", first)
			}
			p.waitJS(t, `document.querySelector('main [role=status]').textContent.startsWith('Exited with code 0')`)
			if out := p.eval(t, `document.querySelector('pre.term').textContent`); !strings.Contains(out, "1\n2\n3\n") {
				t.Errorf("output %q", out)
			}
			if e := p.eval(t, `document.querySelector('pre.term .stderr')?.textContent || ''`); e != "err\n" {
				t.Errorf("stderr %q, want err", e)
			}
			p.checkNames(t, 3)
			p.shot(t, "command")
		}},
		{"python", func(t *testing.T) {
			p.hash(t, "#/sandboxes/sandbox/python")
			p.waitJS(t, `!!document.querySelector('.cells')`)
			code := "from IPython.display import display, HTML, Image\nimport base64\n" +
				"display(Image(data=base64.b64decode('" + consPNG(t) + "')))\n" +
				"display(HTML('<p>hello-<b>html</b></p>'))\nprint('py-ok')"
			p.do(t, chromedp.SetValue(chromedp.CSS(`.form-grid textarea`), code), chromedp.Click(chromedp.CSS(`.form-grid button[type=submit]`)))
			p.waitJS(t, `document.querySelector('.cell-out img[src^="data:image/png;base64,"]')?.naturalWidth === 48`)
			p.waitJS(t, `document.querySelector('.cell-out iframe[sandbox=""]')?.srcdoc.includes('hello-<b>html</b>')`)
			p.waitJS(t, `[...document.querySelectorAll('.cell-out pre')].some(e => e.textContent === 'py-ok\n')`)
			p.checkNames(t, 2)
			p.shot(t, "python")
		}},
		{"logout", func(t *testing.T) {
			p.hash(t, "#/offices")
			p.do(t, chromedp.Focus(chromedp.CSS(`#logout button`)), chromedp.KeyEvent(kb.Enter))
			p.do(t, chromedp.WaitVisible(chromedp.ID("token")))
			p.checkErrors(t)
			st := p.eval(t, `(async () => String((await fetch('/api/console/offices')).status))()`, chromedp.EvalAwaitPromise)
			p.eval(t, `''`)
			p.errs(t) // the 401 just asked for
			if st != "401" {
				t.Errorf("the API after logout answers %s, want 401", st)
			}
			p.shot(t, "logout")
		}},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			p.errs(t) // the errors of an earlier step are its own
			s.run(t)
			p.checkErrors(t)
		})
		if !ok {
			return
		}
	}
}

// consPage is one Chromium tab, driven with chromedp, that collects the
// page's JavaScript exceptions and console errors.
type consPage struct {
	ctx   context.Context
	dir   string // screenshots
	mu    sync.Mutex
	found []string // errors since the last errs
}

// consOpen starts Chromium and opens a tab on it with a 1280x800 view.
func consOpen(t *testing.T) *consPage {
	t.Helper()
	b := harness.Chromium(t, harness.ChromiumOptions{})
	actx, acancel := remote.NewAllocator(context.Background(), b.URL())
	ctx, cancel := chromedp.NewContext(actx)
	p := &consPage{ctx: ctx, dir: os.Getenv("A2C_CONSOLE_SHOTS")}
	if p.dir == "" {
		p.dir = t.TempDir()
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		acancel()
		wg.Wait()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	logs := chromedp.Events(ctx, cdplog.EntryAdded)
	wg.Add(3)
	go func() {
		defer wg.Done()
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			p.add("exception: " + (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p.add("console." + string(ev.Type) + ": " + strings.Join(args, " "))
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range logs {
			if err != nil {
				return
			}
			if ev.Entry != nil && ev.Entry.Level == cdplog.EntryLevelError {
				p.add(fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}()
	for _, err := range []error{
		func() error { _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); return err }(),
		func() error { _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); return err }(),
		func() error {
			_, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride,
				emulation.SetDeviceMetricsOverrideParams{Width: 1280, Height: 800, DeviceScaleFactor: 1})
			return err
		}(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *consPage) add(s string) {
	p.mu.Lock()
	p.found = append(p.found, s)
	p.mu.Unlock()
}

// errs returns and forgets the errors seen so far.
func (p *consPage) errs(*testing.T) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.found
	p.found = nil
	return e
}

// checkErrors fails t on any error the page reported during the step.
func (p *consPage) checkErrors(t *testing.T) {
	t.Helper()
	// the log domain reports asynchronously: a round trip lets earlier events in
	p.eval(t, `''`)
	for _, e := range p.errs(t) {
		t.Errorf("the page reported: %s", e)
	}
}

// step is one action's deadline.
func (p *consPage) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.ctx, 20*time.Second)
}

func (p *consPage) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := p.step()
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%v\n%s", err, p.dump())
	}
}

// eval runs JavaScript and returns its value as a string (JSON for
// non-strings).
func (p *consPage) eval(t *testing.T, js string, opts ...chromedp.EvaluateOption) string {
	t.Helper()
	ctx, cancel := p.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js, opts...))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// waitJS waits (15 s at most) until the expression is truthy and returns
// its value as eval does. A navigation that destroys the page's context
// while it polls only starts the poll again.
func (p *consPage) waitJS(t *testing.T, js string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(p.ctx, deadline.Add(time.Second))
		v, err := chromedp.Run(ctx, chromedp.Poll[any](js, chromedp.WithPollingTimeout(time.Until(deadline)),
			chromedp.WithPollingInterval(25*time.Millisecond)))
		cancel()
		if err == nil {
			if s, ok := v.(string); ok {
				return s
			}
			b, _ := json.Marshal(v)
			return string(b)
		}
		if time.Now().After(deadline) || p.ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v\n%s", js, err, p.dump())
		}
	}
}

// dump is the page's address and visible text, for a failure message.
func (p *consPage) dump() string {
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + document.body.innerText.slice(0, 3000)`))
	if err != nil {
		return "(no page text: " + err.Error() + ")"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return "page: " + s + "\npage errors: " + strings.Join(p.found, "\n")
}

// hash moves the app to a route (a same-document navigation).
func (p *consPage) hash(t *testing.T, h string) {
	t.Helper()
	b, _ := json.Marshal(h)
	p.eval(t, `(() => { location.hash = `+string(b)+`; return '' })()`)
	p.waitJS(t, `location.hash === `+string(b))
}

// focus focuses the control that the label whose own text is label
// names (its for attribute), as a user who follows the labels would.
func (p *consPage) focus(t *testing.T, label string) {
	t.Helper()
	b, _ := json.Marshal(label)
	got := p.waitJS(t, `(() => {
		const l = [...document.querySelectorAll('label[for]')].find(l => (l.firstChild?.textContent || '').trim() === `+string(b)+`);
		const c = l && document.getElementById(l.htmlFor);
		if (!c) return '';
		c.focus();
		return document.activeElement === c ? c.id : '';
	})()`)
	if got == "" {
		t.Fatalf("no control labelled %s", label)
	}
}

// tabTo presses Tab until the element of the CSS selector has the focus
// (30 presses at most): it must be reachable with the keyboard.
func (p *consPage) tabTo(t *testing.T, sel string) {
	t.Helper()
	b, _ := json.Marshal(sel)
	for range 30 {
		if p.eval(t, `document.activeElement === document.querySelector(`+string(b)+`) ? 'y' : 'n'`) == "y" {
			return
		}
		p.do(t, chromedp.KeyEvent(kb.Tab))
	}
	t.Fatalf("%s not reached with Tab", sel)
}

// consControlRoles are the roles of form controls and buttons in
// Chromium's accessibility tree.
var consControlRoles = map[string]bool{"textbox": true, "searchbox": true, "combobox": true, "checkbox": true,
	"button": true, "spinbutton": true, "radio": true, "slider": true, "switch": true, "listbox": true}

// checkNames asserts that every form control and button on the page has
// an accessible name, as the browser computes it, and that there are at
// least min of them.
func (p *consPage) checkNames(t *testing.T, min int) {
	t.Helper()
	ctx, cancel := p.step()
	defer cancel()
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		t.Fatal(err)
	}
	str := func(v *accessibility.Value) string {
		if v == nil {
			return ""
		}
		var s string
		_ = json.Unmarshal([]byte(v.Value), &s)
		return s
	}
	n := 0
	for _, node := range tree.Nodes {
		if node.Ignored || !consControlRoles[str(node.Role)] {
			continue
		}
		n++
		if strings.TrimSpace(str(node.Name)) == "" {
			t.Errorf("a %s without an accessible name (backend node %d)", str(node.Role), node.BackendDOMNodeID)
		}
	}
	if n < min {
		t.Errorf("%d named controls in the accessibility tree, want at least %d", n, min)
	}
}

// shot saves a full-page screenshot of the step.
// Before that it checks the page shows no JavaScript value that slipped
// into its text (undefined, NaN, [object Object], a lone null).
func (p *consPage) shot(t *testing.T, name string) {
	t.Helper()
	if junk := p.eval(t, `(document.querySelector('main').innerText.match(/\bundefined\b|\bNaN\b|\[object Object\]|^null$/m) || [''])[0]`); junk != "" {
		t.Errorf("the page shows %q", junk)
	}
	p.eval(t, `(() => { window.scrollTo(0, 0); return '' })()`)
	ctx, cancel := p.step()
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(p.dir, name+".png")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", f)
}

// readmeShot writes the view (1280x800, scale 1) to docs/img/console.png.
func (p *consPage) readmeShot(t *testing.T) {
	t.Helper()
	p.eval(t, `(() => { window.scrollTo(0, 0); document.activeElement?.blur(); return '' })()`)
	ctx, cancel := p.step()
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width != 1280 || cfg.Height != 800 {
		t.Fatalf("README screenshot: %dx%d, %v; want 1280x800", cfg.Width, cfg.Height, err)
	}
	f := filepath.Join(harness.Root(), "docs", "img", "console.png")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("README screenshot %s", f)
}

// consPNG is a 48x48 PNG (a gradient), base64.
func consPNG(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 48, 48))
	for y := range 48 {
		for x := range 48 {
			img.Set(x, y, color.RGBA{uint8(59 + x*3), uint8(79 + y*2), 216, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}
