package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// peer is a test client: it records what it receives and answers
// client:* requests with answer (or never, when answer is nil).
type peer struct {
	t      testing.TB
	sock   *sio.Socket
	answer func(e *sio.Event) any

	mu     sync.Mutex
	events []*sio.Event
}

func (p *peer) Event(_ *sio.Socket, e *sio.Event) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
	if p.answer != nil && smcp.IsClientEvent(e.Name) {
		if v := p.answer(e); v != nil {
			b, _ := json.Marshal(v)
			_ = e.Ack(sio.Message{Args: []json.RawMessage{b}})
		}
	}
}

func (p *peer) Disconnect(*sio.Socket, string) {}

// got returns the payloads received for an event, as strings.
func (p *peer) got(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, e := range p.events {
		if e.Name == name {
			out = append(out, string(e.Args[0]))
		}
	}
	return out
}

func newTestServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(withClusterKey(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		ts.Close()
	})
	return s, ts.URL
}

// testClusterKey is the cluster key of the tests' clustered servers, so
// the suite runs with sealed frames.
var testClusterKey = []byte("server tests' cluster key, 32 B.")

// withClusterKey gives a clustered cfg testClusterKey unless it has a key
// or opted out with an empty (not nil) one.
func withClusterKey(cfg Config) Config {
	if cfg.Cluster.URL != "" && cfg.Cluster.Key == nil {
		cfg.Cluster.Key = testClusterKey
	}
	return cfg
}

func connect(t testing.TB, url string, answer func(*sio.Event) any) *peer {
	t.Helper()
	return connectWith(t, url, nil, answer)
}

// connectWith is connect with options adjusted by opt (when not nil).
func connectWith(t testing.TB, url string, opt func(*sio.ClientOptions), answer func(*sio.Event) any) *peer {
	t.Helper()
	p, err := dialPeer(t, url, opt, answer)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dialPeer is connectWith for a goroutine other than the test's own,
// where t.Fatal must not be called: it returns the dial's error. The
// peer reports later failures with t.Errorf, which any goroutine may call.
func dialPeer(t testing.TB, url string, opt func(*sio.ClientOptions), answer func(*sio.Event) any) (*peer, error) {
	p := &peer{t: t, answer: answer}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Transport: sio.WebSocketOnly,
		Handler:   p,
	}
	if opt != nil {
		opt(&o)
	}
	s, err := sio.Dial(ctx, url, o)
	if err != nil {
		return nil, err
	}
	p.sock = s
	t.Cleanup(s.Disconnect)
	return p, nil
}

// call sends an event with one payload and returns the raw ack arguments.
func (p *peer) call(name string, payload any) []string {
	p.t.Helper()
	var raw json.RawMessage
	if r, ok := payload.(json.RawMessage); ok {
		raw = r
	} else {
		raw, _ = json.Marshal(payload)
	}
	ch := make(chan sio.Message, 1)
	p.sock.Request(name, sio.Message{Args: []json.RawMessage{raw}}, 10*time.Second, func(m sio.Message, err error) {
		if err != nil {
			p.t.Errorf("%s: %v", name, err)
		}
		ch <- m
	})
	m := <-ch
	out := make([]string, len(m.Args))
	for i, a := range m.Args {
		out[i] = string(a)
	}
	return out
}

func (p *peer) join(role smcp.Role, name, office string) string {
	p.t.Helper()
	return strings.Join(p.call(smcp.EventJoinOffice, smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office}), ",")
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func echo(e *sio.Event) any {
	return map[string]any{"content": []any{}, "isError": false, "meta": map[string]any{"echo": json.RawMessage(e.Args[0])}}
}

func TestJoinRules(t *testing.T) {
	_, url := newTestServer(t, Config{})
	c1 := connect(t, url, echo)
	a := connect(t, url, nil)
	b := connect(t, url, nil)
	c1b := connect(t, url, nil)

	steps := []struct {
		who        *peer
		role       smcp.Role
		name, room string
		want       string
	}{
		{c1, smcp.RoleComputer, "c1", "o1", "true,null"},
		{a, smcp.RoleAgent, "a", "o1", "true,null"},
		{a, smcp.RoleAgent, "a", "o1", "true,null"}, // the same join again is not a conflict
		{b, smcp.RoleAgent, "b", "o1", `false,"Room already has an agent"`},
		{c1b, smcp.RoleComputer, "c1", "o1", `false,"Computer name already in use in this office"`},
		{c1b, smcp.RoleComputer, "c1", "o2", "true,null"}, // same name, other office
		{a, smcp.RoleAgent, "a", "o2", `false,"Agent is already in an office; leave it first"`},
		{a, smcp.RoleComputer, "a", "o3", `false,"A connection cannot change its role"`},
		{b, smcp.Role("admin"), "b", "o3", `false,"invalid payload: field \"role\" must be \"agent\" or \"computer\""`},
	}
	for i, s := range steps {
		if got := s.who.join(s.role, s.name, s.room); got != s.want {
			t.Errorf("step %d: join %s/%s/%s = %s, want %s", i, s.role, s.name, s.room, got, s.want)
		}
	}
	if got := c1.got(smcp.NotifyEnterOffice); len(got) != 1 || got[0] != `{"office_id":"o1","agent":"a"}` {
		t.Errorf("c1 notifications = %q", got)
	}
	if got := a.got(smcp.NotifyEnterOffice); len(got) != 0 {
		t.Errorf("the joiner was notified of its own join: %q", got)
	}
	// A Computer switching offices leaves the first one, which is told.
	if got := c1.join(smcp.RoleComputer, "c1", "o4"); got != "true,null" {
		t.Fatalf("switch = %s", got)
	}
	eventually(t, "leave notification", func() bool {
		got := a.got(smcp.NotifyLeaveOffice)
		return len(got) == 1 && got[0] == `{"office_id":"o1","computer":"c1"}`
	})
	if got := a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r1", Computer: "c1", ToolName: "x__y", Timeout: 5}); !strings.Contains(got[0], `"code":4104`) {
		t.Errorf("call to a Computer that left = %s", got)
	}
	if got := a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "nope"}); strings.Join(got, ",") != `false,"Not in this office"` {
		t.Errorf("leave wrong office = %s", got)
	}
	if got := a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o1"}); strings.Join(got, ",") != "true,null" {
		t.Errorf("leave = %s", got)
	}
	if got := a.join(smcp.RoleAgent, "a", "o2"); got != "true,null" {
		t.Errorf("join after leaving = %s", got)
	}
}

func TestRelayErrors(t *testing.T) {
	_, url := newTestServer(t, Config{})
	c := connect(t, url, echo)
	c.join(smcp.RoleComputer, "c", "o1")
	other := connect(t, url, echo)
	other.join(smcp.RoleComputer, "far", "o2")
	a := connect(t, url, nil)

	good := smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Params: json.RawMessage(`{"x":1}`), Timeout: 5}
	if got := a.call(smcp.EventToolCall, good); !strings.HasPrefix(got[0], `{"code":4103,`) {
		t.Fatalf("before join = %s", got)
	}
	a.join(smcp.RoleAgent, "a", "o1")
	cases := []struct {
		name, event string
		payload     any
		wantCode    int
	}{
		{"not an object", smcp.EventToolCall, json.RawMessage(`"x"`), 400},
		{"missing req_id", smcp.EventToolCall, json.RawMessage(`{"agent":"a","computer":"c","tool_name":"t","timeout":5}`), 400},
		{"timeout a string", smcp.EventToolCall, json.RawMessage(`{"agent":"a","req_id":"r","computer":"c","tool_name":"t","timeout":"x"}`), 400},
		{"timeout too large", smcp.EventToolCall, json.RawMessage(`{"agent":"a","req_id":"r","computer":"c","tool_name":"t","timeout":3601}`), 400},
		{"params an array", smcp.EventToolCall, json.RawMessage(`{"agent":"a","req_id":"r","computer":"c","tool_name":"t","timeout":5,"params":[]}`), 400},
		{"no payload", smcp.EventGetTools, json.RawMessage(`null`), 400},
		{"unknown computer", smcp.EventGetTools, smcp.GetToolsReq{Agent: "a", ReqID: "r", Computer: "nobody"}, 404},
		{"computer in another office", smcp.EventGetTools, smcp.GetToolsReq{Agent: "a", ReqID: "r", Computer: "far"}, 4104},
		{"unknown event", "client:nope", json.RawMessage(`{}`), 400},
		{"list another office", smcp.EventListRoom, smcp.ListRoomReq{Agent: "a", ReqID: "r", OfficeID: "o2"}, 4104},
		{"payload too large", smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Timeout: 5,
			Params: json.RawMessage(`{"big":"` + strings.Repeat("x", 600<<10) + `"}`)}, 400},
	}
	for _, tc := range cases {
		got := a.call(tc.event, tc.payload)
		e, ok := smcp.DecodeError([]byte(got[0]))
		if !ok || e.Code != tc.wantCode || e.Message == "" || len(got) != 1 {
			t.Errorf("%s: ack = %q, want a flat ErrorPayload with code %d", tc.name, got, tc.wantCode)
		}
	}
	// After all that the connection still works, and the payload reaches
	// the Computer unchanged.
	got := a.call(smcp.EventToolCall, good)
	want, _ := json.Marshal(good)
	if got[0] != `{"content":[],"isError":false,"meta":{"echo":`+string(want)+`}}` {
		t.Errorf("relayed = %s", got)
	}
	// A put_blob chunk over MaxRequest but within MaxPayload is relayed:
	// the specification sizes chunks to the server's message limit.
	chunk := strings.Repeat("A", 700<<10)
	uploadID, offset := "u", int64(0)
	if got := a.call(smcp.EventPutBlob, smcp.PutBlobReq{Agent: "a", ReqID: "r2", Computer: "c", UploadID: &uploadID, ChunkOffset: &offset, Blob: &chunk}); !strings.Contains(got[0], `"echo":`) {
		t.Errorf("put_blob of 700 KiB: %.200s", got)
	}
	// A Computer may not send client:* requests.
	if got := c.call(smcp.EventGetTools, smcp.GetToolsReq{Agent: "c", ReqID: "r", Computer: "c"}); !strings.HasPrefix(got[0], `{"code":403,`) {
		t.Errorf("computer-sent request = %s", got)
	}
}

// TestRelayDeadlines checks both sides of each relay deadline: no answer
// before it (RelayTimeout; the tool call's timeout plus ToolCallSlack),
// and the timeout answer within a bound after it.
func TestRelayDeadlines(t *testing.T) {
	const relay, slack, late = 150 * time.Millisecond, 150 * time.Millisecond, 2 * time.Second
	_, url := newTestServer(t, Config{RelayTimeout: relay, ToolCallSlack: slack})
	never := connect(t, url, func(*sio.Event) any { return nil })
	never.join(smcp.RoleComputer, "c", "o")
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	within := func(what string, start time.Time, deadline time.Duration) {
		t.Helper()
		if d := time.Since(start); d < deadline || d > deadline+late {
			t.Errorf("%s answered after %v, want between %v and %v", what, d, deadline, deadline+late)
		}
	}

	start := time.Now()
	got := a.call(smcp.EventGetTools, smcp.GetToolsReq{Agent: "a", ReqID: "r1", Computer: "c"})
	within("get_tools", start, relay)
	if e, ok := smcp.DecodeError([]byte(got[0])); !ok || e.Code != 408 {
		t.Errorf("get_tools deadline = %s", got)
	}
	start = time.Now()
	got = a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r2", Computer: "c", ToolName: "b__t", Timeout: 1})
	within("tool_call", start, time.Second+slack)
	var r smcp.CallToolResult
	if err := json.Unmarshal([]byte(got[0]), &r); err != nil || !r.IsError || !r.Timeout() {
		t.Errorf("tool_call deadline = %s", got)
	}
}

func TestComputerLeavesMidCall(t *testing.T) {
	_, url := newTestServer(t, Config{})
	var gone atomic.Bool
	var comp *peer
	comp = connect(t, url, func(e *sio.Event) any {
		gone.Store(true)
		go comp.sock.Disconnect()
		return nil
	})
	comp.join(smcp.RoleComputer, "c", "o")
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	// The answer says the Computer disconnected, at once: neither the
	// tool call's a2c_timeout result nor a 408 (each would also be an
	// error result).
	got := a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Timeout: 30})
	const want = `{"content":[{"type":"text","text":"Computer disconnected before answering"}],"isError":true}`
	if len(got) != 1 || got[0] != want || !gone.Load() {
		t.Errorf("tool_call answer = %q, want [%s]", got, want)
	}
	// Any other request gets a 404 with the same message.
	var comp2 *peer
	comp2 = connect(t, url, func(e *sio.Event) any {
		go comp2.sock.Disconnect()
		return nil
	})
	comp2.join(smcp.RoleComputer, "c2", "o")
	got = a.call(smcp.EventGetTools, smcp.GetToolsReq{Agent: "a", ReqID: "r2", Computer: "c2"})
	const want404 = `{"code":404,"message":"Computer disconnected before answering"}`
	if len(got) != 1 || got[0] != want404 {
		t.Errorf("get_tools answer = %q, want [%s]", got, want404)
	}
}

func TestAgentLeavesMidCall(t *testing.T) {
	srv, url := newTestServer(t, Config{})
	release := make(chan struct{})
	comp := connect(t, url, func(e *sio.Event) any {
		go func() {
			<-release
			_ = e.Ack(sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[],"isError":false}`)}})
		}()
		return nil
	})
	comp.join(smcp.RoleComputer, "c", "o")
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")
	b, _ := json.Marshal(smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Timeout: 30})
	a.sock.Request(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{b}}, 0, func(sio.Message, error) {})
	eventually(t, "the call to reach the Computer", func() bool { return len(comp.got(smcp.EventToolCall)) == 1 })
	a.sock.Disconnect()
	eventually(t, "the agent to leave", func() bool { return len(comp.got(smcp.NotifyLeaveOffice)) == 1 })
	close(release) // the late answer is dropped
	eventually(t, "the relay to finish", func() bool { return srv.inFlight.Load() == 0 })
	if got := comp.got(smcp.NotifyLeaveOffice); got[0] != `{"office_id":"o","agent":"a"}` {
		t.Errorf("leave = %q", got)
	}
}

func TestCancelAndUpdates(t *testing.T) {
	_, url := newTestServer(t, Config{})
	c := connect(t, url, echo)
	c.join(smcp.RoleComputer, "c", "o")
	far := connect(t, url, echo)
	far.join(smcp.RoleComputer, "far", "o2")
	a := connect(t, url, nil)
	a.join(smcp.RoleAgent, "a", "o")

	if got := a.call(smcp.EventCancelToolCall, smcp.AgentCallData{Agent: "a", ReqID: "r9"}); len(got) != 0 {
		t.Errorf("cancel ack = %q, want an empty ack", got)
	}
	if got := a.call(smcp.EventCancelToolCall, json.RawMessage(`"garbage"`)); len(got) != 0 {
		t.Errorf("bad cancel ack = %q, want an empty ack", got)
	}
	for _, ev := range []string{smcp.EventUpdateToolList, smcp.EventUpdateConfig, smcp.EventUpdateDesktop, smcp.EventUpdateSkills} {
		if got := c.call(ev, smcp.ComputerRef{Computer: "spoofed"}); len(got) != 0 {
			t.Errorf("%s ack = %q", ev, got)
		}
	}
	eventually(t, "cancel at the Computer", func() bool {
		got := c.got(smcp.NotifyCancelToolCall)
		return len(got) == 1 && got[0] == `{"agent":"a","req_id":"r9"}`
	})
	eventually(t, "updates at the Agent", func() bool { return len(a.got(smcp.NotifyUpdateSkills)) == 1 })
	for _, n := range []string{smcp.NotifyUpdateToolList, smcp.NotifyUpdateConfig, smcp.NotifyUpdateDesktop, smcp.NotifyUpdateSkills} {
		if got := a.got(n); len(got) != 1 || got[0] != `{"computer":"c"}` {
			t.Errorf("%s = %q", n, got)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(far.events); n != 0 {
		t.Errorf("another office received %d events", n)
	}
	if got := a.got(smcp.NotifyCancelToolCall); len(got) != 0 {
		t.Errorf("the sender received its own cancel")
	}
}

// TestOfficesUnderLoad runs many offices at once, with members joining,
// calling and leaving concurrently, and checks that every call is answered
// by a Computer of the caller's own office. Run it with -race.
func TestOfficesUnderLoad(t *testing.T) {
	_, url := newTestServer(t, Config{})
	const offices, calls = 12, 40
	var wg sync.WaitGroup
	for i := 0; i < offices; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			office := fmt.Sprintf("office-%d", i)
			// Not connect: its t.Fatal would end this goroutine, not the test.
			for j := 0; j < 2; j++ {
				c, err := dialPeer(t, url, nil, func(e *sio.Event) any {
					return map[string]any{"content": []any{}, "isError": false, "meta": map[string]any{"office": office}}
				})
				if err != nil {
					t.Error(err)
					return
				}
				if got := c.join(smcp.RoleComputer, fmt.Sprintf("c%d", j), office); got != "true,null" {
					t.Errorf("computer join = %s", got)
				}
			}
			a, err := dialPeer(t, url, nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if got := a.join(smcp.RoleAgent, "a", office); got != "true,null" {
				t.Errorf("agent join = %s", got)
			}
			for k := 0; k < calls; k++ {
				got := a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: fmt.Sprintf("%s-%d", office, k),
					Computer: fmt.Sprintf("c%d", k%2), ToolName: "b__t", Timeout: 5})
				if len(got) != 1 || !strings.Contains(got[0], `"office":"`+office+`"`) {
					t.Errorf("%s call %d = %q", office, k, got)
					return
				}
				if k == calls/2 { // churn: a visitor comes and goes
					v, err := dialPeer(t, url, nil, nil)
					if err != nil {
						t.Error(err)
						return
					}
					v.join(smcp.RoleComputer, "visitor", office)
					v.sock.Disconnect()
				}
			}
			a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: office})
		}()
	}
	wg.Wait()
}

func TestShutdownDrains(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	release := make(chan struct{})
	comp := connect(t, ts.URL, func(e *sio.Event) any {
		go func() {
			<-release
			_ = e.Ack(sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[],"isError":false}`)}})
		}()
		return nil
	})
	comp.join(smcp.RoleComputer, "c", "o")
	a := connect(t, ts.URL, nil)
	a.join(smcp.RoleAgent, "a", "o")
	answered := make(chan string, 1)
	b, _ := json.Marshal(smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Timeout: 30})
	a.sock.Request(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{b}}, 10*time.Second, func(m sio.Message, err error) {
		if err != nil {
			answered <- err.Error()
			return
		}
		answered <- string(m.Args[0])
	})
	eventually(t, "the call to reach the Computer", func() bool { return len(comp.got(smcp.EventToolCall)) == 1 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	eventually(t, "draining", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.draining
	})
	if got := a.call(smcp.EventGetTools, smcp.GetToolsReq{Agent: "a", ReqID: "r2", Computer: "c"}); !strings.HasPrefix(got[0], `{"code":500,`) {
		t.Errorf("request while draining = %s", got)
	}
	close(release)
	if got := <-answered; got != `{"content":[],"isError":false}` {
		t.Errorf("in-flight call = %s", got)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

func TestGateAndMetrics(t *testing.T) {
	_, url := newTestServer(t, Config{Auth: TokenAuth("secret", "x-api-key")})
	get := func(q string, upgrade bool) (*http.Response, string) {
		req, _ := http.NewRequest("GET", url+"/socket.io/?EIO=4&"+q, nil)
		if upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct{ query, body, header string }{
		{"", `{"code":400,"message":"Missing a2c_version query parameter"}`, ""},
		{"a2c_version=0.3", `{"code":400,"message":"Invalid a2c_version: \"0.3\" (want MAJOR.MINOR.PATCH)"}`, ""},
		{"a2c_version=0.3.2", `{"code":4008,"message":"Protocol version mismatch","server_version":"0.4.0","client_version":"0.3.2","min_supported":"0.4.0","max_supported":"0.4.999"}`, "4008"},
	} {
		for _, tr := range []string{"transport=polling", "transport=websocket"} {
			resp, body := get(tr+"&"+tc.query, tr == "transport=websocket")
			if resp.StatusCode != 400 || body != tc.body || resp.Header.Get("Content-Type") != "application/json" ||
				resp.Header.Get(smcp.HeaderErrorCode) != tc.header {
				t.Errorf("%s %s: %d %s %v", tr, tc.query, resp.StatusCode, body, resp.Header)
			}
		}
	}
	// Authentication: the token in the auth object, a header, or Bearer.
	dial := func(o sio.ClientOptions) error {
		o.Namespace = smcp.Namespace
		o.Query = map[string][]string{smcp.QueryVersion: {"0.4.1"}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := sio.Dial(ctx, url, o)
		if err == nil {
			s.Disconnect()
		}
		return err
	}
	if err := dial(sio.ClientOptions{}); err == nil || err.Error() != "unauthorized" {
		t.Errorf("no token: %v", err)
	}
	if err := dial(sio.ClientOptions{Auth: map[string]string{"x-api-key": "wrong"}}); err == nil {
		t.Error("wrong token accepted")
	}
	for _, o := range []sio.ClientOptions{
		{Auth: map[string]string{"x-api-key": "secret"}},
		{Header: http.Header{"X-Api-Key": {"secret"}}},
		{Header: http.Header{"Authorization": {"Bearer secret"}}, Transport: sio.WebSocketOnly},
	} {
		if err := dial(o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	resp, body := get("", false)
	_ = resp
	if !strings.Contains(body, "Missing") {
		t.Fatal(body)
	}
	mresp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	m, _ := io.ReadAll(mresp.Body)
	for _, want := range []string{
		`a2c_handshakes_refused_total{reason="auth"} 2`,
		`a2c_handshakes_refused_total{reason="version_mismatch"} 2`,
		`a2c_relayed_calls_total{event="client:tool_call",outcome="ok"} 0`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	h, err := http.Get(url + "/healthz")
	if err != nil || h.StatusCode != 200 {
		t.Errorf("healthz: %v", err)
	}
	h.Body.Close()
}
