package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/tracing"
)

// clServer is a server with the call log, not listening.
func clServer(t testing.TB) *Server {
	t.Helper()
	s, err := New(Config{Calls: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.io.Close() })
	return s
}

// clObs is an observed call as the relay's hooks see it.
func clObs(s *Server, office, reqID string) *callObs {
	return &callObs{s: s, office: office, start: time.Now(),
		req: &smcp.ToolCallReq{Agent: "ag", ReqID: reqID, Computer: "c", ToolName: "b__t", Timeout: 5}}
}

// TestCallLogBounds: running calls and the last MaxEndedCalls ended ones,
// newest first, by office; older ones are counted out.
func TestCallLogBounds(t *testing.T) {
	s := clServer(t)
	run := clObs(s, "o1", "running")
	s.callsStart(run)
	const n = MaxEndedCalls + 5
	for i := range n {
		o := clObs(s, "o"+strconv.Itoa(i%2), "r"+strconv.Itoa(i))
		s.callsStart(o)
		s.callsEnd(o, callEnd{Outcome: tracing.OutcomeError, Code: 4003})
	}
	all, evicted, err := s.Calls("")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != MaxEndedCalls+1 || evicted != 5 {
		t.Fatalf("%d calls, %d evicted; want %d, 5", len(all), evicted, MaxEndedCalls+1)
	}
	if all[0].ReqID != "running" || all[0].State != CallRunning || all[0].Outcome != "" || all[0].DurationMS < 0 {
		t.Fatalf("first %+v, want the running call", all[0])
	}
	last := all[1]
	if last.ReqID != "r"+strconv.Itoa(n-1) || last.State != CallDone || last.Outcome != "error" || last.ErrorCode != 4003 ||
		last.TraceID != tracing.TraceID("ag", last.ReqID).String() || last.Console || last.Tool != "b__t" || last.Computer != "c" {
		t.Fatalf("newest ended %+v", last)
	}
	if all[len(all)-1].ReqID != "r5" {
		t.Fatalf("oldest kept %s, want r5", all[len(all)-1].ReqID)
	}
	o1, _, _ := s.Calls("o1")
	if len(o1) != MaxEndedCalls/2+1 || o1[0].ReqID != "running" {
		t.Fatalf("office o1: %d calls", len(o1))
	}
	for _, c := range o1 {
		if c.Office != "o1" {
			t.Fatalf("office filter let %+v through", c)
		}
	}
	if c, ok := s.Call("ag", "r7"); !ok || c.ReqID != "r7" {
		t.Fatalf("Call(r7) = %+v, %v", c, ok)
	}
	if _, ok := s.Call("ag", "r1"); ok {
		t.Fatal("an evicted call is still found")
	}
	b, _ := json.Marshal(last)
	want := fmt.Sprintf(`{"req_id":"%s","agent":"ag","computer":"c","office":"o0","tool":"b__t","start":`, last.ReqID)
	if string(b[:len(want)]) != want {
		t.Fatalf("JSON %s", b)
	}
	for _, key := range []string{`"duration_ms":`, `"state":"done"`, `"outcome":"error"`, `"error_code":4003`, `"console":false`, `"trace_id":"`, `"node":""`} {
		if !json.Valid(b) || !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
	if _, _, err := (&Server{}).Calls(""); err != ErrNoCallLog {
		t.Errorf("no call log: %v", err)
	}
}

// TestCallStreamDrops: a subscriber that does not read loses what does
// not fit its buffer, counted for it and in the metric; the others and
// the relay go on; Close stops delivery; subscribers are bounded.
func TestCallStreamDrops(t *testing.T) {
	s := clServer(t)
	slow, err := s.SubscribeCalls("", 4)
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := s.SubscribeCalls("o1", 64)
	other, _ := s.SubscribeCalls("o2", 64)
	for i := range 10 {
		o := clObs(s, "o1", "r"+strconv.Itoa(i))
		s.callsStart(o)
		s.callsEnd(o, callEnd{Outcome: tracing.OutcomeOK})
	}
	if got := len(slow.Events()); got != 4 {
		t.Fatalf("slow subscriber holds %d events, want 4", got)
	}
	if d := slow.TakeDropped(); d != 16 {
		t.Fatalf("dropped %d, want 16", d)
	}
	if d := slow.TakeDropped(); d != 0 {
		t.Fatalf("TakeDropped did not reset: %d", d)
	}
	if got := len(mine.Events()); got != 20 || mine.TakeDropped() != 0 {
		t.Fatalf("office subscriber got %d events", got)
	}
	first := <-mine.Events()
	second := <-mine.Events()
	if first.State != CallRunning || second.State != CallDone || first.ReqID != "r0" || second.ReqID != "r0" {
		t.Fatalf("events %+v, %+v", first, second)
	}
	if got := len(other.Events()); got != 0 {
		t.Fatalf("the other office's subscriber got %d events", got)
	}
	if got := metricValue(t, s, "a2c_console_events_dropped_total"); got != 16 {
		t.Fatalf("a2c_console_events_dropped_total = %v", got)
	}
	mine.Close()
	mine.Close()
	o := clObs(s, "o1", "after")
	s.callsStart(o)
	if got := len(mine.Events()); got != 18 {
		t.Fatalf("a closed subscriber got an event (%d)", got)
	}
	slow.Close()
	other.Close()
	var subs []*CallSubscription
	for range MaxCallSubscribers {
		sub, err := s.SubscribeCalls("", 1)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	if _, err := s.SubscribeCalls("", 1); err != ErrTooManySubscribers {
		t.Fatalf("past the bound: %v", err)
	}
	subs[0].Close()
	if _, err := s.SubscribeCalls("", 1); err != nil {
		t.Fatalf("after a close: %v", err)
	}
}

// TestCallLogKeepsUp: 5,000 calls with a subscriber that never reads
// never wait for it (the loop would hang), and its losses are all
// counted. How fast is BenchmarkCallLog's question, not a test's.
func TestCallLogKeepsUp(t *testing.T) {
	s := clServer(t)
	stuck, _ := s.SubscribeCalls("", 256)
	defer stuck.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			o := clObs(s, "o", "r"+strconv.Itoa(i))
			s.callsStart(o)
			s.callsEnd(o, callEnd{Outcome: tracing.OutcomeOK})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the calls waited for a subscriber that never reads")
	}
	if got := stuck.TakeDropped(); got != 10000-256 {
		t.Fatalf("dropped %d, want %d", got, 10000-256)
	}
}

func metricValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// clSubscribers opens n subscribers: the first never reads, the others
// read everything until the benchmark ends.
func clSubscribers(b *testing.B, s *Server, n int) func() {
	var wg sync.WaitGroup
	var subs []*CallSubscription
	done := make(chan struct{})
	for i := range n {
		sub, err := s.SubscribeCalls("", DefaultCallBuffer)
		if err != nil {
			b.Fatal(err)
		}
		subs = append(subs, sub)
		if i == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-sub.Events():
				case <-done:
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		for _, sub := range subs {
			sub.Close()
		}
	}
}

// BenchmarkCallLog measures what the call log adds to one tool call (its
// start and end hooks, from 2 goroutines at once) with 0, 1 and 10
// subscribers, the first of which never reads.
func BenchmarkCallLog(b *testing.B) {
	for _, n := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			s := clServer(b)
			stop := clSubscribers(b, s, n)
			defer stop()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o := clObs(s, "o", "r")
					s.callsStart(o)
					s.callsEnd(o, callEnd{Outcome: tracing.OutcomeOK})
				}
			})
		})
	}
}

// BenchmarkRelayCallLog is BenchmarkRelay with the call log on and 0, 1
// or 10 subscribers (the first never reads): the relay must not slow down
// for a page that does not keep up.
func BenchmarkRelayCallLog(b *testing.B) {
	for _, n := range []int{-1, 0, 1, 10} {
		name := fmt.Sprintf("subscribers=%d", n)
		if n < 0 {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			s, url := newTestServer(b, Config{Calls: n >= 0})
			if n > 0 {
				defer clSubscribers(b, s, n)()
			}
			c := connect(b, url, echo)
			c.join(smcp.RoleComputer, "c", "o")
			a := connect(b, url, nil)
			a.join(smcp.RoleAgent, "a", "o")
			raw, _ := json.Marshal(smcp.ToolCallReq{Agent: "a", ReqID: "r", Computer: "c", ToolName: "b__t", Params: json.RawMessage(`{"x":1}`), Timeout: 5})
			msg := sio.Message{Args: []json.RawMessage{raw}}
			done := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.sock.Request(smcp.EventToolCall, msg, 10*time.Second, func(_ sio.Message, err error) { done <- err })
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
