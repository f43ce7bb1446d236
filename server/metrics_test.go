package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// scrape reads one sample from /metrics: the line that starts with
// series (name and labels as Prometheus writes them); 0 when absent.
func scrape(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %q", series, rest)
			}
			return v
		}
	}
	return 0
}

// expect waits until a series reads want.
func expect(t *testing.T, url, series string, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = scrape(t, url, series); got == want {
			return
		}
	}
	t.Errorf("%s = %v, want %v", series, got, want)
}

func relayed(event, outcome string) string {
	return `a2c_relayed_calls_total{event="` + event + `",outcome="` + outcome + `"}`
}

// TestMetricsMove checks that every metric the README lists moves when
// its event happens.
func TestMetricsMove(t *testing.T) {
	_, url := newTestServer(t, Config{Auth: TokenAuth("secret", "x-api-key"), RelayTimeout: 100 * time.Millisecond})
	auth := func(o *sio.ClientOptions) { o.Auth = map[string]string{"x-api-key": "secret"} }

	// a2c_handshakes_refused_total, by reason.
	for q, reason := range map[string]string{
		"":                    "version_missing",
		"&a2c_version=0.3":    "version_invalid",
		"&a2c_version=9.0.0":  "version_mismatch",
		"&a2c_version=0.3.1x": "version_invalid",
	} {
		before := scrape(t, url, `a2c_handshakes_refused_total{reason="`+reason+`"}`)
		resp, err := http.Get(url + "/socket.io/?EIO=4&transport=polling" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		expect(t, url, `a2c_handshakes_refused_total{reason="`+reason+`"}`, before+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sio.Dial(ctx, url, sio.ClientOptions{Namespace: smcp.Namespace, Query: map[string][]string{smcp.QueryVersion: {smcp.ProtocolVersion}}}); err == nil {
		t.Fatal("connected without a token")
	}
	expect(t, url, `a2c_handshakes_refused_total{reason="auth"}`, 1)

	// a2c_connections, a2c_offices, a2c_office_members.
	release := make(chan struct{})
	comp := connectWith(t, url, auth, func(e *sio.Event) any {
		switch e.Name {
		case smcp.EventGetTools: // held until release
			go func() {
				<-release
				_ = e.Ack(sio.Message{Args: []json.RawMessage{json.RawMessage(`{"tools":[],"req_id":"r"}`)}})
			}()
			return nil
		case smcp.EventGetConfig: // never answered
			return nil
		}
		return echo(e)
	})
	expect(t, url, "a2c_connections", 1)
	comp.join(smcp.RoleComputer, "c", "o")
	expect(t, url, "a2c_offices", 1)
	expect(t, url, `a2c_office_members{role="computer"}`, 1)
	a := connectWith(t, url, auth, nil)
	expect(t, url, "a2c_connections", 2)
	a.join(smcp.RoleAgent, "a", "o")
	expect(t, url, `a2c_office_members{role="agent"}`, 1)

	// ok, with its duration observed.
	a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Timeout: 5})
	expect(t, url, relayed(smcp.EventToolCall, "ok"), 1)
	expect(t, url, `a2c_relay_duration_seconds_count{event="client:tool_call"}`, 1)
	// refused
	a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "nobody", ToolName: "b__t", Timeout: 5})
	expect(t, url, relayed(smcp.EventToolCall, "refused"), 1)
	// timeout
	a.call(smcp.EventGetConfig, smcp.GetComputerConfigReq{Agent: "a", ReqID: "r", Computer: "c"})
	expect(t, url, relayed(smcp.EventGetConfig, "timeout"), 1)
	// a2c_relays_in_flight while the Computer holds the answer.
	done := make(chan struct{})
	b, _ := json.Marshal(smcp.GetToolsReq{Agent: "a", ReqID: "r", Computer: "c"})
	a.sock.Request(smcp.EventGetTools, sio.Message{Args: []json.RawMessage{b}}, 10*time.Second, func(sio.Message, error) { close(done) })
	expect(t, url, "a2c_relays_in_flight", 1)
	close(release)
	<-done
	expect(t, url, "a2c_relays_in_flight", 0)
	// The held request is counted once: ok, or timeout when this machine
	// took longer than RelayTimeout (100 ms) to see it in flight (failed
	// once in make test under load: 0 ok).
	var ok, to float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok, to = scrape(t, url, relayed(smcp.EventGetTools, "ok")), scrape(t, url, relayed(smcp.EventGetTools, "timeout")); ok+to == 1 {
			break
		}
	}
	if ok+to != 1 {
		t.Errorf("client:get_tools counted %v ok and %v timeout, want one in all", ok, to)
	}

	// gone: a Computer that leaves before answering.
	var quitter *peer
	quitter = connectWith(t, url, auth, func(*sio.Event) any { go quitter.sock.Disconnect(); return nil })
	quitter.join(smcp.RoleComputer, "q", "o")
	expect(t, url, `a2c_office_members{role="computer"}`, 2)
	a.call(smcp.EventToolCall, smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "q", ToolName: "b__t", Timeout: 5})
	expect(t, url, relayed(smcp.EventToolCall, "gone"), 1)
	expect(t, url, `a2c_office_members{role="computer"}`, 1)

	// dropped: the Agent leaves before the answer comes.
	hold := make(chan struct{})
	slow := connectWith(t, url, auth, func(e *sio.Event) any {
		go func() {
			<-hold
			_ = e.Ack(sio.Message{Args: []json.RawMessage{json.RawMessage(`{"content":[],"isError":false}`)}})
		}()
		return nil
	})
	slow.join(smcp.RoleComputer, "s", "o2")
	b2 := connectWith(t, url, auth, nil)
	b2.join(smcp.RoleAgent, "b", "o2")
	expect(t, url, "a2c_offices", 2)
	tc, _ := json.Marshal(smcp.ToolCallReq{Agent: "b", ReqID: "r", Computer: "s", ToolName: "b__t", Timeout: 5})
	b2.sock.Request(smcp.EventToolCall, sio.Message{Args: []json.RawMessage{tc}}, 0, func(sio.Message, error) {})
	expect(t, url, "a2c_relays_in_flight", 1)
	b2.sock.Disconnect()
	expect(t, url, `a2c_office_members{role="agent"}`, 1)
	close(hold)
	expect(t, url, relayed(smcp.EventToolCall, "dropped"), 1)

	// Leaving and disconnecting bring the gauges back down.
	slow.sock.Disconnect()
	expect(t, url, "a2c_offices", 1)
	a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o"})
	expect(t, url, `a2c_office_members{role="agent"}`, 0)
	a.sock.Disconnect()
	comp.sock.Disconnect()
	expect(t, url, "a2c_offices", 0)
	expect(t, url, `a2c_office_members{role="computer"}`, 0)
	expect(t, url, "a2c_connections", 0)
}
