package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// lcToolCall is a console tool call payload.
func lcToolCall(computer, reqID string) smcp.ToolCallReq {
	return smcp.ToolCallReq{ReqID: reqID, Computer: computer, ToolName: "b__t", Params: json.RawMessage(`{"x":1}`), Timeout: 5}
}

// lcSeen returns what a Computer received for event, decoded.
func lcSeen(t *testing.T, p *peer, event string) map[string]any {
	t.Helper()
	got := p.got(event)
	if len(got) != 1 {
		t.Fatalf("the Computer got %d %s, want 1", len(got), event)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got[0]), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLocalRequest: the console's requests reach a Computer through the
// relay as an Agent's, with the console's agent name, are counted and
// logged as the console's, and get the relay's refusals.
func TestLocalRequest(t *testing.T) {
	s, url := newTestServer(t, Config{Calls: true})
	c := connect(t, url, echo)
	if got := c.join(smcp.RoleComputer, "c", "o"); got != "true,null" {
		t.Fatal(got)
	}
	other := connect(t, url, echo)
	if got := other.join(smcp.RoleComputer, "elsewhere", "o2"); got != "true,null" {
		t.Fatal(got)
	}
	// An office with its own Agent: the console is no member and takes no seat.
	a := connect(t, url, nil)
	if got := a.join(smcp.RoleAgent, "a", "o"); got != "true,null" {
		t.Fatal(got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	raw, err := s.LocalRequest(ctx, "o", smcp.EventToolCall, lcToolCall("c", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"echo"`) {
		t.Fatalf("answer %s is not the Computer's", raw)
	}
	seen := lcSeen(t, c, smcp.EventToolCall)
	if seen["agent"] != ConsoleAgent || seen["req_id"] != "r1" || seen["tool_name"] != "b__t" {
		t.Fatalf("the Computer got %v", seen)
	}
	calls, _, _ := s.Calls("o")
	if len(calls) != 1 || !calls[0].Console || calls[0].Agent != ConsoleAgent || calls[0].State != CallDone || calls[0].Outcome != "ok" || calls[0].Office != "o" {
		t.Fatalf("call log %+v", calls)
	}
	if n := scrape(t, url, `a2c_relayed_calls_total{event="client:tool_call",outcome="ok"}`); n != 1 {
		t.Fatalf("relayed ok = %v, want 1", n)
	}
	// A req_id is made when the payload has none.
	if _, err := s.LocalRequest(ctx, "o", smcp.EventGetTools, smcp.GetToolsReq{Computer: "c"}); err != nil {
		t.Fatal(err)
	}
	if id, _ := lcSeen(t, c, smcp.EventGetTools)["req_id"].(string); !strings.HasPrefix(id, "console-") {
		t.Fatalf("req_id %q", id)
	}

	for _, tc := range []struct {
		name, office, computer string
		code                   int
	}{
		{"unknown computer", "o", "nobody", smcp.CodeNotFound},
		{"another office's computer", "o", "elsewhere", smcp.CodeCrossRoom},
		{"an office nobody is in", "empty", "c", smcp.CodeCrossRoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.LocalRequest(ctx, tc.office, smcp.EventToolCall, lcToolCall(tc.computer, "r-"+tc.name))
			var pe *smcp.Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("err = %v, want code %d", err, tc.code)
			}
		})
	}
	// Refusals are logged as failed console calls too.
	if calls, _, _ := s.Calls(""); len(calls) != 4 || calls[0].Outcome != "error" || calls[0].ErrorCode != smcp.CodeCrossRoom {
		t.Fatalf("call log %+v", calls)
	}
	for _, bad := range []struct {
		office, event string
		payload       any
	}{
		{"", smcp.EventToolCall, lcToolCall("c", "x")},
		{"o", "client:nothing", lcToolCall("c", "x")},
		{"o", smcp.EventToolCall, []int{1}},
	} {
		if _, err := s.LocalRequest(ctx, bad.office, bad.event, bad.payload); !errors.Is(err, ErrLocalRequest) {
			t.Errorf("LocalRequest(%q, %q, %v) = %v, want ErrLocalRequest", bad.office, bad.event, bad.payload, err)
		}
	}
	var pe *smcp.Error
	if _, err := s.LocalRequest(ctx, "o", smcp.EventToolCall, smcp.ToolCallReq{Computer: "c", ToolName: "b__t", Timeout: 0}); !errors.As(err, &pe) || pe.Code != smcp.CodeBadRequest {
		t.Errorf("timeout 0: %v, want 400", err)
	}
	// The Agent of the office saw nothing of it.
	if got := a.got(smcp.NotifyEnterOffice); len(got) != 0 {
		t.Errorf("the office's Agent was told %v", got)
	}
}

// TestLocalRequestContext: the caller stops waiting when its context
// ends; the relay still ends the call at its own deadline.
func TestLocalRequestContext(t *testing.T) {
	s, url := newTestServer(t, Config{Calls: true, ToolCallSlack: 10 * time.Millisecond})
	c := connect(t, url, nil) // never answers
	if got := c.join(smcp.RoleComputer, "c", "o"); got != "true,null" {
		t.Fatal(got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req := lcToolCall("c", "slow")
	req.Timeout = 1
	if _, err := s.LocalRequest(ctx, "o", smcp.EventToolCall, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	eventually(t, "the relay's timeout", func() bool {
		c, ok := s.Call(ConsoleAgent, "slow")
		return ok && c.State == CallDone && c.Outcome == "timeout"
	})
}

// TestLocalRequestCluster: in a cluster, the console reaches a Computer
// held by another node, in an office where this node holds nobody, and
// is refused for one that is nowhere.
func TestLocalRequestCluster(t *testing.T) {
	url := rvRedis(t)
	sa, _ := newTestServer(t, Config{Calls: true, Cluster: cluster.Config{URL: url, NodeID: "na"}})
	_, urlB := newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}})
	c := connect(t, urlB, echo)
	if got := c.join(smcp.RoleComputer, "c", "o"); got != "true,null" {
		t.Fatal(got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := sa.LocalRequest(ctx, "o", smcp.EventToolCall, lcToolCall("c", "rc"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"echo"`) {
		t.Fatalf("answer %s", raw)
	}
	call, ok := sa.Call(ConsoleAgent, "rc")
	if !ok || !call.Console || call.Node != "na" || call.Outcome != "ok" {
		t.Fatalf("call %+v", call)
	}
	var pe *smcp.Error
	if _, err := sa.LocalRequest(ctx, "o", smcp.EventToolCall, lcToolCall("nobody", "rn")); !errors.As(err, &pe) || pe.Code != smcp.CodeNotFound {
		t.Fatalf("err = %v, want 404", err)
	}
	// The office as the console lists it: the member of node nb, with
	// no join time (this node does not hold it).
	info, err := sa.Office(ctx, "o")
	if err != nil || len(info.Members) != 1 || info.Members[0].Node != "nb" || !info.Members[0].ConnectedSince.IsZero() {
		t.Fatalf("office %+v, %v", info, err)
	}
}

// TestOfficesList: the console's office list has every office with its
// members and their join times; GET /api/offices/{office} keeps its shape.
func TestOfficesList(t *testing.T) {
	s, url := newTestServer(t, Config{Calls: true})
	before := time.Now().Add(-time.Millisecond)
	for _, m := range []struct {
		role         smcp.Role
		name, office string
	}{{smcp.RoleComputer, "c2", "b"}, {smcp.RoleComputer, "c1", "b"}, {smcp.RoleAgent, "ag", "b"}, {smcp.RoleComputer, "c", "a"}} {
		p := connect(t, url, nil)
		if got := p.join(m.role, m.name, m.office); got != "true,null" {
			t.Fatal(got)
		}
	}
	got := s.Offices()
	if len(got) != 2 || got[0].OfficeID != "a" || got[1].OfficeID != "b" {
		t.Fatalf("offices %+v", got)
	}
	var names []string
	for _, m := range got[1].Members {
		names = append(names, m.Name)
		if m.ConnectedSince.Before(before) || m.ConnectedSince.After(time.Now()) || m.ConnectedSince.Location() != time.UTC {
			t.Errorf("%s connected_since %v", m.Name, m.ConnectedSince)
		}
	}
	if strings.Join(names, ",") != "ag,c1,c2" {
		t.Errorf("members %v", names)
	}
	b, _ := json.Marshal(got[0])
	if !strings.Contains(string(b), `"connected_since":"`) {
		t.Errorf("no connected_since in %s", b)
	}
	// The operators' API does not show it.
	body := lcGet(t, url+"/api/offices/a")
	if strings.Contains(body, "connected_since") || !strings.HasPrefix(body, `{"office_id":"a","members":[{"sid":"`) {
		t.Errorf("GET /api/offices/a = %s", body)
	}
}

// lcGet answers a GET's body.
func lcGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
