package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// fakeProv is a Provisioner that records its calls. Ensure runs ensure
// (default: answer "sandbox"); every Release is sent on released.
type fakeProv struct {
	ensure   func(ctx context.Context, office string) (string, error)
	called   chan string // each Ensure's office, as it starts (buffered)
	released chan string

	mu                sync.Mutex
	ensures           int
	inFlight, maxSeen int
}

func newFakeProv() *fakeProv {
	return &fakeProv{called: make(chan string, 16), released: make(chan string, 16)}
}

func (f *fakeProv) Ensure(ctx context.Context, office string) (string, error) {
	f.mu.Lock()
	f.ensures++
	f.inFlight++
	f.maxSeen = max(f.maxSeen, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	f.called <- office
	if f.ensure != nil {
		return f.ensure(ctx, office)
	}
	return "sandbox", nil
}

func (f *fakeProv) Release(office string) { f.released <- office }

func (f *fakeProv) count() (ensures, maxInFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ensures, f.maxSeen
}

// logBuffer collects a server's logs for a test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// joinAsync sends p's server:join_office and returns a channel that gets
// the answer's arguments, comma-joined, together with the payloads of
// notify:enter_office p had received when the answer came.
func (p *peer) joinAsync(role smcp.Role, name, office string) <-chan joinAnswer {
	ch := make(chan joinAnswer, 1)
	b := smcp.Encode(smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office})
	p.sock.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{b}}, 20*time.Second, func(m sio.Message, err error) {
		var a joinAnswer
		if err != nil {
			a.ack = "error: " + err.Error()
		}
		var parts []string
		for _, x := range m.Args {
			parts = append(parts, string(x))
		}
		a.ack += strings.Join(parts, ",")
		a.entered = strings.Join(p.got(smcp.NotifyEnterOffice), " ")
		ch <- a
	})
	return ch
}

type joinAnswer struct{ ack, entered string }

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestProvisionJoinWaitsForComputer: the Agent's join is answered only
// once the sandbox's Computer is in the office: the Agent has been told
// of the Computer's arrival before its join's answer.
func TestProvisionJoinWaitsForComputer(t *testing.T) {
	f := newFakeProv()
	// A wait longer than recv's: the answer must come from the
	// Computer's arrival.
	_, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: time.Minute})
	a := connect(t, url, nil)
	ans := a.joinAsync(smcp.RoleAgent, "a", "o1")
	if got := recv(t, "Ensure", f.called); got != "o1" {
		t.Fatalf("Ensure for %q", got)
	}
	c := connect(t, url, echo)
	if got := c.join(smcp.RoleComputer, "sandbox", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	got := recv(t, "the join's answer", ans)
	if got.ack != "true,null" {
		t.Fatalf("join answered %q", got.ack)
	}
	if !strings.Contains(got.entered, `"computer":"sandbox"`) {
		t.Fatalf("the join was answered before the sandbox joined (notifications then: %q)", got.entered)
	}
	// The sandbox already in: a later Agent's join is answered without
	// waiting for any arrival.
	if r := a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o1"}); strings.Join(r, ",") != "true,null" {
		t.Fatal(r)
	}
	if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	if n, _ := f.count(); n != 2 {
		t.Fatalf("%d Ensure calls, want 2", n)
	}
}

// TestProvisionComputerNeverComes: the join is answered (true) after
// ProvisionWait when the sandbox's Computer never joins, with a warning.
func TestProvisionComputerNeverComes(t *testing.T) {
	f := newFakeProv()
	var logs logBuffer
	const wait = 300 * time.Millisecond
	_, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: wait, Logger: logs.logger()})
	a := connect(t, url, nil)
	start := time.Now()
	if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	if d := time.Since(start); d < wait {
		t.Fatalf("answered after %v, before the wait of %v was over", d, wait)
	}
	if !strings.Contains(logs.String(), `did not join`) {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

// TestProvisionEnsureFails: a failed Ensure (or one that outlasts
// ProvisionWait) still lets the Agent in, answered once.
func TestProvisionEnsureFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ensure func(ctx context.Context, office string) (string, error)
		log    string
	}{
		{"error", func(context.Context, string) (string, error) { return "", errors.New("pool is full") }, "pool is full"},
		{"no name", func(context.Context, string) (string, error) { return "", nil }, "named no Computer"},
		{"slow", func(ctx context.Context, _ string) (string, error) { <-ctx.Done(); return "", ctx.Err() }, "deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProv()
			f.ensure = tc.ensure
			var logs logBuffer
			_, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: 300 * time.Millisecond, Logger: logs.logger()})
			a := connect(t, url, nil)
			if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
				t.Fatal(got)
			}
			if l := logs.String(); !strings.Contains(l, "office sandbox not ready") || !strings.Contains(l, tc.log) {
				t.Fatalf("want a warning naming %q:\n%s", tc.log, l)
			}
			// The office works: the Agent is in it.
			if r := a.call(smcp.EventListRoom, smcp.ListRoomReq{Agent: "a", ReqID: "r1", OfficeID: "o1"}); !strings.Contains(r[0], `"name":"a"`) {
				t.Fatal(r)
			}
		})
	}
}

// TestProvisionOneEnsureAtATime: an office's Ensure calls take turns.
// Agent a1's join waits on a slow Ensure; a1 leaves (its join is
// answered first, then the leave); a2 joins the office and its Ensure
// starts only once a1's has returned.
func TestProvisionOneEnsureAtATime(t *testing.T) {
	f := newFakeProv()
	gate := make(chan struct{})
	f.ensure = func(ctx context.Context, _ string) (string, error) {
		select {
		case <-gate:
			return "sandbox", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	s, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: 10 * time.Second})
	a1 := connect(t, url, nil)
	ans := a1.joinAsync(smcp.RoleAgent, "a1", "o1")
	recv(t, "the first Ensure", f.called)

	left := make(chan string, 1)
	b := smcp.Encode(smcp.LeaveOfficeReq{OfficeID: "o1"})
	a1.sock.Request(smcp.EventLeaveOffice, sio.Message{Args: []json.RawMessage{b}}, 10*time.Second, func(sio.Message, error) {
		select {
		case <-ans: // the join was answered before the leave
			left <- "in order"
		default:
			left <- "leave answered first"
		}
	})
	if got := recv(t, "the leave's answer", left); got != "in order" {
		t.Fatal(got)
	}

	a2 := connect(t, url, nil)
	ans2 := a2.joinAsync(smcp.RoleAgent, "a2", "o1")
	// a2's join waits for the office's turn: two joins refer to it.
	eventually(t, "a2's join to wait for its turn", func() bool {
		s.prov.mu.Lock()
		defer s.prov.mu.Unlock()
		o := s.prov.offices["o1"]
		return o != nil && o.refs == 2
	})
	close(gate)
	recv(t, "the second Ensure", f.called)
	c := connect(t, url, echo)
	if got := c.join(smcp.RoleComputer, "sandbox", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	if got := recv(t, "a2's join", ans2); got.ack != "true,null" {
		t.Fatal(got)
	}
	if n, most := f.count(); n != 2 || most != 1 {
		t.Fatalf("%d Ensure calls, %d at once; want 2, 1", n, most)
	}
}

// TestProvisionIdleRelease: the office is released OfficeIdle after its
// Agent left (by leaving, or by disconnecting); an Agent back in time
// keeps it.
func TestProvisionIdleRelease(t *testing.T) {
	t.Run("leave", func(t *testing.T) {
		f := newFakeProv()
		_, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: 50 * time.Millisecond, OfficeIdle: 50 * time.Millisecond})
		a := connect(t, url, nil)
		if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
			t.Fatal(got)
		}
		if r := a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o1"}); strings.Join(r, ",") != "true,null" {
			t.Fatal(r)
		}
		if got := recv(t, "Release", f.released); got != "o1" {
			t.Fatalf("released %q", got)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		f := newFakeProv()
		_, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: 50 * time.Millisecond, OfficeIdle: 50 * time.Millisecond})
		a := connect(t, url, nil)
		if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
			t.Fatal(got)
		}
		a.sock.Disconnect()
		if got := recv(t, "Release", f.released); got != "o1" {
			t.Fatalf("released %q", got)
		}
	})
	t.Run("rejoin", func(t *testing.T) {
		f := newFakeProv()
		s, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: 50 * time.Millisecond, OfficeIdle: time.Hour})
		a := connect(t, url, nil)
		if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
			t.Fatal(got)
		}
		a.sock.Disconnect()
		gen := idleGen(t, s, "o1")
		b := connect(t, url, nil)
		if got := b.join(smcp.RoleAgent, "b", "o1"); got != "true,null" {
			t.Fatal(got)
		}
		s.prov.mu.Lock()
		o := s.prov.offices["o1"]
		armed := o != nil && o.timer != nil
		s.prov.mu.Unlock()
		if armed {
			t.Fatal("the idle timer is still armed after an Agent joined")
		}
		// A timer that fired just before the join does nothing either.
		s.prov.fire("o1", gen)
		select {
		case got := <-f.released:
			t.Fatalf("released %q with an Agent in it", got)
		default:
		}
	})
}

// TestProvisionOnlyAgents: Computers never provision, their leaving
// starts no timer, and a refused join provisions nothing.
func TestProvisionOnlyAgents(t *testing.T) {
	f := newFakeProv()
	s, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: 50 * time.Millisecond, OfficeIdle: time.Hour})
	c := connect(t, url, echo)
	if got := c.join(smcp.RoleComputer, "c", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	c.sock.Disconnect()
	a := connect(t, url, nil)
	if got := a.join(smcp.RoleAgent, "a", "o2"); got != "true,null" {
		t.Fatal(got)
	}
	b := connect(t, url, nil)
	if got := b.join(smcp.RoleAgent, "b", "o2"); got != `false,"Room already has an agent"` {
		t.Fatal(got)
	}
	if got := a.join(smcp.RoleAgent, "a", "o2"); got != "true,null" { // already there
		t.Fatal(got)
	}
	if n, _ := f.count(); n != 1 {
		t.Fatalf("%d Ensure calls, want 1 (the first Agent's)", n)
	}
	eventually(t, "the Computer's leave", func() bool { return len(s.Offices()) == 1 })
	s.prov.mu.Lock()
	_, kept := s.prov.offices["o1"]
	s.prov.mu.Unlock()
	if kept {
		t.Fatal("a Computer's office has provisioning state")
	}
}

// TestProvisionNone: without a Provisioner the Agent's join is answered
// at once, as it always was.
func TestProvisionNone(t *testing.T) {
	s, url := newTestServer(t, Config{})
	if s.prov != nil {
		t.Fatal("a provisioner without Config.Provisioner")
	}
	a := connect(t, url, nil)
	if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	if got := a.got(smcp.NotifyEnterOffice); len(got) != 0 {
		t.Fatal(got)
	}
}

// TestProvisionShutdown: Shutdown answers a join still waiting for its
// sandbox, cancels its Ensure, and stops the idle timers.
func TestProvisionShutdown(t *testing.T) {
	f := newFakeProv()
	f.ensure = func(ctx context.Context, _ string) (string, error) { <-ctx.Done(); return "", ctx.Err() }
	s, url := newTestServer(t, Config{Provisioner: f, ProvisionWait: time.Hour, OfficeIdle: time.Hour})
	idle := connect(t, url, nil)
	idleAns := idle.joinAsync(smcp.RoleAgent, "i", "o0")
	recv(t, "Ensure", f.called)
	idle.sock.Disconnect()
	recv(t, "the join's answer", idleAns) // answered (or failed) as its Agent left
	a := connect(t, url, nil)
	ans := a.joinAsync(smcp.RoleAgent, "a", "o1")
	recv(t, "Ensure", f.called)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, "the join's answer", ans); got.ack != "true,null" && !strings.HasPrefix(got.ack, "error:") {
		t.Fatal(got)
	}
	s.prov.mu.Lock()
	defer s.prov.mu.Unlock()
	for id, o := range s.prov.offices {
		if o.timer != nil {
			t.Fatalf("office %s has its idle timer after Shutdown", id)
		}
	}
	select {
	case got := <-f.released:
		t.Fatalf("Shutdown released %q", got)
	default:
	}
}

func TestProvisionConfigCheck(t *testing.T) {
	for _, cfg := range []Config{{OfficeIdle: -1}, {ProvisionWait: -time.Second}} {
		if _, err := New(cfg); err == nil {
			t.Fatalf("%+v accepted", cfg)
		}
	}
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if c := s.Config(); c.OfficeIdle != 10*time.Minute || c.ProvisionWait != 5*time.Second {
		t.Fatalf("defaults %v %v", c.OfficeIdle, c.ProvisionWait)
	}
}

// idleGen waits for office's idle timer on s and returns its generation.
func idleGen(t *testing.T, s *Server, office string) uint64 {
	t.Helper()
	var gen uint64
	eventually(t, "the idle timer of "+office, func() bool {
		s.prov.mu.Lock()
		defer s.prov.mu.Unlock()
		o := s.prov.offices[office]
		if o == nil || o.timer == nil {
			return false
		}
		gen = o.gen
		return true
	})
	return gen
}
