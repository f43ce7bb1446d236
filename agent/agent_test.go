package agent

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// fakeServer is a scripted /smcp server: answer decides each ack (nil
// means no answer at all). It records the events it receives.
type fakeServer struct {
	answer func(e *sio.Event) []json.RawMessage
	mu     sync.Mutex
	got    []*sio.Event
}

func (f *fakeServer) Connect(*sio.Socket) error      { return nil }
func (f *fakeServer) Disconnect(*sio.Socket, string) {}
func (f *fakeServer) Event(_ *sio.Socket, e *sio.Event) {
	f.mu.Lock()
	f.got = append(f.got, e)
	f.mu.Unlock()
	if args := f.answer(e); args != nil {
		_ = e.Ack(sio.Message{Args: args})
	}
}

func (f *fakeServer) events(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.got {
		if e.Name == name {
			out = append(out, string(e.Args[0]))
		}
	}
	return out
}

func raw(s ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(s))
	for i, x := range s {
		out[i] = json.RawMessage(x)
	}
	return out
}

func startFake(t *testing.T, answer func(e *sio.Event) []json.RawMessage) (*fakeServer, string) {
	t.Helper()
	f := &fakeServer{answer: answer}
	srv := sio.NewServer(sio.Options{})
	srv.Handle(smcp.Namespace, f)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return f, ts.URL
}

func dial(t *testing.T, url string, o Options) *Client {
	t.Helper()
	o.Name = "agent"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestJoinAnswers(t *testing.T) {
	answers := map[string][]json.RawMessage{
		"two-args":      raw("true", "null"),
		"one-array":     raw("[true,null]"),
		"lone-null":     raw("null"),
		"refused":       raw("false", `"Room already has an agent"`),
		"refused-array": raw(`[false,"nope"]`),
		"error-payload": raw(`{"code":4101,"message":"Room full"}`),
	}
	_, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		var req smcp.EnterOfficeReq
		_ = json.Unmarshal(e.Args[0], &req)
		return answers[req.OfficeID]
	})
	c := dial(t, url, Options{})
	ctx := context.Background()
	for office, want := range map[string]string{
		"two-args": "", "one-array": "", "lone-null": "",
		"refused": "a2c: Room already has an agent", "refused-array": "a2c: nope", "error-payload": "smcp 4101: Room full",
	} {
		err := c.Join(ctx, office)
		if (err == nil && want != "") || (err != nil && err.Error() != want) {
			t.Errorf("%s: err = %v, want %q", office, err, want)
		}
	}
}

// TestCallToolLocalTimeout checks the Agent's own deadline: with no answer
// at all, it cancels the call and returns a result marked a2c_timeout.
func TestCallToolLocalTimeout(t *testing.T) {
	f, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		switch e.Name {
		case smcp.EventJoinOffice:
			return raw("true", "null")
		case smcp.EventCancelToolCall:
			return []json.RawMessage{}
		}
		return nil
	})
	c := dial(t, url, Options{CallSlack: 100 * time.Millisecond})
	ctx := context.Background()
	if err := c.Join(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.CallTool(ctx, Call{Computer: "c", Tool: "b__t", Timeout: time.Second, ReqID: "r-local"})
	if err != nil || !res.IsError || !res.Timeout() {
		t.Fatalf("result = %+v, %v", res, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("gave up after %v, before the call's own timeout", d)
	}
	if got := f.events(smcp.EventCancelToolCall); len(got) != 1 || got[0] != `{"agent":"agent","req_id":"r-local"}` {
		t.Errorf("cancels = %q", got)
	}
	var req smcp.ToolCallReq
	_ = json.Unmarshal([]byte(f.events(smcp.EventToolCall)[0]), &req)
	if req.Timeout != 1 || string(req.Params) != "{}" {
		t.Errorf("request = %+v", req)
	}
}

func TestCallToolErrors(t *testing.T) {
	_, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		if e.Name == smcp.EventJoinOffice {
			return raw("true", "null")
		}
		return raw(`{"code":4104,"message":"Computer is not in your office"}`)
	})
	c := dial(t, url, Options{})
	ctx := context.Background()
	_ = c.Join(ctx, "o")
	_, err := c.CallTool(ctx, Call{Computer: "c", Tool: "b__t"})
	var pe *smcp.Error
	if !errors.As(err, &pe) || pe.Code != smcp.CodeCrossRoom || !errors.Is(err, &smcp.Error{Code: 4104}) {
		t.Fatalf("err = %#v", err)
	}
	if _, err := c.CallTool(ctx, Call{Computer: "c", Tool: "b__t", Params: []int{1}}); err == nil {
		t.Error("non-object params accepted")
	}
}

// TestCallToolTypedNilParams: a nil map is no arguments, sent as {}.
func TestCallToolTypedNilParams(t *testing.T) {
	f, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		if e.Name == smcp.EventJoinOffice {
			return raw("true", "null")
		}
		return raw(`{"content":[],"isError":false}`)
	})
	c := dial(t, url, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Join(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	var none map[string]any
	if _, err := c.CallTool(ctx, Call{Computer: "c", Tool: "b__t", Params: none, ReqID: "r-nil"}); err != nil {
		t.Fatal(err)
	}
	got := f.events(smcp.EventToolCall)
	if len(got) != 1 || !strings.Contains(got[0], `"params":{}`) {
		t.Fatalf("sent %q", got)
	}
}

func TestBlob(t *testing.T) {
	data := []byte(strings.Repeat("blob-data-", 100))
	sum := sha256.Sum256(data)
	var mu sync.Mutex
	changes := 1 // the first read sees another version of the blob
	_, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		if e.Name != smcp.EventGetBlob {
			return raw("true", "null")
		}
		var req smcp.GetBlobReq
		_ = json.Unmarshal(e.Args[0], &req)
		off := *req.ChunkOffset
		end := min(off+*req.MaxChunkBytes, int64(len(data)))
		digest := hex.EncodeToString(sum[:])
		mu.Lock()
		if off > 0 && changes > 0 {
			changes--
			digest = strings.Repeat("0", 64)
		}
		mu.Unlock()
		b, _ := json.Marshal(smcp.GetBlobRet{BlobHandle: req.BlobHandle, TotalSize: int64(len(data)), SHA256: digest,
			ChunkOffset: off, EOF: end == int64(len(data)), Blob: base64.StdEncoding.EncodeToString(data[off:end]), ReqID: req.ReqID})
		return []json.RawMessage{b}
	})
	c := dial(t, url, Options{})
	got, meta, err := c.Blob(context.Background(), "c", "h", 300)
	if err != nil || string(got) != string(data) || meta.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("blob = %d bytes, %+v, %v", len(got), meta, err)
	}
}

func TestNotifications(t *testing.T) {
	notes := make(chan Notification, 4)
	srvSock := make(chan *sio.Socket, 1)
	f := &fakeServer{answer: func(e *sio.Event) []json.RawMessage { return raw("true", "null") }}
	srv := sio.NewServer(sio.Options{})
	srv.Handle(smcp.Namespace, connectHook{f, srvSock})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	dial(t, ts.URL, Options{OnNotify: func(n Notification) { notes <- n }})
	s := <-srvSock
	_ = s.Emit(smcp.NotifyEnterOffice, sio.Message{Args: raw(`{"office_id":"o","computer":"c1"}`)})
	_ = s.Emit(smcp.NotifyCancelToolCall, sio.Message{Args: raw(`{"agent":"a","req_id":"r"}`)})
	n1, n2 := <-notes, <-notes
	if n1.Event != smcp.NotifyEnterOffice || n1.OfficeID != "o" || n1.Computer != "c1" || n2.ReqID != "r" || n2.Agent != "a" {
		t.Fatalf("notifications %+v %+v", n1, n2)
	}
}

type connectHook struct {
	*fakeServer
	socks chan *sio.Socket
}

func (h connectHook) Connect(s *sio.Socket) error { h.socks <- s; return nil }

// TestClose4900 checks the WebSocket-only path: a close with 4900 is
// followed by one polling attempt that reads the 4008 body; without it,
// the error cites 4900.
func TestClose4900(t *testing.T) {
	body := `{"code":4008,"message":"Protocol version mismatch","server_version":"0.4.0","client_version":"0.3.0","min_supported":"0.4.0","max_supported":"0.4.999"}`
	for _, pollingAnswers := range []bool{true, false} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("transport") == "websocket" {
				up := websocket.Upgrader{}
				ws, err := up.Upgrade(w, r, nil)
				if err != nil {
					return
				}
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4900, "version"))
				ws.Close()
				return
			}
			if pollingAnswers {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(body))
				return
			}
			http.Error(w, "nope", 500)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Dial(ctx, ts.URL, Options{Name: "a", WebSocketOnly: true})
		cancel()
		ts.Close()
		var pve *ProtocolVersionError
		if !errors.As(err, &pve) {
			t.Fatalf("polling answers %v: err = %v", pollingAnswers, err)
		}
		if pollingAnswers && (pve.Code != 4008 || pve.ServerVersion != "0.4.0" || pve.MaxSupported != "0.4.999") {
			t.Errorf("4008 = %+v", pve)
		}
		if !pollingAnswers && (pve.Code != 4900 || pve.ServerVersion != "") {
			t.Errorf("4900 = %+v", pve)
		}
	}
}

// TestAuthProviderFailures: a provider that fails or panics fails the
// attempt with an *AuthProviderError whose message holds none of the
// provider's words (they may be a credential); the program goes on.
func TestAuthProviderFailures(t *testing.T) {
	for name, f := range map[string]func(context.Context) (map[string]any, error){
		"error": func(context.Context) (map[string]any, error) { return nil, errors.New("token s3cr3t expired") },
		"panic": func(context.Context) (map[string]any, error) { panic("s3cr3t") },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Dial(ctx, "http://127.0.0.1:1", Options{Name: "a", AuthFunc: f})
		cancel()
		var pe *AuthProviderError
		if !errors.As(err, &pe) || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(pe.Err.Error(), "s3cr3t") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
