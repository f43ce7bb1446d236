package a2c

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// This file kills what a cluster of `a2c server` nodes depends on (a
// node, its Redis) under real clients and checks the promises of
// server/cluster's "Failures": calls end in the usual answers within
// their deadline, the office is told who left within the removal bound,
// clients reconnect (through a real nginx) and rejoin, and the
// cluster-wide state comes back by itself.

// flRemovalPromise is the bound promised to users for a dead node's
// members to be removed and their departure told (the design's own bound
// with the default settings is 8 s).
const flRemovalPromise = 15 * time.Second

// flUnavailable is the exact refusal of a join while Redis is down.
const flUnavailable = "Cluster state unavailable; try again shortly"

// flQuiet is a testing.TB whose Errorf is silent: Proc.Stop reports any
// exit it did not cause, and a process this file kills (or one expected
// to fail at start) ended that way on purpose.
type flQuiet struct{ testing.TB }

func (flQuiet) Errorf(string, ...any) {}

// flKill ends p with SIGKILL, as a crash would, and waits until it is
// gone; p's cleanup then expects nothing more of it.
func flKill(t *testing.T, p *harness.Proc) time.Time {
	t.Helper()
	if err := p.Cmd().Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	at := time.Now()
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("a killed process did not end within 10 s")
	}
	p.Stop(flQuiet{t})
	return at
}

// flTools is an MCP server (official Go SDK, streamable HTTP) with a tool
// that can be made slow: slow{message, ms} answers "Slow: <message>"
// after ms milliseconds, or when the test ends, and tells entered the
// moment it starts, so a test knows that a call is in flight at the
// Computer.
type flTools struct {
	URL     string
	entered chan string
	release chan struct{}
	once    sync.Once
}

func flToolServer(t *testing.T) *flTools {
	t.Helper()
	ft := &flTools{entered: make(chan string, 16), release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	type in struct {
		Message string `json:"message"`
		MS      int    `json:"ms,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, struct{}, error) {
		select {
		case ft.entered <- a.Message:
		default:
		}
		timer := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		case <-ft.release:
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Slow: " + a.Message}}}, struct{}{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	t.Cleanup(ft.stop)
	ft.URL = ts.URL
	return ft
}

// stop ends every slow call still running.
func (ft *flTools) stop() { ft.once.Do(func() { close(ft.release) }) }

// awaitEntered waits until a slow call with message reaches the tool.
func (ft *flTools) awaitEntered(t *testing.T, message string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-ft.entered:
			if m == message {
				return
			}
		case <-deadline:
			t.Fatalf("the call %q never reached the tool", message)
		}
	}
}

// flComputer runs a real `a2c computer` hosting the slow tool as
// "rc__slow"; its cleanup is registered after the tool server's, so the
// Computer stops before the tool server, and any slow call still running
// is released first.
func flComputer(t *testing.T, serverURL, office, name string, ft *flTools) *harness.Proc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "servers.json")
	doc := fmt.Sprintf(`{"name":"rc","type":"streamable","server_parameters":{"url":%q}}`, ft.URL)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startComputer(t, serverURL, office, name, cfg, "--skills=")
	t.Cleanup(ft.stop)
	return p
}

// flRelay accepts TCP connections on 127.0.0.1 and relays each to target
// over a connection from the loopback source address ip, so that nginx's
// hash on the client address places a client that cannot choose its own
// source address: the Go Agent SDK has no dialer or HTTP client option.
// It returns the relay's host:port; it stops, with every connection, at
// cleanup. A connection closed on either side closes its pair (HTTP and
// WebSocket clients never half-close).
func flRelay(t *testing.T, target, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = make(map[net.Conn]bool)
		closed bool
	)
	keep := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		for _, c := range cs {
			conns[c] = true
		}
		return true
	}
	drop := func(cs ...net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			c.Close()
			delete(conns, c)
		}
	}
	dialer := harness.LoopbackDialer(ip)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				up, err := dialer.DialContext(ctx, "tcp", target)
				cancel()
				if err != nil {
					c.Close()
					return
				}
				if !keep(c, up) {
					c.Close()
					up.Close()
					return
				}
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
				drop(c, up)
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// flMember is one member in the answer of GET /api/offices/{office}.
type flMember struct {
	SID  string `json:"sid"`
	Name string `json:"name"`
	Role string `json:"role"`
	Node string `json:"node"`
}

// flOffice reads an office's members from a node's GET
// /api/offices/{office} (no credential: the test servers have none).
func flOffice(baseURL, office string) ([]flMember, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(baseURL + "/api/offices/" + url.PathEscape(office))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var info struct {
		OfficeID string     `json:"office_id"`
		Members  []flMember `json:"members"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("%w: %s", err, body)
	}
	if info.OfficeID != office {
		return nil, fmt.Errorf("office_id %q, want %q", info.OfficeID, office)
	}
	return info.Members, nil
}

// flSeats summarises members as sorted "role:name@node" entries.
func flSeats(ms []flMember) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Role + ":" + m.Name + "@" + m.Node
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// flAwaitOffice waits until every node in urls answers GET
// /api/offices/{office} with exactly the seats want ("role:name@node",
// space separated, in any order), and returns how long that took.
func flAwaitOffice(t *testing.T, urls []string, office, want string, within time.Duration) time.Duration {
	t.Helper()
	seats := strings.Fields(want)
	slices.Sort(seats)
	want = strings.Join(seats, " ")
	start := time.Now()
	eventually(t, within, "office "+office+" = "+want, func() (bool, string) {
		for _, u := range urls {
			ms, err := flOffice(u, office)
			if err != nil {
				return false, u + ": " + err.Error()
			}
			if got := flSeats(ms); got != want {
				return false, u + ": " + got
			}
		}
		return true, ""
	})
	return time.Since(start)
}

// flNotes records an Agent's notifications with the time each arrived.
type flNotes struct {
	mu   sync.Mutex
	seen []flNote
}

type flNote struct {
	at time.Time
	n  agent.Notification
}

func (r *flNotes) add(n agent.Notification) {
	r.mu.Lock()
	r.seen = append(r.seen, flNote{time.Now(), n})
	r.mu.Unlock()
}

// await waits up to within for a notification named event about the
// Computer (or Agent) who that arrived at or after since, and returns the
// time it arrived.
func (r *flNotes) await(t *testing.T, since time.Time, event, who string, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, within, event+" for "+who, func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var got []string
		for _, x := range r.seen {
			if x.at.Before(since) {
				continue
			}
			if x.n.Event == event && (x.n.Computer == who || x.n.Agent == who) {
				at = x.at
				return true, ""
			}
			got = append(got, x.n.Event+" "+x.n.Computer+x.n.Agent)
		}
		return false, fmt.Sprintf("received %q", got)
	})
	return at
}

// seenSince lists the notifications named event about who that arrived at or
// after since, as their arrival times.
func (r *flNotes) seenSince(since time.Time, event, who string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.seen {
		if !x.at.Before(since) && x.n.Event == event && (x.n.Computer == who || x.n.Agent == who) {
			out = append(out, "+"+x.at.Sub(since).Round(time.Millisecond).String())
		}
	}
	return out
}

// flEvents is a buffered channel of an Agent callback's values, with the
// time each arrived.
type flEvents[T any] chan flStamped[T]

type flStamped[T any] struct {
	at time.Time
	v  T
}

func (c flEvents[T]) put(v T) {
	select {
	case c <- flStamped[T]{time.Now(), v}:
	default:
	}
}

// flJoin connects a raw Socket.IO client to serverURL and sends
// server:join_office; it returns the socket (closed at cleanup) and the
// join's answer as the wire's arguments.
func flJoin(t *testing.T, serverURL, office string, role smcp.Role, name string) (*sio.Socket, []json.RawMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, serverURL, sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Handler:   &computer{t: t},
	})
	if err != nil {
		t.Fatalf("dial %s: %v", serverURL, err)
	}
	t.Cleanup(s.Disconnect)
	args, err := flJoinOn(s, office, role, name)
	if err != nil {
		t.Fatalf("join %s as %s: %v", office, name, err)
	}
	return s, args
}

// flJoinOn sends server:join_office on s and returns the answer's
// arguments.
func flJoinOn(s *sio.Socket, office string, role smcp.Role, name string) ([]json.RawMessage, error) {
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office})
	type answer struct {
		m   sio.Message
		err error
	}
	ch := make(chan answer, 1)
	s.Request(smcp.EventJoinOffice, sio.Message{Args: []json.RawMessage{b}}, 15*time.Second, func(m sio.Message, err error) {
		ch <- answer{m, err}
	})
	a := <-ch
	return a.m.Args, a.err
}

// flAnswer renders a join answer as the wire shows it, `true null` or
// `false "reason"`.
func flAnswer(args []json.RawMessage) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = string(a)
	}
	return strings.Join(parts, " ")
}

// flAccepted and flRefused are the exact wire answers of a join.
func flAccepted() string { return "true null" }

func flRefused(reason string) string {
	b, _ := json.Marshal(reason)
	return "false " + string(b)
}

// flShow renders a tool call's result for a failure message.
func flShow(res *smcp.CallToolResult) string {
	if res == nil {
		return "no result"
	}
	return fmt.Sprintf("{isError %v, text %q, meta %v}", res.IsError, res.Text(), res.Meta)
}

// flCall runs one slow call and checks its exact answer.
func flCall(t *testing.T, a *agent.Client, computer, msg string) {
	t.Helper()
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: computer, Tool: "rc__slow", Params: map[string]any{"message": msg}, Timeout: 10 * time.Second})
	if err != nil || res.IsError || res.Text() != "Slow: "+msg {
		t.Fatalf("call %q = %s, %v", msg, flShow(res), err)
	}
}

var flNodeRE = regexp.MustCompile(`node=(\S+)`)

// flNodeID is a node's id, read from its first log line (node=ID).
func flNodeID(t *testing.T, p *harness.Proc) string {
	t.Helper()
	first, _, _ := strings.Cut(p.Logs(), "\n")
	m := flNodeRE.FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("no node= in the first log line %q", first)
	}
	return m[1]
}

// TestClusterNodeKill runs a real `a2c computer` and a Go Agent on
// different nodes of a three-node cluster behind nginx and kills, with
// kill -9, first the Computer's node during a slow tool call, then the
// Agent's node during another:
//
//   - the call to the dead node's Computer ends with the isError result
//     "Computer disconnected before answering" well within its deadline,
//     and the Agent is told notify:leave_office for the Computer within
//     the promised bound (15 s);
//   - the Computer reconnects through the same nginx, which sends it to a
//     live node with no reload, rejoins (its name is refused until the
//     dead node's lease ends, and it retries by itself), the Agent is told
//     notify:enter_office, and the Agent's next call reaches it;
//   - the Agent's call in flight when its own node dies ends at once with
//     ErrConnectionLost; the SDK reconnects through nginx, rejoins (the
//     Agent seat is refused until the dead node's lease ends), and its
//     next call succeeds;
//   - GET /api/offices/{office} on the live node shows each member on the
//     node that now holds it.
//
// The Computer dials nginx from 127.0.0.1; the Agent, whose SDK cannot
// bind a source address, dials through flRelay from another 127.0.0.x,
// chosen so that it lands on a third node (neither the Computer's node nor
// the one nginx moves the Computer to), so every call before the second
// kill crosses nodes.
func TestClusterNodeKill(t *testing.T) {
	redis := harness.Redis(t)
	nodes := harness.Hub(t, 3, redis.URL())
	byAddr := make(map[string]*harness.Proc)
	var addrs, urls []string
	for _, n := range nodes {
		byAddr[n.Addr] = n
		addrs = append(addrs, n.Addr)
		urls = append(urls, n.URL)
	}
	ngx := harness.Nginx(t, addrs)

	// Placement: the Computer on X (nginx's choice for 127.0.0.1), moved to
	// F when X dies (nginx's choice among the others: asked of a probe
	// nginx in front of them only, the same ring without X); the Agent on Z,
	// the third.
	x := ngx.Route(t, "127.0.0.1")
	var others []string
	for _, a := range addrs {
		if a != x {
			others = append(others, a)
		}
	}
	probe := harness.Nginx(t, others)
	f := probe.Route(t, "127.0.0.1")
	probe.Stop()
	z := others[0]
	if z == f {
		z = others[1]
	}
	agentIP := ngx.SourceFor(t, z, "127.0.0.1")
	relay := flRelay(t, ngx.Addr(), agentIP)
	idX, idF, idZ := flNodeID(t, byAddr[x]), flNodeID(t, byAddr[f]), flNodeID(t, byAddr[z])
	t.Logf("placement: Computer on %s (%s), its fallback %s (%s); Agent from %s on %s (%s)", idX, x, idF, f, agentIP, idZ, z)

	office := "fl-" + agent.NewReqID()
	ft := flToolServer(t)
	comp := flComputer(t, ngx.URL(), office, "pc", ft)

	var notes flNotes
	disconnects := make(flEvents[string], 16)
	reconnects := make(flEvents[struct{}], 16)
	reconnectErrs := make(flEvents[error], 64)
	a := dialAgent(t, "http://"+relay, "agent", agent.Options{
		OnNotify:         notes.add,
		OnDisconnect:     disconnects.put,
		OnReconnect:      func() { reconnects.put(struct{}{}) },
		OnReconnectError: reconnectErrs.put,
	})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	waitTools(t, a, "pc", "rc__slow")
	flAwaitOffice(t, urls, office, fmt.Sprintf("agent:agent@%s computer:pc@%s", idZ, idX), 10*time.Second)
	flCall(t, a, "pc", "across")

	// 1. kill -9 the Computer's node while a slow call is in flight.
	type result struct {
		res *smcp.CallToolResult
		err error
		at  time.Time
	}
	const deadline = 20 * time.Second
	inflight := make(chan result, 1)
	go func() {
		res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "rc__slow", Params: map[string]any{"message": "doomed", "ms": 60000}, Timeout: deadline})
		inflight <- result{res, err, time.Now()}
	}()
	ft.awaitEntered(t, "doomed")
	joinsBefore := strings.Count(comp.Logs(), "joined office")
	killed := flKill(t, byAddr[x])

	var r result
	select {
	case r = <-inflight:
	case <-time.After(deadline + 10*time.Second): // the server's slack is 5 s, the SDK's 6 s
		t.Fatalf("the call to the dead node's Computer hung past its %s deadline and both slacks", deadline)
	}
	answered := r.at.Sub(killed)
	if r.err != nil || !r.res.IsError || r.res.Text() != "Computer disconnected before answering" || r.res.Timeout() {
		t.Fatalf("call in flight at the kill = %s, %v; want the isError result \"Computer disconnected before answering\"", flShow(r.res), r.err)
	}
	if answered >= deadline {
		t.Errorf("the disconnected answer came %s after the kill, not within the call's %s deadline", answered, deadline)
	}
	left := notes.await(t, killed, smcp.NotifyLeaveOffice, "pc", flRemovalPromise).Sub(killed)
	t.Logf("Computer's node killed: call answered \"disconnected\" after %s, notify:leave_office after %s", answered.Round(time.Millisecond), left.Round(time.Millisecond))

	// The Computer comes back through the same nginx, on a live node.
	entered := notes.await(t, killed, smcp.NotifyEnterOffice, "pc", 30*time.Second).Sub(killed)
	eventually(t, 5*time.Second, "the Computer's log of its rejoin", func() (bool, string) {
		return strings.Count(comp.Logs(), "joined office") > joinsBefore, comp.Logs()
	})
	refusals := strings.Count(comp.Logs(), "Computer name already in use in this office")
	var retries []string
	for _, line := range strings.Split(comp.Logs(), "\n") {
		if strings.Contains(line, "reconnecting") {
			_, tail, _ := strings.Cut(line, "msg=")
			retries = append(retries, tail)
		}
	}
	t.Logf("the Computer's reconnects: %q", retries)
	live := []string{"http://" + f, "http://" + z}
	flAwaitOffice(t, live, office, fmt.Sprintf("agent:agent@%s computer:pc@%s", idZ, idF), 10*time.Second)
	t.Logf("Computer rejoined through nginx on %s %s after the kill (%d refused joins: name in use until the lease ended)", idF, entered.Round(time.Millisecond), refusals)
	flCall(t, a, "pc", "after the Computer's node died")
	select {
	case d := <-disconnects:
		t.Fatalf("the Agent, on a live node, lost its connection: %q", d.v)
	default:
	}

	// 2. kill -9 the Agent's node while a slow call is in flight.
	go func() {
		res, err := a.CallTool(context.Background(), agent.Call{Computer: "pc", Tool: "rc__slow", Params: map[string]any{"message": "orphan", "ms": 3000}, Timeout: deadline})
		inflight <- result{res, err, time.Now()}
	}()
	ft.awaitEntered(t, "orphan")
	killed = flKill(t, byAddr[z])
	select {
	case r = <-inflight:
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight when the Agent's node died did not end within 10 s")
	}
	if !errors.Is(r.err, agent.ErrConnectionLost) {
		t.Fatalf("call in flight at the Agent's node's death = %s, %v; want ErrConnectionLost", flShow(r.res), r.err)
	}
	lost := r.at.Sub(killed)
	reason := awaitEvent(t, disconnects, "the Agent's OnDisconnect")
	back := awaitEvent(t, reconnects, "the Agent's OnReconnect")
	var refusedRejoins []string
	for len(reconnectErrs) > 0 {
		e := <-reconnectErrs
		refusedRejoins = append(refusedRejoins, fmt.Sprintf("+%s %v", e.at.Sub(killed).Round(time.Millisecond), e.v))
	}
	for _, e := range refusedRejoins {
		if !strings.HasSuffix(e, "a2c: Room already has an agent") {
			t.Errorf("a reconnect failed for another reason than the seat still held by the dead node: %s", e)
		}
	}
	if a.Office() != office || a.Err() != nil {
		t.Fatalf("after reconnect: office %q, err %v", a.Office(), a.Err())
	}
	t.Logf("Agent's node killed: call ended (ErrConnectionLost) after %s; disconnect %q after %s; rejoined after %s; failed attempts: %q",
		lost.Round(time.Millisecond), reason.v, reason.at.Sub(killed).Round(time.Millisecond), back.at.Sub(killed).Round(time.Millisecond), refusedRejoins)
	flAwaitOffice(t, []string{"http://" + f}, office, fmt.Sprintf("agent:agent@%s computer:pc@%s", idF, idF), 10*time.Second)
	flCall(t, a, "pc", "after the Agent's node died")
}

// flEchoComputer answers a tool call with its params as JSON text (the
// Agent compares it with what it sent, so an answer cannot be mixed up
// with another's).
func flEchoComputer(e *sio.Event) (any, bool) {
	if e.Name != smcp.EventToolCall {
		return nil, false
	}
	var req struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(e.Args[0], &req)
	var v any
	_ = json.Unmarshal(req.Params, &v)
	b, _ := json.Marshal(v)
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": string(b)}}, "isError": false}, true
}

// flLoad runs tool calls from one Agent to one Computer without pause,
// from a few goroutines, and checks each answer against its request.
type flLoad struct {
	ok   atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	errs []string
}

func flStartLoad(t *testing.T, a *agent.Client, computer string, workers int) *flLoad {
	l := &flLoad{stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				params := map[string]any{"w": w, "i": i}
				want, _ := json.Marshal(params)
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				res, err := a.CallTool(ctx, agent.Call{Computer: computer, Tool: "b__echo", Params: params, Timeout: 10 * time.Second})
				cancel()
				if err != nil || res.IsError || res.Text() != string(want) {
					l.mu.Lock()
					l.errs = append(l.errs, fmt.Sprintf("%s at %s: %s, %v", want, time.Now().Format("15:04:05.000"), flShow(res), err))
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

// end stops the load and waits for its calls.
func (l *flLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// check fails t if any call failed.
func (l *flLoad) check(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Errorf("%s: %d calls between members of one node failed (of %d); first: %s", what, len(l.errs), int(l.ok.Load())+len(l.errs), l.errs[0])
	}
}

// awaitMore waits until n more calls than now have succeeded.
func (l *flLoad) awaitMore(t *testing.T, n int64, what string) {
	t.Helper()
	base := l.ok.Load()
	eventually(t, 10*time.Second, what, func() (bool, string) {
		return l.ok.Load() >= base+n, fmt.Sprintf("%d calls succeeded", l.ok.Load()-base)
	})
}

// TestClusterRedisRestart runs calls between an Agent and a Computer on
// one node without pause while the cluster's Redis is restarted empty,
// then stopped for longer than a lease and started again:
//
//   - no call between members of one node fails, before, during or after
//     either outage (they touch no Redis);
//   - a join while Redis is down is refused with exactly "Cluster state
//     unavailable; try again shortly", and accepted again once Redis is
//     back (within a few seconds);
//   - a call to a Computer on another node while Redis is down ends with
//     the usual "disconnected" answer, not a hang;
//   - after each return the nodes rebuild the cluster-wide state by
//     themselves: GET /api/offices/{office} on every node and
//     server:list_room show every member, with the same sids (nobody
//     evicted, no client disconnected), calls across nodes work, and the
//     Agent seat of an office held on one node is refused on the other.
func TestClusterRedisRestart(t *testing.T) {
	redis := harness.Redis(t)
	nodes := harness.Hub(t, 2, redis.URL())
	n1, n2 := nodes[0].URL, nodes[1].URL
	urls := []string{n1, n2}

	// office1: Agent and Computer on node1. office2: Computer on node1,
	// Agent on node2.
	office1, office2 := "fl-one-"+agent.NewReqID(), "fl-two-"+agent.NewReqID()
	dialComputer(t, n1, office1, "pc1", flEchoComputer)
	dialComputer(t, n1, office2, "pc2", flEchoComputer)
	disconnects := make(flEvents[string], 16)
	a1 := dialAgent(t, n1, "agent1", agent.Options{OnDisconnect: disconnects.put})
	a2 := dialAgent(t, n2, "agent2", agent.Options{OnDisconnect: disconnects.put})
	if err := a1.Join(ctx10(t), office1); err != nil {
		t.Fatal(err)
	}
	if err := a2.Join(ctx10(t), office2); err != nil {
		t.Fatal(err)
	}
	seats1 := "agent:agent1@node1 computer:pc1@node1"
	seats2 := "agent:agent2@node2 computer:pc2@node1"
	flAwaitOffice(t, urls, office1, seats1, 10*time.Second)
	flAwaitOffice(t, urls, office2, seats2, 10*time.Second)
	sids := func() string {
		var all []flMember
		for _, o := range []string{office1, office2} {
			ms, err := flOffice(n1, o)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ms...)
		}
		var s []string
		for _, m := range all {
			if m.Name != "late" {
				s = append(s, m.Name+"="+m.SID)
			}
		}
		slices.Sort(s)
		return strings.Join(s, " ")
	}
	before := sids()

	cross := func(msg string) (*smcp.CallToolResult, error) {
		return a2.CallTool(ctx10(t), agent.Call{Computer: "pc2", Tool: "b__echo", Params: map[string]any{"m": msg}, Timeout: 5 * time.Second})
	}
	crossOK := func(msg string) {
		t.Helper()
		res, err := cross(msg)
		if want := `{"m":"` + msg + `"}`; err != nil || res.IsError || res.Text() != want {
			t.Fatalf("call across nodes %q = %s, %v", msg, flShow(res), err)
		}
	}
	crossOK("before")

	// rebuilt checks the cluster-wide state after Redis came back.
	rebuilt := func(what string, since time.Time) {
		t.Helper()
		flAwaitOffice(t, urls, office1, seats1, 15*time.Second)
		flAwaitOffice(t, urls, office2, seats2+" computer:late@node2", 15*time.Second)
		t.Logf("%s: every node lists every member %s after Redis answered again", what, time.Since(since).Round(time.Millisecond))
		if got := sids(); got != before {
			t.Fatalf("%s: the members' sids are %s, before %s (evicted and rejoined?)", what, got, before)
		}
		for _, lr := range []struct {
			a    *agent.Client
			want string
		}{{a1, "agent:agent1 computer:pc1"}, {a2, "agent:agent2 computer:late computer:pc2"}} {
			eventually(t, 10*time.Second, what+": server:list_room of "+lr.a.Name(), func() (bool, string) {
				ss, err := lr.a.ListRoom(ctx10(t))
				if err != nil {
					return false, err.Error()
				}
				var names []string
				for _, s := range ss {
					names = append(names, string(s.Role)+":"+s.Name)
				}
				slices.Sort(names)
				got := strings.Join(names, " ")
				return got == lr.want, got
			})
		}
		crossOK(what)
		if _, ans := flJoin(t, n1, office2, smcp.RoleAgent, "intruder"); flAnswer(ans) != flRefused("Room already has an agent") {
			t.Fatalf("%s: a second Agent for office2 on node1 answered %s", what, flAnswer(ans))
		}
		select {
		case d := <-disconnects:
			t.Fatalf("%s: an Agent lost its connection: %q", what, d.v)
		default:
		}
	}

	load := flStartLoad(t, a1, "pc1", 2)
	load.awaitMore(t, 100, "calls on node1 before the restart")

	// 1. Redis restarted empty (stopped, then started on the same port).
	start := time.Now()
	redis.Restart(t)
	up := time.Now()
	load.awaitMore(t, 100, "calls on node1 after the restart")
	t.Logf("Redis restarted in %s", up.Sub(start).Round(time.Millisecond))
	// A Computer that joins now has a seat the rebuilt state must keep.
	late, ans := flJoin(t, n2, office2, smcp.RoleComputer, "late")
	for flAnswer(ans) != flAccepted() {
		if flAnswer(ans) != flRefused(flUnavailable) || time.Since(up) > 10*time.Second {
			t.Fatalf("join after the restart answered %s", flAnswer(ans))
		}
		time.Sleep(100 * time.Millisecond)
		var err error
		if ans, err = flJoinOn(late, office2, smcp.RoleComputer, "late"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("restart: a join was accepted %s after Redis answered", time.Since(up).Round(time.Millisecond))
	rebuilt("after the restart", up)

	// 2. Redis down for longer than a lease (5 s): held down 7 s.
	const outage = 7 * time.Second
	redis.Stop()
	down := time.Now()
	_, ans = flJoin(t, n2, office2, smcp.RoleComputer, "refused")
	if flAnswer(ans) != flRefused(flUnavailable) {
		t.Fatalf("join while Redis is down answered %s, want %s", flAnswer(ans), flRefused(flUnavailable))
	}
	retry, ans := flJoin(t, n1, office1, smcp.RoleComputer, "retry")
	if flAnswer(ans) != flRefused(flUnavailable) {
		t.Fatalf("join on node1 while Redis is down answered %s, want %s", flAnswer(ans), flRefused(flUnavailable))
	}
	callStart := time.Now()
	res, err := cross("during the outage")
	if err != nil || !res.IsError || res.Text() != "Computer disconnected before answering" {
		t.Errorf("a call across nodes while Redis is down = %s, %v; want the \"disconnected\" answer", flShow(res), err)
	}
	t.Logf("outage: a call across nodes answered in %s", time.Since(callStart).Round(time.Microsecond))
	load.awaitMore(t, 100, "calls on node1 while Redis is down")
	time.Sleep(time.Until(down.Add(outage)))
	load.awaitMore(t, 100, "calls on node1 after the lease expired")
	redis.Restart(t) // starts it again (it is stopped)
	up = time.Now()
	t.Logf("Redis was down %s", up.Sub(down).Round(time.Millisecond))
	for {
		ans, err := flJoinOn(retry, office1, smcp.RoleComputer, "retry")
		if err != nil {
			t.Fatal(err)
		}
		if flAnswer(ans) == flAccepted() {
			break
		}
		if flAnswer(ans) != flRefused(flUnavailable) || time.Since(up) > 10*time.Second {
			t.Fatalf("join after Redis returned answered %s", flAnswer(ans))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("outage: a join was accepted %s after Redis answered", time.Since(up).Round(time.Millisecond))
	retry.Disconnect()
	rebuilt("after the outage", up)
	load.awaitMore(t, 100, "calls on node1 at the end")
	load.end()
	load.check(t, "through both outages")
	t.Logf("%d calls between members of node1, none failed", load.ok.Load())
}

// flAddrRE finds a server's address in its first log line.
var flAddrRE = regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)

// TestClusterNodeIDReuse kills (kill -9) a node started with --node-id
// nodeX and at once starts two new processes with the same id:
//
//   - one of them starts within ~7 s (it waits for the dead process's
//     lease to end) and takes the id;
//   - the other, finding the id held by a live node, is refused at start
//     with an error naming the id;
//   - the dead process's member is swept: the Agent on the other node is
//     told notify:leave_office for it, and GET /api/offices no longer
//     lists it;
//   - the new nodeX serves: a Computer of the same name joins it and the
//     Agent's call reaches it across nodes.
func TestClusterNodeIDReuse(t *testing.T) {
	redis := harness.Redis(t)
	other := harness.Hub(t, 1, redis.URL())[0]
	bin := harness.Bin(t, "a2c")
	serverArgs := []string{"server", "--listen", "127.0.0.1:0", "--redis", redis.URL(), "--node-id", "nodeX"}
	old := harness.Run(t, harness.Keyed(exec.Command(bin, serverArgs...)), true)
	office := "fl-" + agent.NewReqID()
	dialComputer(t, old.URL, office, "pc", flEchoComputer)
	var notes flNotes
	a := dialAgent(t, other.URL, "agent", agent.Options{OnNotify: notes.add})
	if err := a.Join(ctx10(t), office); err != nil {
		t.Fatal(err)
	}
	flAwaitOffice(t, []string{other.URL}, office, "agent:agent@node1 computer:pc@nodeX", 10*time.Second)

	killed := flKill(t, old)
	type outcome struct {
		p       *harness.Proc
		addr    string // set when it started
		exited  bool   // set when it ended instead
		elapsed time.Duration
	}
	outcomes := make(chan outcome, 2)
	for range 2 {
		p := harness.Run(t, harness.Keyed(exec.Command(bin, serverArgs...)), false)
		go func() {
			for {
				if m := flAddrRE.FindStringSubmatch(p.Logs()); m != nil {
					outcomes <- outcome{p: p, addr: m[1], elapsed: time.Since(killed)}
					return
				}
				select {
				case <-p.Exited():
					outcomes <- outcome{p: p, exited: true, elapsed: time.Since(killed)}
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	var started, refused *outcome
	for range 2 {
		select {
		case o := <-outcomes:
			if o.exited {
				refused = &o
			} else {
				started = &o
			}
		case <-time.After(20 * time.Second):
			t.Fatal("neither of the two new nodeX processes started or ended within 20 s")
		}
	}
	if started == nil || refused == nil {
		t.Fatalf("of two processes with one node id, want one started and one refused; started %v, refused %v", started != nil, refused != nil)
	}
	refused.p.Stop(flQuiet{t}) // it ended by itself, as it should
	if logs := refused.p.Logs(); !strings.Contains(logs, `"nodeX"`) || !strings.Contains(logs, "in use") {
		t.Errorf("the refused process's error does not name the id; its output:\n%s", logs)
	}
	if code := refused.p.Cmd().ProcessState.ExitCode(); code == 0 {
		t.Errorf("the refused process exited with 0")
	}
	if started.elapsed > 8*time.Second {
		t.Errorf("the new nodeX started %s after the kill; it should wait for the old lease only (~5 s, at most ~7 s)", started.elapsed)
	}
	left := notes.await(t, killed, smcp.NotifyLeaveOffice, "pc", flRemovalPromise).Sub(killed)
	t.Logf("new nodeX started after %s; the duplicate was refused after %s (exit %d: %q); leave notified after %s",
		started.elapsed.Round(time.Millisecond), refused.elapsed.Round(time.Millisecond), refused.p.Cmd().ProcessState.ExitCode(),
		strings.TrimSpace(refused.p.Logs()), left.Round(time.Millisecond))

	newURL := "http://" + started.addr
	flAwaitOffice(t, []string{other.URL, newURL}, office, "agent:agent@node1", 10*time.Second)
	dialComputer(t, newURL, office, "pc", flEchoComputer)
	flAwaitOffice(t, []string{other.URL, newURL}, office, "agent:agent@node1 computer:pc@nodeX", 10*time.Second)
	res, err := a.CallTool(ctx10(t), agent.Call{Computer: "pc", Tool: "b__echo", Params: map[string]any{"m": "again"}, Timeout: 5 * time.Second})
	if err != nil || res.IsError || res.Text() != `{"m":"again"}` {
		t.Fatalf("call to the new nodeX's Computer = %s, %v", flShow(res), err)
	}
}

// TestClusterRedisRestartKeepsMembers checks that Redis coming back
// (restarted empty, or reachable again after more than a lease with its
// data) changes nothing a client can see for members that stayed
// connected to live nodes:
//
//   - restart-newcomer: a join for a seat held on another node, made as
//     soon as the restarted Redis answers, is refused (as "Room already
//     has an agent" or as the "try again" refusal), and the holder keeps
//     its seat and its connection;
//   - restart-no-leave: an Agent is not told notify:leave_office for a
//     Computer on another node that never left (a departure also ends
//     every call in flight to it with "Computer disconnected");
//   - pause-no-sweep: after Redis paused (CLIENT PAUSE ALL) for longer
//     than a lease, so every lease expired while the records stayed, no
//     node sweeps another live node, and no departure is told.
func TestClusterRedisRestartKeepsMembers(t *testing.T) {
	setup := func(t *testing.T) (*harness.RedisServer, []*harness.Proc, string, *flNotes) {
		redis := harness.Redis(t)
		nodes := harness.Hub(t, 2, redis.URL())
		office := "fl-" + agent.NewReqID()
		dialComputer(t, nodes[0].URL, office, "pc", flEchoComputer)
		notes := &flNotes{}
		a := dialAgent(t, nodes[1].URL, "agent", agent.Options{OnNotify: notes.add})
		if err := a.Join(ctx10(t), office); err != nil {
			t.Fatal(err)
		}
		flAwaitOffice(t, []string{nodes[0].URL, nodes[1].URL}, office, "agent:agent@node2 computer:pc@node1", 10*time.Second)
		return redis, nodes, office, notes
	}

	t.Run("restart-newcomer", func(t *testing.T) {
		redis, nodes, office, _ := setup(t)
		redis.Restart(t)
		_, ans := flJoin(t, nodes[0].URL, office, smcp.RoleAgent, "newcomer")
		if got := flAnswer(ans); got != flRefused("Room already has an agent") && got != flRefused(flUnavailable) {
			t.Errorf("a join for the Agent seat held on node2, right after Redis restarted, answered %s", got)
		}
		flAwaitOffice(t, []string{nodes[0].URL, nodes[1].URL}, office, "agent:agent@node2 computer:pc@node1", 10*time.Second)
	})

	t.Run("restart-no-leave", func(t *testing.T) {
		redis, nodes, office, notes := setup(t)
		start := time.Now()
		redis.Restart(t)
		// A Computer joins on node2 at once (accepted, or refused to try
		// again): node2 then reads the office before node1 re-asserted pc.
		want := "agent:agent@node2 computer:pc@node1"
		_, ans := flJoin(t, nodes[1].URL, office, smcp.RoleComputer, "late")
		switch flAnswer(ans) {
		case flAccepted():
			want += " computer:late@node2"
		case flRefused(flUnavailable):
		default:
			t.Fatalf("a join right after the restart answered %s", flAnswer(ans))
		}
		flAwaitOffice(t, []string{nodes[0].URL, nodes[1].URL}, office, want, 10*time.Second)
		eventually(t, 5*time.Second, "both nodes re-asserted", func() (bool, string) {
			for _, n := range nodes {
				if !strings.Contains(n.Logs(), "lease lost: registering again") {
					return false, n.Logs()
				}
			}
			return true, ""
		})
		if got := notes.seenSince(start, smcp.NotifyLeaveOffice, "pc"); len(got) > 0 {
			t.Errorf("the Agent was told notify:leave_office for pc (never left) at %v after the restart; enter_office at %v",
				got, notes.seenSince(start, smcp.NotifyEnterOffice, "pc"))
		}
	})

	t.Run("pause-no-sweep", func(t *testing.T) {
		redis, nodes, office, notes := setup(t)
		start := time.Now()
		redis.Command(t, "CLIENT", "PAUSE", "7000", "ALL") // leases (5 s) expire meanwhile; the records stay
		eventually(t, 15*time.Second, "both nodes back", func() (bool, string) {
			for _, n := range nodes {
				if !strings.Contains(n.Logs(), "Redis back") {
					return false, n.Logs()
				}
			}
			return true, ""
		})
		for _, n := range nodes {
			if strings.Contains(n.Logs(), "dead node swept") {
				t.Errorf("a live node swept another:\n%s", n.Logs())
			}
		}
		if got := notes.seenSince(start, smcp.NotifyLeaveOffice, "pc"); len(got) > 0 {
			t.Errorf("the Agent was told notify:leave_office for pc (never left) at %v after Redis paused", got)
		}
		flAwaitOffice(t, []string{nodes[0].URL, nodes[1].URL}, office, "agent:agent@node2 computer:pc@node1", 10*time.Second)
	})
}
