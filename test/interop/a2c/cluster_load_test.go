package a2c

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// The tests of this file hold a cluster of real `a2c server` nodes on a
// real redis-server (or a three-master Redis Cluster) to the promise of
// issue 13: a client cannot tell the cluster from one server. Seats raced
// for on two nodes have exactly one winner, cross-node calls are neither
// lost, duplicated nor mixed up and cost Redis two publishes each (and a
// same-node call nothing), and every client:* answer, server error and
// notification crosses nodes byte for byte as one server gives it.

// ldWait bounds every single wait of these tests (an ack, an event, an
// HTTP answer).
const ldWait = 20 * time.Second

// ldEvent is one event an ldPeer received, with its raw arguments.
type ldEvent struct {
	name string
	msg  sio.Message
}

// payload is the event's first argument as text ("" when it has none).
func (e ldEvent) payload() string {
	if len(e.msg.Args) == 0 {
		return ""
	}
	return string(e.msg.Args[0])
}

// ldPeer is a Go Socket.IO client of /smcp, Agent or Computer: it records
// every event it receives, in order (unless quiet), and answers requests
// with reply (no answer when reply is nil or returns false).
type ldPeer struct {
	sock  *sio.Socket
	quiet bool
	reply func(p *ldPeer, e *sio.Event) (sio.Message, bool)

	mu     sync.Mutex
	events []ldEvent
}

func (p *ldPeer) Event(_ *sio.Socket, e *sio.Event) {
	if !p.quiet {
		p.mu.Lock()
		p.events = append(p.events, ldEvent{e.Name, ldClone(e.Message)})
		p.mu.Unlock()
	}
	if p.reply != nil {
		if m, ok := p.reply(p, e); ok {
			_ = e.Ack(m)
		}
	}
}

func (p *ldPeer) Disconnect(*sio.Socket, string) {}

// ldDial connects a peer to the server at serverURL (polling, then the
// WebSocket upgrade, as SDKs do); it disconnects when the test ends.
func ldDial(t *testing.T, serverURL string, reply func(*ldPeer, *sio.Event) (sio.Message, bool)) *ldPeer {
	t.Helper()
	p := &ldPeer{reply: reply}
	ctx, cancel := context.WithTimeout(context.Background(), ldWait)
	defer cancel()
	s, err := sio.Dial(ctx, serverURL, sio.ClientOptions{
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}},
		Handler:   p,
	})
	if err != nil {
		t.Fatalf("dial %s: %v", serverURL, err)
	}
	p.sock = s
	t.Cleanup(s.Disconnect)
	return p
}

// ldAck is the answer to one request, and when it came.
type ldAck struct {
	msg  sio.Message
	err  error
	took time.Duration
}

// requestAsync sends event with a raw JSON payload (and binary
// attachments); the ack, or the request's failure after ldWait, arrives
// on the channel.
func (p *ldPeer) requestAsync(event, payload string, att ...[]byte) <-chan ldAck {
	ch := make(chan ldAck, 1)
	start := time.Now()
	p.sock.Request(event, sio.Message{Args: []json.RawMessage{json.RawMessage(payload)}, Attachments: att}, ldWait, func(m sio.Message, err error) {
		ch <- ldAck{ldClone(m), err, time.Since(start)}
	})
	return ch
}

// request is requestAsync waiting for the ack.
func (p *ldPeer) request(t *testing.T, event, payload string, att ...[]byte) sio.Message {
	t.Helper()
	return ldAwait(t, event, p.requestAsync(event, payload, att...)).msg
}

// ldAwait waits for an ack requested with requestAsync.
func ldAwait(t *testing.T, what string, ch <-chan ldAck) ldAck {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a
	case <-time.After(ldWait + 5*time.Second):
		t.Fatalf("%s: no ack", what)
	}
	return ldAck{}
}

// join joins office and fails the test unless acked (true, null).
func (p *ldPeer) join(t *testing.T, role smcp.Role, name, office string) {
	t.Helper()
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: role, Name: name, OfficeID: office})
	if got := ldString(p.request(t, smcp.EventJoinOffice, string(b))); got != "[true,null]" {
		t.Fatalf("join %s %s in %s: ack %s", role, name, office, got)
	}
}

// leave leaves office and fails the test unless acked (true, null).
func (p *ldPeer) leave(t *testing.T, office string) {
	t.Helper()
	b, _ := json.Marshal(smcp.LeaveOfficeReq{OfficeID: office})
	if got := ldString(p.request(t, smcp.EventLeaveOffice, string(b))); got != "[true,null]" {
		t.Fatalf("leave %s: ack %s", office, got)
	}
}

// emit sends event with a raw JSON payload and no ack.
func (p *ldPeer) emit(t *testing.T, event, payload string) {
	t.Helper()
	if err := p.sock.Emit(event, ldMsg(payload)); err != nil {
		t.Fatalf("emit %s: %v", event, err)
	}
}

// seen is a copy of the events received so far.
func (p *ldPeer) seen() []ldEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// await waits for an event named name whose first argument contains
// part, and returns the first such event.
func (p *ldPeer) await(t *testing.T, name, part string) ldEvent {
	t.Helper()
	deadline := time.Now().Add(ldWait)
	for {
		for _, e := range p.seen() {
			if e.name == name && strings.Contains(e.payload(), part) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s holding %s within %s; events: %s", name, part, ldWait, ldNames(p.seen()))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ldNames(evs []ldEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s %s; ", e.name, e.payload())
	}
	return b.String()
}

func ldClone(m sio.Message) sio.Message {
	var c sio.Message
	for _, a := range m.Args {
		c.Args = append(c.Args, slices.Clone(a))
	}
	for _, a := range m.Attachments {
		c.Attachments = append(c.Attachments, slices.Clone(a))
	}
	return c
}

// ldMsg is a message of raw JSON arguments.
func ldMsg(args ...string) sio.Message {
	var m sio.Message
	for _, a := range args {
		m.Args = append(m.Args, json.RawMessage(a))
	}
	return m
}

// ldString is a message as comparable text: its arguments as received,
// then each binary attachment in hex.
func ldString(m sio.Message) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, a := range m.Args {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(a)
	}
	b.WriteByte(']')
	for _, a := range m.Attachments {
		b.WriteString(" +bin:")
		b.WriteString(hex.EncodeToString(a))
	}
	return b.String()
}

// ldRaw is a raw WebSocket session (see rawclient_test.go) that knows its
// sid and the node it is connected to.
type ldRaw struct {
	*rawWS
	sid  string
	node string
}

// ldDialRaw opens a raw session to node p (named node) and connects it to
// /smcp; it is closed when the test ends.
func ldDialRaw(t *testing.T, p *harness.Proc, node string) *ldRaw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ldWait)
	defer cancel()
	c, err := openRawWS(ctx, p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	if err := c.write(nsConnectPacket); err != nil {
		t.Fatal(err)
	}
	for {
		pk, err := c.read()
		if err != nil {
			t.Fatalf("namespace connect: %v", err)
		}
		if rest, ok := strings.CutPrefix(pk, "40"+smcp.Namespace+","); ok {
			var v struct {
				SID string `json:"sid"`
			}
			if json.Unmarshal([]byte(rest), &v) != nil || v.SID == "" {
				t.Fatalf("namespace connect answer %q", pk)
			}
			return &ldRaw{rawWS: c, sid: v.SID, node: node}
		}
	}
}

// ldMember and ldOffice mirror the documented answer of GET
// /api/offices/{office}, to build the exact body expected.
type ldMember struct {
	SID        string `json:"sid"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	A2CVersion string `json:"a2c_version,omitempty"`
	Node       string `json:"node,omitempty"`
}

type ldOffice struct {
	OfficeID string     `json:"office_id"`
	Members  []ldMember `json:"members"`
}

// ldOfficeWant is the body of GET /api/offices/{office} listing exactly
// members.
func ldOfficeWant(office string, members ...ldMember) string {
	if members == nil {
		members = []ldMember{}
	}
	b, _ := json.Marshal(ldOffice{office, members})
	return string(b)
}

func (c *ldRaw) member(role smcp.Role, name string) ldMember {
	return ldMember{SID: c.sid, Name: name, Role: string(role), A2CVersion: smcp.ProtocolVersion, Node: c.node}
}

// ldHTTPClient is a keep-alive client for the nodes' HTTP API.
func ldHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: ldWait, Transport: tr}
}

// ldOfficeBody is GET /api/offices/{office} of node p: the raw body.
func ldOfficeBody(t *testing.T, hc *http.Client, p *harness.Proc, office string) string {
	t.Helper()
	resp, err := hc.Get(p.URL + "/api/offices/" + url.PathEscape(office))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/offices/%s: HTTP %d %s %v", office, resp.StatusCode, b, err)
	}
	return string(b)
}

// ldRaceStats is what ldSeatRace saw.
type ldRaceStats struct {
	rounds, switches int
	wins             map[string]int // node -> rounds won there
	elapsed          time.Duration
	perRound         []time.Duration
}

func (s ldRaceStats) String() string {
	d := slices.Clone(s.perRound)
	slices.Sort(d)
	pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return fmt.Sprintf("%d rounds (%d with a Computer switching offices) in %s: wins %v; per round p50 %s p99 %s max %s",
		s.rounds, s.switches, s.elapsed.Round(time.Millisecond), s.wins, pct(0.5), pct(0.99), d[len(d)-1])
}

// ldSeatRace runs rounds seat races between node p1 and node p2: even
// rounds, two Agents (one on each node) join the same fresh office at the
// same moment; odd rounds, two Computers join a fresh office under the
// same name, and in every tenth of those each Computer first sits in an
// office of its own, so both race by switching offices. Exactly one must
// win; the other must get the single server's refusal, word for word, and
// a refused switch must leave it where it was. After each round
// server:list_room on the winner's node and GET /api/offices/{office} on
// the loser's node must both name the winner alone; then the seats are
// given back.
func ldSeatRace(t *testing.T, p1, p2 *harness.Proc, n1, n2 string, rounds int) ldRaceStats {
	t.Helper()
	hc := ldHTTPClient(t)
	agents := [2]*ldRaw{ldDialRaw(t, p1, n1), ldDialRaw(t, p2, n2)}
	comps := [2]*ldRaw{ldDialRaw(t, p1, n1), ldDialRaw(t, p2, n2)}
	procs := [2]*harness.Proc{p1, p2}
	run := agent.NewReqID()[:8]
	st := ldRaceStats{rounds: rounds, wins: map[string]int{}}
	start := time.Now()
	for i := range rounds {
		began := time.Now()
		office := fmt.Sprintf("ld-race-%s-%d", run, i)
		if i%2 == 0 {
			names := [2]string{"agent-1", "agent-2"}
			w := ldRace(t, i, agents, smcp.RoleAgent, names, office, "Room already has an agent")
			ldCheckSeat(t, hc, agents[w], procs[1-w], smcp.RoleAgent, names[w], office)
			if err := agents[w].leave(office); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			st.wins[agents[w].node]++
		} else {
			switching := (i/2)%10 == 5
			var homes [2]string
			if switching {
				st.switches++
				for k, c := range comps {
					homes[k] = fmt.Sprintf("%s-home%d", office, k+1)
					if err := c.join(string(smcp.RoleComputer), "pc", homes[k]); err != nil {
						t.Fatalf("round %d: %v", i, err)
					}
				}
			}
			names := [2]string{"pc", "pc"}
			w := ldRace(t, i, comps, smcp.RoleComputer, names, office, "Computer name already in use in this office")
			ldCheckSeat(t, hc, comps[w], procs[1-w], smcp.RoleComputer, "pc", office)
			if switching {
				l := 1 - w
				// The winner left its home office; the loser stayed in its own.
				if got, want := ldOfficeBody(t, hc, procs[l], homes[w]), ldOfficeWant(homes[w]); got != want {
					t.Fatalf("round %d: the winner's former office: %s, want %s", i, got, want)
				}
				if got, want := ldOfficeBody(t, hc, procs[w], homes[l]), ldOfficeWant(homes[l], comps[l].member(smcp.RoleComputer, "pc")); got != want {
					t.Fatalf("round %d: the loser's office after a refused switch: %s, want %s", i, got, want)
				}
				if err := comps[l].leave(homes[l]); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			if err := comps[w].leave(office); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			st.wins[comps[w].node]++
		}
		st.perRound = append(st.perRound, time.Since(began))
	}
	st.elapsed = time.Since(start)
	return st
}

// leave leaves office; anything but the ack (true, null) is an error.
func (c *ldRaw) leave(office string) error {
	args, err := c.call(smcp.EventLeaveOffice, map[string]string{"office_id": office})
	if err != nil {
		return err
	}
	if !joinedOK(args) {
		return fmt.Errorf("leave %s on %s: ack %s", office, c.node, args)
	}
	return nil
}

// ldRace sends the two joins at the same moment (each from its own
// goroutine, released together) and returns the index of the winner,
// after checking that exactly one won and the other got refusal.
func ldRace(t *testing.T, round int, cs [2]*ldRaw, role smcp.Role, names [2]string, office, refusal string) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		acks [2][]json.RawMessage
		errs [2]error
	)
	go1 := make(chan struct{})
	for k, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			acks[k], errs[k] = c.call(smcp.EventJoinOffice, map[string]string{"role": string(role), "name": names[k], "office_id": office})
		}()
	}
	close(go1)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	won := [2]bool{joinedOK(acks[0]), joinedOK(acks[1])}
	if won[0] == won[1] {
		t.Fatalf("round %d (%s seat in %s): want exactly one winner, got acks %s (%s) and %s (%s)",
			round, role, office, acks[0], cs[0].node, acks[1], cs[1].node)
	}
	w := 0
	if won[1] {
		w = 1
	}
	want, _ := json.Marshal([]any{false, refusal})
	if got := ldArgsText(acks[1-w]); got != string(want) {
		t.Fatalf("round %d (%s seat in %s): the loser on %s got %s, want %s", round, role, office, cs[1-w].node, got, want)
	}
	return w
}

func ldArgsText(args []json.RawMessage) string {
	return ldString(sio.Message{Args: args})
}

// ldCheckSeat checks that the office holds the winner w alone, as
// server:list_room on w's node and GET /api/offices/{office} on the other
// node (other) tell, each compared byte for byte.
func ldCheckSeat(t *testing.T, hc *http.Client, w *ldRaw, other *harness.Proc, role smcp.Role, name, office string) {
	t.Helper()
	args, err := w.call(smcp.EventListRoom, map[string]string{"agent": name, "req_id": "lr", "office_id": office})
	if err != nil {
		t.Fatal(err)
	}
	want := "[" + string(smcp.Encode(smcp.ListRoomRet{ReqID: "lr", Sessions: []smcp.SessionInfo{
		{SID: w.sid, Name: name, Role: role, OfficeID: office, A2CVersion: smcp.ProtocolVersion},
	}})) + "]"
	if got := ldArgsText(args); got != want {
		t.Fatalf("list_room of %s on %s: %s, want %s", office, w.node, got, want)
	}
	if got, want := ldOfficeBody(t, hc, other, office), ldOfficeWant(office, w.member(role, name)); got != want {
		t.Fatalf("GET /api/offices/%s on the other node: %s, want %s", office, got, want)
	}
}

func TestClusterSeatRace(t *testing.T) {
	r := harness.Redis(t)
	nodes := harness.Hub(t, 2, r.URL())
	st := ldSeatRace(t, nodes[0], nodes[1], "node1", "node2", 1000)
	t.Logf("seat race, two nodes on one Redis: %s", st)
}

// ldEchoAnswer is the answer the echo Computer gives to a tool call: its
// req_id and params sent back, so that each answer proves which call it
// belongs to.
func ldEchoAnswer(reqID, params string) string {
	return `{"content":[{"type":"text","text":"` + reqID + `"}],"isError":false,"structuredContent":{"req_id":"` + reqID + `","params":` + params + `}}`
}

// ldEcho is a Computer answering every tool call with ldEchoAnswer; it
// counts the calls it received by req_id.
type ldEcho struct {
	peer *ldPeer
	mu   sync.Mutex
	got  map[string]int
}

func ldDialEcho(t *testing.T, serverURL, office, name string) *ldEcho {
	t.Helper()
	c := &ldEcho{got: map[string]int{}}
	c.peer = ldDial(t, serverURL, func(_ *ldPeer, e *sio.Event) (sio.Message, bool) {
		var req struct {
			ReqID  string          `json:"req_id"`
			Params json.RawMessage `json:"params"`
		}
		if e.Name != smcp.EventToolCall || len(e.Args) == 0 || json.Unmarshal(e.Args[0], &req) != nil {
			return sio.Message{}, false
		}
		c.mu.Lock()
		c.got[req.ReqID]++
		c.mu.Unlock()
		return ldMsg(ldEchoAnswer(req.ReqID, string(req.Params))), true
	})
	c.peer.quiet = true
	c.peer.join(t, smcp.RoleComputer, name, office)
	return c
}

// received counts the calls whose req_id starts with tag: how many, and
// how many req_ids came more than once.
func (c *ldEcho) received(tag string) (calls, dup int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.got {
		if strings.HasPrefix(id, tag+"-") {
			calls += n
			if n > 1 {
				dup++
			}
		}
	}
	return calls, dup
}

// ldCaller is an Agent on a raw WebSocket that keeps many
// client:tool_call requests in flight: one goroutine reads every packet
// and matches each ack to its call by ack id.
type ldCaller struct {
	raw  *ldRaw
	name string
	done chan struct{}

	mu         sync.Mutex
	nextID     int
	pending    map[int]string // ack id -> the exact ack expected
	sem        chan struct{}  // a slot per call in flight
	answered   int
	mismatched int
	unknown    int // acks of no call in flight: duplicates
	firstBad   string
}

func ldDialCaller(t *testing.T, p *harness.Proc, node, office, name string) *ldCaller {
	t.Helper()
	raw := ldDialRaw(t, p, node)
	if err := raw.join(string(smcp.RoleAgent), name, office); err != nil {
		t.Fatal(err)
	}
	c := &ldCaller{raw: raw, name: name, nextID: 1000, pending: map[int]string{}, done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() {
		raw.close()
		<-c.done
	})
	return c
}

// read owns the connection's reads until it closes (at cleanup).
func (c *ldCaller) read() {
	defer close(c.done)
	prefix := "43" + smcp.Namespace + ","
	for {
		_ = c.raw.ws.SetReadDeadline(time.Time{})
		_, b, err := c.raw.ws.ReadMessage()
		if err != nil {
			return
		}
		p := string(b)
		if p == "2" {
			if c.raw.write("3") != nil {
				return
			}
			continue
		}
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		i := strings.IndexByte(rest, '[')
		id, err := strconv.Atoi(rest[:max(i, 0)])
		if i < 0 || err != nil {
			continue
		}
		c.mu.Lock()
		want, found := c.pending[id]
		if found {
			delete(c.pending, id)
			c.answered++
			if got := rest[i:]; got != want {
				c.mismatched++
				if c.firstBad == "" {
					c.firstBad = fmt.Sprintf("ack %d: %s, want %s", id, got, want)
				}
			}
		} else {
			c.unknown++
		}
		sem := c.sem
		c.mu.Unlock()
		if found {
			<-sem
		}
	}
}

// ldCallStats is the outcome of one ldCaller.run.
type ldCallStats struct {
	calls, answered, lost, mismatched, duplicated int
	firstBad                                      string
	elapsed                                       time.Duration
}

func (s ldCallStats) String() string {
	return fmt.Sprintf("%d calls in %s (%.0f/s): %d answered, %d lost, %d duplicated, %d mismatched",
		s.calls, s.elapsed.Round(time.Millisecond), float64(s.calls)/s.elapsed.Seconds(), s.answered, s.lost, s.duplicated, s.mismatched)
}

// run makes n tool calls to computer, at most conc in flight, with req_ids
// tag-0 … tag-(n-1), and waits for every answer (a call unanswered ldWait
// after the last answer is lost).
func (c *ldCaller) run(t *testing.T, computer, tag string, n, conc int) ldCallStats {
	t.Helper()
	sem := make(chan struct{}, conc)
	c.mu.Lock()
	c.sem = sem
	a0, m0, u0 := c.answered, c.mismatched, c.unknown
	c.firstBad = ""
	c.mu.Unlock()
	start := time.Now()
	stuck := false
	for i := 0; i < n && !stuck; i++ {
		select {
		case sem <- struct{}{}:
		case <-time.After(ldWait):
			stuck = true
			continue
		}
		rid := tag + "-" + strconv.Itoa(i)
		params := `{"i":` + strconv.Itoa(i) + `,"s":"é\u00e9 ` + rid + `"}`
		req := `{"agent":"` + c.name + `","req_id":"` + rid + `","computer":"` + computer + `","tool_name":"t__echo","params":` + params + `,"timeout":30}`
		c.mu.Lock()
		id := c.nextID
		c.nextID++
		c.pending[id] = "[" + ldEchoAnswer(rid, params) + "]"
		c.mu.Unlock()
		if err := c.raw.write("42" + smcp.Namespace + "," + strconv.Itoa(id) + `["` + smcp.EventToolCall + `",` + req + "]"); err != nil {
			t.Fatal(err)
		}
	}
	// Every slot back means every call in flight was answered.
	for range conc {
		select {
		case sem <- struct{}{}:
		case <-time.After(ldWait):
		}
	}
	elapsed := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ldCallStats{calls: n, answered: c.answered - a0, lost: len(c.pending), mismatched: c.mismatched - m0,
		duplicated: c.unknown - u0, firstBad: c.firstBad, elapsed: elapsed}
	if stuck {
		st.lost = n - st.answered
	}
	clear(c.pending)
	return st
}

// ldCmdStats reads INFO commandstats of the servers: the calls of each
// command (subcommands as Redis names them, "client|setinfo"), summed.
func ldCmdStats(t *testing.T, rs ...*harness.RedisServer) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, r := range rs {
		for line := range strings.Lines(r.Command(t, "INFO", "commandstats")) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
			if !ok {
				continue
			}
			name, stats, _ := strings.Cut(rest, ":")
			calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				t.Fatalf("commandstats line %q", line)
			}
			out[name] += n
		}
	}
	return out
}

// ldDelta is after minus before, without zeroes and without the INFO
// commands the test itself sends.
func ldDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if k != "info" && v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// ldBackgroundPerTick is what one node sends Redis every second whatever
// the load (see server/cluster/state.go and lease.go): the keeper's
// renewal of its lease (the renew script, EVALSHA, and the GET and
// PEXPIRE it runs: Redis counts a script's commands too) and the SADD
// that keeps its registration; the sweeper's SMEMBERS of the registry
// and one judge script per node, its own included (EVALSHA and its
// EXISTS). A script Redis does not know yet is sent once more (EVAL, or
// SCRIPT LOAD then EVALSHA); PING is the health check of a subscription
// connection that heard nothing for a while.
func ldBackgroundPerTick(nodes int) map[string]int64 {
	return map[string]int64{"evalsha": 1 + int64(nodes), "get": 1, "pexpire": 1, "sadd": 1,
		"smembers": 1, "exists": int64(nodes), "eval": 1, "script|load": 1, "ping": 1}
}

// ldConnSetup are the commands the client library sends on a new
// connection (HELLO, then CLIENT SETNAME with the node's name). A young
// node's pool grows by a connection when a heartbeat or a sweep runs
// while the frame senders hold the others, and settles at four or five
// connections (measured: none more over six batches of 10,000 calls).
// That is not per call; ldConnBound per node bounds it in any one batch.
var ldConnSetup = map[string]bool{"hello": true, "client|setname": true, "client|setinfo": true}

const ldConnBound = 5

// ldCheckCommands checks the Redis commands counted while calls ran for
// elapsed on a cluster of nodes: publishCmd exactly wantPublish times,
// the background commands no more than their ticks allow (their count
// does not grow with the calls), connection set-ups no more than
// ldConnBound per node, and no other command at all.
func ldCheckCommands(t *testing.T, delta map[string]int64, nodes int, elapsed time.Duration, publishCmd string, wantPublish int64) {
	t.Helper()
	ticks := int64(elapsed/time.Second) + 2
	per := ldBackgroundPerTick(nodes)
	if got := delta[publishCmd]; got != wantPublish {
		t.Errorf("%s: %d, want %d", publishCmd, got, wantPublish)
	}
	for cmd, n := range delta {
		switch {
		case cmd == publishCmd:
		case ldConnSetup[cmd]:
			if bound := int64(ldConnBound * nodes); n > bound {
				t.Errorf("%s: %d during the calls, more new connections than %d", cmd, n, bound)
			}
		case per[cmd] > 0:
			if bound := per[cmd] * int64(nodes) * ticks; n > bound {
				t.Errorf("%s: %d during the calls, more than the background's %d (%d nodes × %d ticks × %d)", cmd, n, bound, nodes, ticks, per[cmd])
			}
		default:
			t.Errorf("%s: %d during the calls; no such command belongs on the call path", cmd, n)
		}
	}
}

// ldNodeFrames is a node's a2c_cluster_frames_total, every direction and
// kind summed.
func ldNodeFrames(t *testing.T, p *harness.Proc) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ldWait)
	defer cancel()
	m, err := serverMetrics(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	return m["a2c_cluster_frames_total"]
}

// ldCallsCase is a batch of calls from caller to computer (served by
// echo) on a cluster of nodes whose Redis servers are redis: each call
// must cost perCall times pubCmd, and as many frames counted by the node
// frames (the caller's).
type ldCallsCase struct {
	caller   *ldCaller
	echo     *ldEcho
	computer string
	redis    []*harness.RedisServer
	nodes    int
	frames   *harness.Proc
	pubCmd   string
	perCall  int64
}

// run makes n calls, conc in flight, and checks them: none lost,
// duplicated (at either end) or mismatched; Redis saw pubCmd perCall
// times per call and nothing else but the background (ldCheckCommands);
// the frame counter agrees. It returns the calls' figures and the Redis
// commands counted meanwhile.
func (cs ldCallsCase) run(t *testing.T, tag string, n, conc int) (ldCallStats, map[string]int64) {
	t.Helper()
	f0 := ldNodeFrames(t, cs.frames)
	before := ldCmdStats(t, cs.redis...)
	st := cs.caller.run(t, cs.computer, tag, n, conc)
	after := ldCmdStats(t, cs.redis...)
	delta := ldDelta(before, after)
	f1 := ldNodeFrames(t, cs.frames)
	if st.answered != n || st.lost != 0 || st.mismatched != 0 || st.duplicated != 0 {
		t.Errorf("%s; first mismatch: %s", st, st.firstBad)
	}
	if got, dup := cs.echo.received(tag); got != n || dup != 0 {
		t.Errorf("the Computer received %d calls (%d req_ids more than once), want %d once each", got, dup, n)
	}
	ldCheckCommands(t, delta, cs.nodes, st.elapsed, cs.pubCmd, cs.perCall*int64(n))
	if got, want := f1-f0, float64(cs.perCall*int64(n)); got != want {
		t.Errorf("a2c_cluster_frames_total of the Agent's node grew by %.0f, want %.0f", got, want)
	}
	return st, delta
}

// ldWarmUp calls each computer until a little more than a second of load
// has passed (so that a heartbeat and a sweep ran beside it): the frame
// senders, the subscriptions and the Redis connection pools are in place
// before anything is counted.
func ldWarmUp(t *testing.T, caller *ldCaller, computers ...string) {
	t.Helper()
	start := time.Now()
	for i := 0; i == 0 || time.Since(start) < 1200*time.Millisecond; i++ {
		for _, c := range computers {
			tag := "warm-" + strconv.Itoa(i) + "-" + c
			if st := caller.run(t, c, tag, 500, 32); st.answered != 500 || st.mismatched+st.duplicated+st.lost != 0 {
				t.Fatalf("warm-up: %s; %s", st, st.firstBad)
			}
		}
	}
}

// TestClusterCrossNodeCalls makes 10,000 tool calls from an Agent on
// node1 to a Computer on node1, then 10,000 to a Computer on node2, 32 in
// flight. Each answer carries its call's req_id and params back, so a lost,
// duplicated or crossed answer is seen. Redis's own INFO commandstats,
// read before and after each batch, must show two PUBLISHes per
// cross-node call (request and answer) and none per same-node call, and
// no other command but the nodes' background (heartbeat and sweeper, a
// few per second whatever the load), bounded by the batch's duration.
func TestClusterCrossNodeCalls(t *testing.T) {
	r := harness.Redis(t)
	nodes := harness.Hub(t, 2, r.URL())
	office := "ld-calls-" + agent.NewReqID()
	remote := ldDialEcho(t, nodes[1].URL, office, "echo-remote")
	local := ldDialEcho(t, nodes[0].URL, office, "echo-local")
	caller := ldDialCaller(t, nodes[0], "node1", office, "agent-calls")
	ldWarmUp(t, caller, "echo-local", "echo-remote")
	const n = 10000
	t.Run("same-node", func(t *testing.T) {
		st, delta := ldCallsCase{caller: caller, echo: local, computer: "echo-local", redis: []*harness.RedisServer{r},
			nodes: 2, frames: nodes[0], pubCmd: "publish", perCall: 0}.run(t, "local", n, 32)
		t.Logf("same node: %s; Redis commands meanwhile (all background): %v", st, delta)
	})
	t.Run("cross-node", func(t *testing.T) {
		st, delta := ldCallsCase{caller: caller, echo: remote, computer: "echo-remote", redis: []*harness.RedisServer{r},
			nodes: 2, frames: nodes[0], pubCmd: "publish", perCall: 2}.run(t, "remote", n, 32)
		t.Logf("cross node: %s; Redis commands meanwhile: %v; publishes per call %.4f", st, delta, float64(delta["publish"])/n)
	})
}

// ldBlob is the binary attachment of the get_blob answer and of the
// put_blob chunk: every byte value once.
var ldBlob = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// ldRequest is the payload of a client:* request from agent-a to
// computer, with req_id rid; a tool call names tool and has a one-second
// timeout (so that a call no one answers ends in 1 s + the server's
// slack).
func ldRequest(event, computer, rid, tool string) string {
	head := `{"agent":"agent-a","req_id":"` + rid + `","computer":"` + computer + `"`
	switch event {
	case smcp.EventToolCall:
		return head + `,"tool_name":"` + tool + `","params":{"x":"\u00e9 é"},"timeout":1}`
	case smcp.EventGetDesktop:
		return head + `,"desktop_size":3,"window":"window://a/1"}`
	case smcp.EventGetResources:
		return head + `,"mcp_server":"b"}`
	case smcp.EventGetSkill:
		return head + `,"name":"s","rel_path":"SKILL.md"}`
	case smcp.EventGetBlob:
		return head + `,"blob_handle":"h-1","chunk_offset":0,"max_chunk_bytes":4096}`
	case smcp.EventPutBlob:
		return head + `,"total_size":256,"sha256":"40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880","eof":true,"blob":{"_placeholder":true,"num":0}}`
	}
	return head + "}"
}

// ldAnswerOf is the answer a Computer of TestClusterEveryEvent gives to a
// client:* request: odd spacing and escapes that any re-encoding would
// change, two arguments for get_desktop, a binary attachment for get_blob,
// and for put_blob the chunk's own attachment sent back.
func ldAnswerOf(e *sio.Event) (sio.Message, bool) {
	if !strings.HasPrefix(e.Name, "client:") || len(e.Args) == 0 {
		return sio.Message{}, false
	}
	var req struct {
		ReqID string `json:"req_id"`
	}
	_ = json.Unmarshal(e.Args[0], &req)
	rid, _ := json.Marshal(req.ReqID)
	switch e.Name {
	case smcp.EventToolCall:
		return ldMsg(`{"content":[ {"type":"text","text":"ok \u00e9 é"} ],"isError":false, "structuredContent":{"req_id":` + string(rid) + `}}`), true
	case smcp.EventGetDesktop:
		return ldMsg(`{"req_id":`+string(rid)+`,"desktops":["window://a/1\n\nhello \ud83d\ude00"]}`, `"second argument"`), true
	case smcp.EventGetBlob:
		m := ldMsg(`{"req_id":` + string(rid) + `,"blob_handle":"h-1","blob":{"_placeholder":true,"num":0},"eof":true}`)
		m.Attachments = [][]byte{ldBlob}
		return m, true
	case smcp.EventPutBlob:
		m := ldMsg(`{"req_id":` + string(rid) + `,"upload_id":"0123456789abcdef0123456789abcdef","chunk_offset":0,"echo":{"_placeholder":true,"num":0}}`)
		m.Attachments = ldClone(e.Message).Attachments
		return m, true
	}
	return ldMsg(`{ "req_id" : ` + string(rid) + ` , "event":"` + e.Name + `", "x":"\u00e9", "n":1.50 }`), true
}

// ldComputer is office A's Computer "pc" of TestClusterEveryEvent: it
// answers with ldAnswerOf and keeps what it sent by req_id; a tool call
// of the tool "hold" is answered only when its notify:tool_call_cancel
// arrives (so a cancel that overtook its call leaves the call unanswered
// until its deadline).
type ldComputer struct {
	mu   sync.Mutex
	sent map[string]sio.Message
	held map[string]*sio.Event
}

func (c *ldComputer) reply(_ *ldPeer, e *sio.Event) (sio.Message, bool) {
	var req struct {
		ReqID    string `json:"req_id"`
		ToolName string `json:"tool_name"`
	}
	if len(e.Args) > 0 {
		_ = json.Unmarshal(e.Args[0], &req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e.Name == smcp.EventToolCall && req.ToolName == "hold":
		c.held[req.ReqID] = e
		return sio.Message{}, false
	case e.Name == smcp.NotifyCancelToolCall:
		if h := c.held[req.ReqID]; h != nil {
			delete(c.held, req.ReqID)
			m := ldMsg(`{"content":[],"isError":true,"structuredContent":{"cancelled":"` + req.ReqID + `"}}`)
			c.sent[req.ReqID] = m
			_ = h.Ack(m)
		}
		return sio.Message{}, false
	}
	m, ok := ldAnswerOf(e)
	if ok {
		c.sent[req.ReqID] = m
	}
	return m, ok
}

func (c *ldComputer) answer(rid string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.sent[rid]
	if !ok {
		return "(no answer sent)"
	}
	return ldString(m)
}

// ldWorld places the peers of ldEveryEvent: the Agents' server, the
// Computers' server, and the server of the Computer of a third office.
// For one server alone, all three are the same.
type ldWorld struct{ agents, computers, third string }

// ldEveryEvent plays one fixed scenario in w and returns what the clients
// received, by outcome name, as raw text (ldString): every client:* answer,
// every error of the server, every notification. Office, peer and req_id
// names are the same in every world, so the outcomes of a cluster and of
// one server must be equal byte for byte; only sids differ, and list_room
// shows names in their place. It also checks, in each world, that each
// answer is the Computer's own, the error codes, the deadlines,
// server:tool_call_cancel arriving after the call it cancels, and that a
// second office on the same servers hears none of it. slow adds the tool
// call that ends in a2c_timeout (1 s + the server's 5 s slack).
func ldEveryEvent(t *testing.T, w ldWorld, slow bool) map[string]string {
	out := map[string]string{}
	// Office B, the bystander: an Agent and a Computer named like office
	// A's, on the same servers.
	agentB := ldDial(t, w.agents, nil)
	agentB.join(t, smcp.RoleAgent, "agent-b", "office-b")
	pcB := ldDial(t, w.computers, func(_ *ldPeer, e *sio.Event) (sio.Message, bool) { return ldAnswerOf(e) })
	pcB.join(t, smcp.RoleComputer, "pc", "office-b")
	agentB.await(t, smcp.NotifyEnterOffice, `"computer":"pc"`)
	far := ldDial(t, w.third, nil)
	far.join(t, smcp.RoleComputer, "far", "office-z")

	comp := &ldComputer{sent: map[string]sio.Message{}, held: map[string]*sio.Event{}}
	pc := ldDial(t, w.computers, comp.reply)
	pc.join(t, smcp.RoleComputer, "pc", "office-a")
	silent := ldDial(t, w.computers, nil)
	silent.join(t, smcp.RoleComputer, "silent", "office-a")
	agentA := ldDial(t, w.agents, nil)
	agentA.join(t, smcp.RoleAgent, "agent-a", "office-a")
	out["notify:enter_office of the Agent, at a Computer"] = pc.await(t, smcp.NotifyEnterOffice, `"agent":"agent-a"`).payload()

	// Requests no Computer answers, first: their deadlines run meanwhile.
	late408 := agentA.requestAsync(smcp.EventGetTools, ldRequest(smcp.EventGetTools, "silent", "r-408", ""))
	var lateTimeout <-chan ldAck
	if slow {
		lateTimeout = agentA.requestAsync(smcp.EventToolCall, ldRequest(smcp.EventToolCall, "silent", "r-timeout", "b__echo"))
	}

	for _, ev := range smcp.DefaultProfile().ClientEvents() {
		rid := "r-" + ev
		var att [][]byte
		if ev == smcp.EventPutBlob {
			att = [][]byte{ldBlob}
		}
		got := ldString(agentA.request(t, ev, ldRequest(ev, "pc", rid, "b__echo"), att...))
		out["answer to "+ev] = got
		if want := comp.answer(rid); got != want {
			t.Errorf("%s: the Agent got %s, the Computer answered %s", ev, got, want)
		}
	}

	// The server's own errors.
	stranger := ldDial(t, w.agents, nil)
	out["4103 from an Agent in no office"] = ldString(stranger.request(t, smcp.EventGetTools, ldRequest(smcp.EventGetTools, "pc", "r-4103", "")))
	out["403 to a Computer sending client:*"] = ldString(pc.request(t, smcp.EventGetTools, ldRequest(smcp.EventGetTools, "silent", "r-403", "")))
	out["404 no such Computer"] = ldString(agentA.request(t, smcp.EventGetTools, ldRequest(smcp.EventGetTools, "nobody", "r-404", "")))
	out["404 no such Computer, tool call"] = ldString(agentA.request(t, smcp.EventToolCall, ldRequest(smcp.EventToolCall, "nobody", "r-404t", "b__echo")))
	out["4104 Computer in another office"] = ldString(agentA.request(t, smcp.EventGetTools, ldRequest(smcp.EventGetTools, "far", "r-4104", "")))
	out["4104 Computer in another office, tool call"] = ldString(agentA.request(t, smcp.EventToolCall, ldRequest(smcp.EventToolCall, "far", "r-4104t", "b__echo")))
	out["400 invalid payload"] = ldString(agentA.request(t, smcp.EventToolCall, strings.Replace(ldRequest(smcp.EventToolCall, "pc", "r-400", "b__echo"), `"timeout":1`, `"timeout":0`, 1)))
	for key, code := range map[string]int{
		"4103 from an Agent in no office": smcp.CodeNotInRoom, "403 to a Computer sending client:*": smcp.CodeForbidden,
		"404 no such Computer": smcp.CodeNotFound, "404 no such Computer, tool call": smcp.CodeNotFound,
		"4104 Computer in another office": smcp.CodeCrossRoom, "4104 Computer in another office, tool call": smcp.CodeCrossRoom,
		"400 invalid payload": smcp.CodeBadRequest,
	} {
		if got := ldCode(out[key]); got != code {
			t.Errorf("%s: %s", key, out[key])
		}
	}

	// A Computer that disconnects while a call waits for it.
	for _, dc := range []struct{ name, event string }{{"dc1", smcp.EventToolCall}, {"dc2", smcp.EventGetTools}} {
		p := ldDial(t, w.computers, func(p *ldPeer, e *sio.Event) (sio.Message, bool) {
			if strings.HasPrefix(e.Name, "client:") {
				go p.sock.Disconnect()
			}
			return sio.Message{}, false
		})
		p.join(t, smcp.RoleComputer, dc.name, "office-a")
		out["notify:enter_office of "+dc.name] = agentA.await(t, smcp.NotifyEnterOffice, `"computer":"`+dc.name+`"`).payload()
		out["Computer disconnected mid-call, "+dc.event] = ldString(agentA.request(t, dc.event, ldRequest(dc.event, dc.name, "r-"+dc.name, "b__echo")))
		out["notify:leave_office of "+dc.name+" (disconnected)"] = agentA.await(t, smcp.NotifyLeaveOffice, `"computer":"`+dc.name+`"`).payload()
	}
	if got := out["Computer disconnected mid-call, "+smcp.EventToolCall]; !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "Computer disconnected before answering") {
		t.Errorf("tool call to a Computer that disconnected: %s", got)
	}
	if got := out["Computer disconnected mid-call, "+smcp.EventGetTools]; ldCode(got) != smcp.CodeNotFound || !strings.Contains(got, "Computer disconnected before answering") {
		t.Errorf("get_tools to a Computer that disconnected: %s", got)
	}

	// A Computer that joins and leaves.
	temp := ldDial(t, w.computers, nil)
	temp.join(t, smcp.RoleComputer, "temp", "office-a")
	out["notify:enter_office of a Computer"] = agentA.await(t, smcp.NotifyEnterOffice, `"computer":"temp"`).payload()
	temp.leave(t, "office-a")
	out["notify:leave_office of a Computer"] = agentA.await(t, smcp.NotifyLeaveOffice, `"computer":"temp"`).payload()

	// server:update_* from the Computer, notify:* at the Agent.
	for _, u := range [][2]string{
		{smcp.EventUpdateToolList, smcp.NotifyUpdateToolList}, {smcp.EventUpdateConfig, smcp.NotifyUpdateConfig},
		{smcp.EventUpdateDesktop, smcp.NotifyUpdateDesktop}, {smcp.EventUpdateSkills, smcp.NotifyUpdateSkills},
	} {
		pc.emit(t, u[0], `{"computer":"pc"}`)
		out[u[1]] = ldString(agentA.await(t, u[1], "").msg)
	}

	// server:tool_call_cancel sent right behind the call it cancels must
	// reach the Computer after that call. Many pairs: a cancel that can
	// overtake its call does so only now and then.
	const pairs = 200
	var holds []<-chan ldAck
	for k := range pairs {
		rid := "cx-" + strconv.Itoa(k)
		holds = append(holds, agentA.requestAsync(smcp.EventToolCall, ldRequest(smcp.EventToolCall, "pc", rid, "hold")))
		agentA.emit(t, smcp.EventCancelToolCall, `{"agent":"agent-a","req_id":"`+rid+`"}`)
	}
	for k, h := range holds {
		rid := "cx-" + strconv.Itoa(k)
		got := ldString(ldAwait(t, "held call "+rid, h).msg)
		if want := comp.answer(rid); got != want {
			t.Errorf("held call %s: the Agent got %s, the Computer answered %s (did the cancel overtake the call?)", rid, got, want)
		}
		if k == 0 {
			out["answer to a cancelled call"] = got
		}
	}
	evs := pc.seen()
	for k := range pairs {
		rid := `"req_id":"cx-` + strconv.Itoa(k) + `"`
		call, cancel, n := -1, -1, 0
		for i, e := range evs {
			switch {
			case e.name == smcp.EventToolCall && strings.Contains(e.payload(), rid):
				call = i
			case e.name == smcp.NotifyCancelToolCall && strings.Contains(e.payload(), rid):
				cancel = i
				n++
				if k == 0 {
					out[smcp.NotifyCancelToolCall] = ldString(e.msg)
				}
			}
		}
		if call < 0 || cancel < call || n != 1 {
			t.Errorf("cx-%d at the Computer: the call at %d, the cancel at %d (%d cancels); want the call first and one cancel", k, call, cancel, n)
		}
	}

	// list_room across nodes, with names in place of the sids.
	lr := ldString(agentA.request(t, smcp.EventListRoom, `{"agent":"agent-a","req_id":"r-list","office_id":"office-a"}`))
	want := "[" + string(smcp.Encode(smcp.ListRoomRet{ReqID: "r-list", Sessions: []smcp.SessionInfo{
		{SID: agentA.sock.ID(), Name: "agent-a", Role: smcp.RoleAgent, OfficeID: "office-a", A2CVersion: smcp.ProtocolVersion},
		{SID: pc.sock.ID(), Name: "pc", Role: smcp.RoleComputer, OfficeID: "office-a", A2CVersion: smcp.ProtocolVersion},
		{SID: silent.sock.ID(), Name: "silent", Role: smcp.RoleComputer, OfficeID: "office-a", A2CVersion: smcp.ProtocolVersion},
	}})) + "]"
	if lr != want {
		t.Errorf("list_room: %s, want %s", lr, want)
	}
	out["list_room"] = strings.NewReplacer(agentA.sock.ID(), "<sid agent-a>", pc.sock.ID(), "<sid pc>", silent.sock.ID(), "<sid silent>").Replace(lr)

	// The requests no one answered end at their deadlines.
	a := ldAwait(t, "get_tools to a silent Computer", late408)
	out["408 no answer within --relay-timeout"] = ldString(a.msg)
	if ldCode(ldString(a.msg)) != smcp.CodeTimeout || a.took < time.Second || a.took > 3*time.Second {
		t.Errorf("get_tools to a silent Computer: %s after %s, want a 408 after 1 s", ldString(a.msg), a.took)
	}
	if slow {
		a := ldAwait(t, "tool call to a silent Computer", lateTimeout)
		got := ldString(a.msg)
		out["a2c_timeout of a tool call"] = got
		if !strings.Contains(got, `"a2c_timeout":true`) || !strings.Contains(got, `"isError":true`) || a.took < 6*time.Second || a.took > 8*time.Second {
			t.Errorf("tool call to a silent Computer: %s after %s, want a2c_timeout after 1 s + 5 s", got, a.took)
		}
	}

	// The Agent leaves: the Computer on the other node hears it.
	agentA.leave(t, "office-a")
	out["notify:leave_office of the Agent, at a Computer"] = pc.await(t, smcp.NotifyLeaveOffice, `"agent":"agent-a"`).payload()

	// Office B heard nothing of office A. Its own request and
	// notification go last, behind everything above on the same nodes,
	// so whatever leaked would have arrived first.
	if got := ldString(agentB.request(t, smcp.EventGetTools, `{"agent":"agent-b","req_id":"r-b","computer":"pc"}`)); !strings.Contains(got, `"r-b"`) {
		t.Errorf("office B's own request: %s", got)
	}
	pcB.emit(t, smcp.EventUpdateDesktop, `{"computer":"pc"}`)
	agentB.await(t, smcp.NotifyUpdateDesktop, "")
	if got, want := ldNames(agentB.seen()), smcp.NotifyEnterOffice+` {"office_id":"office-b","computer":"pc"}; `+smcp.NotifyUpdateDesktop+` {"computer":"pc"}; `; got != want {
		t.Errorf("office B's Agent received %s, want only %s", got, want)
	}
	if got := pcB.seen(); len(got) != 1 || got[0].name != smcp.EventGetTools {
		t.Errorf("office B's Computer received %s, want only its own get_tools", ldNames(got))
	}
	if got := far.seen(); len(got) != 0 {
		t.Errorf("office Z's Computer received %s, want nothing", ldNames(got))
	}
	return out
}

// ldCode is the code of an error answer "[{"code":N,...}]", or 0.
func ldCode(s string) int {
	var args []struct {
		Code int `json:"code"`
	}
	if json.Unmarshal([]byte(s), &args) != nil || len(args) != 1 {
		return 0
	}
	return args[0].Code
}

// ldCompareWorlds runs ldEveryEvent on one server and on a cluster at
// the same time, and requires the same outcomes byte for byte.
func ldCompareWorlds(t *testing.T, single ldWorld, cluster ldWorld, slow bool) {
	var one, many map[string]string
	t.Run("worlds", func(t *testing.T) {
		t.Run("single", func(t *testing.T) {
			t.Parallel()
			one = ldEveryEvent(t, single, slow)
		})
		t.Run("cluster", func(t *testing.T) {
			t.Parallel()
			many = ldEveryEvent(t, cluster, slow)
		})
	})
	if one == nil || many == nil {
		t.Fatal("a world did not finish")
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range []map[string]string{one, many} {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	})
	same := 0
	for _, k := range keys {
		a, oka := one[k]
		b, okb := many[k]
		switch {
		case !oka || !okb:
			t.Errorf("%s: only in one world (single %v, cluster %v)", k, oka, okb)
		case a != b:
			t.Errorf("%s:\n  one server: %s\n  cluster:    %s", k, a, b)
		default:
			same++
		}
	}
	t.Logf("%d of %d outcomes identical byte for byte between one server and the cluster", same, len(keys))
}

// TestClusterEveryEvent plays ldEveryEvent with the Agent on node1 and the
// Computers on node2 (the Computer of another office on node3) and on one
// server alone, and requires the same bytes everywhere.
func TestClusterEveryEvent(t *testing.T) {
	single := startServer(t, "--relay-timeout", "1s")
	r := harness.Redis(t)
	nodes := harness.Hub(t, 3, r.URL(), "--relay-timeout", "1s")
	ldCompareWorlds(t, ldWorld{single.URL, single.URL, single.URL}, ldWorld{nodes[0].URL, nodes[1].URL, nodes[2].URL}, true)
}

// TestClusterRedisCluster runs the cross-node checks on three nodes whose
// Redis is a three-master Redis Cluster (sharded publish and subscribe):
// the every-event scenario without the slow tool timeout, compared with
// one server; a seat race; and cross-node calls, counting SPUBLISH on
// every master.
func TestClusterRedisCluster(t *testing.T) {
	rc := harness.RedisCluster(t, 3)
	single := startServer(t, "--relay-timeout", "1s")
	nodes := harness.Hub(t, 3, strings.Join(rc.Addrs(), ","), "--relay-timeout", "1s")
	ldCompareWorlds(t, ldWorld{single.URL, single.URL, single.URL}, ldWorld{nodes[0].URL, nodes[1].URL, nodes[2].URL}, false)
	t.Run("seat-race", func(t *testing.T) {
		st := ldSeatRace(t, nodes[0], nodes[1], "node1", "node2", 200)
		t.Logf("seat race on a Redis Cluster: %s", st)
	})
	t.Run("calls", func(t *testing.T) {
		office := "ld-rc-calls-" + agent.NewReqID()
		remote := ldDialEcho(t, nodes[1].URL, office, "echo-remote")
		caller := ldDialCaller(t, nodes[0], "node1", office, "agent-calls")
		ldWarmUp(t, caller, "echo-remote")
		const n = 2000
		st, delta := ldCallsCase{caller: caller, echo: remote, computer: "echo-remote", redis: rc.Nodes,
			nodes: 3, frames: nodes[0], pubCmd: "spublish", perCall: 2}.run(t, "remote", n, 32)
		t.Logf("cross node on a Redis Cluster: %s; commands on all masters meanwhile: %v; spublish per call %.4f", st, delta, float64(delta["spublish"])/n)
	})
}
