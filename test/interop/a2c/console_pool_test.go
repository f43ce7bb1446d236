package a2c

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/server/console"
)

// poolFake is a sandbox pool in memory for the console's Sandboxes page:
// its sandboxes use more CPU at each reading, and it records the pauses,
// resumes and deletes it gets.
type poolFake struct {
	mu    sync.Mutex
	boxes []pool.Sandbox
	cpu   map[string]uint64
	reads map[string]int
	calls []string
}

func (f *poolFake) List(context.Context) ([]pool.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.boxes), nil
}

func (f *poolFake) Metrics(_ context.Context, id string) (pool.Metrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.boxes {
		if b.ID != id {
			continue
		}
		f.reads[id]++
		n := uint64(f.reads[id])
		if b.State == pool.Running { // a paused sandbox's counter stands still
			f.cpu[id] += 300_000_000 + 200_000_000*(n%3) // 0.15..0.35 CPU at a 2 s poll
		}
		return pool.Metrics{CPUUsageNs: f.cpu[id], MemoryBytes: (96 + 16*(n%4)) << 20, MemoryLimitBytes: 512 << 20,
			Pids: 4, PidsLimit: 512, Since: b.CreatedAt}, nil
	}
	return pool.Metrics{}, &pool.Error{Status: 404, Message: fmt.Sprintf("no sandbox %q", id)}
}

func (f *poolFake) act(name, id string, to pool.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" "+id)
	for i := range f.boxes {
		if f.boxes[i].ID == id {
			if to == pool.Stopped {
				f.boxes = slices.Delete(f.boxes, i, i+1)
			} else {
				f.boxes[i].State = to
			}
			return nil
		}
	}
	return &pool.Error{Status: 404, Message: fmt.Sprintf("no sandbox %q", id)}
}

func (f *poolFake) Pause(_ context.Context, id string) error { return f.act("pause", id, pool.Paused) }
func (f *poolFake) Resume(_ context.Context, id string) error {
	return f.act("resume", id, pool.Running)
}
func (f *poolFake) Delete(_ context.Context, id string) error {
	return f.act("delete", id, pool.Stopped)
}

func (f *poolFake) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// TestConsolePool drives the console's Sandboxes page in Debian's
// Chromium against a real console (on 127.0.0.1, a random port) whose
// sandbox pool is a fake: the two sandboxes and their states, the CPU
// and memory charts filling from the page's polls, Pause, and Delete
// with its confirmation. A2C_CONSOLE_SHOTS=dir keeps the screenshots.
func TestConsolePool(t *testing.T) {
	const (
		idRun    = "k7vq2m4xw3ha5nrt6e2b"
		idPaused = "p3zs7yd2fu4gcl5j6wqa"
	)
	now := time.Now().UTC().Truncate(time.Second)
	exp := now.Add(5 * time.Minute)
	fake := &poolFake{
		boxes: []pool.Sandbox{
			{ID: idRun, State: pool.Running, Template: "base", Office: "team-1", Computer: "sandbox",
				CreatedAt: now.Add(-3 * time.Minute), ExpiresAt: &exp, OnTimeout: "kill",
				Limits: pool.Limits{Memory: 512 << 20, Pids: 512, CPUs: 1}, Network: "none",
				// untrusted text: it must show as text
				Metadata: map[string]string{"owner": `<img src=x id=pwned>`}},
			{ID: idPaused, State: pool.Paused, Template: "python", CreatedAt: now.Add(-40 * time.Minute), OnTimeout: "pause",
				Limits: pool.Limits{Memory: 512 << 20, Pids: 512, CPUs: 0.5}, Network: "none"},
		},
		cpu:   map[string]uint64{idRun: 4_000_000_000, idPaused: 900_000_000},
		reads: map[string]int{},
	}
	token := fmt.Sprintf("pool-%016x", rand.Uint64())
	srv, err := server.New(server.Config{Calls: true, Auth: server.TokenAuth(token, "x-api-key")})
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Server: srv, Token: token, Pool: fake})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler()) // 127.0.0.1, a free port
	t.Cleanup(func() {
		con.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	p := consOpen(t)
	row := func(id string) string { return fmt.Sprintf(`document.querySelector('tr[data-id="%s"]')`, id) }

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"login", func(t *testing.T) {
			p.do(t, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")))
			p.focus(t, "Token")
			p.do(t, chromedp.KeyEvent(token), chromedp.KeyEvent(kb.Enter))
			p.waitJS(t, `location.hash === '#/offices' && document.querySelector('h1')?.textContent === 'Offices'`)
		}},
		{"list", func(t *testing.T) {
			p.do(t, chromedp.Click(chromedp.CSS(`nav a[data-nav="sandboxes"]`)))
			p.waitJS(t, `location.hash === '#/sandboxes' && document.querySelectorAll('.pool-table tbody tr').length === 2`)
			for id, state := range map[string]string{idRun: "running", idPaused: "paused"} {
				if got := p.eval(t, row(id)+`.dataset.state + ' ' + `+row(id)+`.querySelector('.badge.state').textContent`); got != state+" "+state {
					t.Errorf("%s: state %q, want %s", id, got, state)
				}
			}
			text := p.eval(t, row(idRun)+`.innerText`)
			for _, want := range []string{"team-1", "base", "Computer sandbox", "then kill", `owner=<img src=x id=pwned>`} {
				if !strings.Contains(text, want) {
					t.Errorf("the running sandbox's row %q lacks %q", text, want)
				}
			}
			if p.eval(t, `document.getElementById('pwned') ? 'yes' : 'no'`) != "no" {
				t.Error("the sandbox's metadata became HTML")
			}
			if got := p.eval(t, row(idPaused)+`.innerText`); !strings.Contains(got, "never") || !strings.Contains(got, "python") {
				t.Errorf("the paused sandbox's row %q: want its template and no deadline", got)
			}
			// Pause shows for the running one, Resume for the paused one.
			if v := p.eval(t, `[...document.querySelectorAll('.pool-table button:not([hidden])')].map(b => b.getAttribute('aria-label')).join('|')`); v !=
				"Pause sandbox "+idRun+"|Delete sandbox "+idRun+"|Resume sandbox "+idPaused+"|Delete sandbox "+idPaused {
				t.Errorf("the visible buttons: %s", v)
			}
			p.checkNames(t, 4)
		}},
		{"charts", func(t *testing.T) {
			// After two polls: a CPU rate (from two readings) and two memory readings.
			cpu, mem := row(idRun)+`.querySelector('svg.spark.cpu')`, row(idRun)+`.querySelector('svg.spark.mem')`
			p.waitJS(t, `Number(`+cpu+`.dataset.points) >= 1 && Number(`+mem+`.dataset.points) >= 2`)
			if pts := p.eval(t, cpu+`.querySelector('polyline').getAttribute('points')`); pts == "" {
				t.Error("the CPU chart has no line")
			}
			if l := p.eval(t, cpu+`.getAttribute('aria-label')`); !strings.HasPrefix(l, "CPU of sandbox "+idRun+": 0.") || !strings.HasSuffix(l, " CPU of 1") {
				t.Errorf("the CPU chart's name %q", l)
			}
			if l := p.eval(t, mem+`.getAttribute('aria-label')`); !strings.HasPrefix(l, "Memory of sandbox "+idRun+": ") || !strings.HasSuffix(l, " of 512 MB") {
				t.Errorf("the memory chart's name %q", l)
			}
			if v := p.eval(t, row(idRun)+`.querySelector('.spark-cell .spark-val').textContent`); !strings.HasSuffix(v, "% of 1 CPU") {
				t.Errorf("the CPU value %q", v)
			}
			// a few more polls for the picture
			p.waitJS(t, `Number(`+cpu+`.dataset.points) >= 5`)
			p.shot(t, "pool")
			if dir := os.Getenv("A2C_CONSOLE_SHOTS"); dir != "" {
				t.Logf("the Sandboxes page: %s/pool.png", dir)
			}
		}},
		{"pause", func(t *testing.T) {
			p.do(t, chromedp.Click(chromedp.CSS(`button[aria-label="Pause sandbox `+idRun+`"]`)))
			p.waitJS(t, `document.querySelector('.pool-status').textContent === 'Sandbox `+idRun+` paused.'`)
			if st := p.eval(t, row(idRun)+`.dataset.state`); st != "paused" {
				t.Errorf("state after Pause %q", st)
			}
			if got := fake.got(); !slices.Equal(got, []string{"pause " + idRun}) {
				t.Errorf("the pool got %q", got)
			}
			// Resume takes Pause's place, and the focus with it.
			p.waitJS(t, `document.activeElement?.getAttribute('aria-label') === 'Resume sandbox `+idRun+`'`)
		}},
		{"delete", func(t *testing.T) {
			p.do(t, chromedp.Click(chromedp.CSS(`button[aria-label="Delete sandbox `+idPaused+`"]`)))
			p.waitJS(t, `document.querySelector('dialog.confirm')?.open && document.activeElement?.textContent === 'Cancel'`)
			if q := p.eval(t, `document.querySelector('dialog.confirm h2').textContent`); q != "Delete sandbox "+idPaused+"?" {
				t.Errorf("the question %q", q)
			}
			p.checkNames(t, 2)
			p.shot(t, "pool-confirm")
			// Escape answers no.
			p.do(t, chromedp.KeyEvent(kb.Escape))
			p.waitJS(t, `!document.querySelector('dialog.confirm')`)
			if got := fake.got(); len(got) != 1 {
				t.Fatalf("after Cancel the pool got %q", got)
			}
			p.do(t, chromedp.Click(chromedp.CSS(`button[aria-label="Delete sandbox `+idPaused+`"]`)))
			p.waitJS(t, `document.querySelector('dialog.confirm')?.open`)
			p.do(t, chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)))
			p.waitJS(t, `!`+row(idPaused)+` && document.querySelectorAll('.pool-table tbody tr').length === 1`)
			p.waitJS(t, `document.querySelector('.pool-status').textContent === 'Sandbox `+idPaused+` deleted.'`)
			if got := fake.got(); !slices.Equal(got, []string{"pause " + idRun, "delete " + idPaused}) {
				t.Errorf("the pool got %q", got)
			}
			// the next polls do not bring it back
			reads := func() int { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.reads[idRun] }
			n := reads()
			p.waitJS(t, `(() => { const r = `+row(idRun)+`; return r && r.dataset.state === 'paused' })()`)
			for deadline := time.Now().Add(10 * time.Second); reads() < n+2; {
				if time.Now().After(deadline) {
					t.Fatal("the page stopped polling")
				}
				p.eval(t, `new Promise(r => setTimeout(() => r(''), 250))`, chromedp.EvalAwaitPromise)
			}
			if p.eval(t, `String(document.querySelectorAll('.pool-table tbody tr').length)`) != "1" {
				t.Error("the deleted sandbox came back")
			}
			p.shot(t, "pool-deleted")
		}},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			p.errs(t)
			s.run(t)
			p.checkErrors(t)
		})
		if !ok {
			return
		}
	}
}
