package computer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/blob"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// landingOffice starts a signalling server and a Computer "pc" (no MCP
// server) in office "o" with options o, and returns the server's URL.
func landingOffice(t *testing.T, o Options) (string, *Computer) {
	t.Helper()
	srv, err := server.New(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	joined := make(chan struct{}, 1)
	o.Server, o.Office, o.Name = ts.URL, "o", "pc"
	o.OnJoined = func() {
		select {
		case joined <- struct{}{}:
		default:
		}
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; c.Close(); c.stopUploads() })
	select {
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("the Computer never joined its office")
	}
	return ts.URL, c
}

// rawAgent is an Agent speaking raw payloads, to send what the Go Agent
// never would.
type rawAgent struct{ sock *sio.Socket }

func (rawAgent) Event(*sio.Socket, *sio.Event)  {}
func (rawAgent) Disconnect(*sio.Socket, string) {}

func dialRawAgent(t *testing.T, serverURL, name string) *rawAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := &rawAgent{}
	s, err := sio.Dial(ctx, serverURL, sio.ClientOptions{Namespace: smcp.Namespace,
		Query: url.Values{smcp.QueryVersion: {smcp.ProtocolVersion}}, Handler: a})
	if err != nil {
		t.Fatal(err)
	}
	a.sock = s
	t.Cleanup(s.Disconnect)
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleAgent, Name: name, OfficeID: "o"})
	if got := a.request(t, smcp.EventJoinOffice, string(b)); got != "true" {
		t.Fatalf("join: %s", got)
	}
	return a
}

// request sends one event and returns its ack's first argument.
func (a *rawAgent) request(t *testing.T, event, payload string) string {
	t.Helper()
	ch := make(chan sio.Message, 1)
	a.sock.Request(event, sio.Message{Args: []json.RawMessage{json.RawMessage(payload)}}, 10*time.Second, func(m sio.Message, err error) {
		if err != nil {
			t.Errorf("%s: %v", event, err)
		}
		ch <- m
	})
	m := <-ch
	if len(m.Args) == 0 {
		return ""
	}
	return string(m.Args[0])
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// firstChunk is the payload of a first chunk carrying all of data.
func firstChunk(data []byte, extra string) string {
	return fmt.Sprintf(`{"agent":"raw","req_id":"r1","computer":"pc","chunk_offset":0,"eof":true,"total_size":%d,"sha256":%q,"blob":%q%s}`,
		len(data), sha(data), base64.StdEncoding.EncodeToString(data), extra)
}

// TestPutBlobThroughOffice: the Go Agent's upload lands under the
// Computer's root through a real server, in order, chunk by chunk.
func TestPutBlobThroughOffice(t *testing.T) {
	root := t.TempDir()
	srvURL, _ := landingOffice(t, Options{LandingRoot: root})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, srvURL, agent.Options{Name: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Join(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	// Several uploads at once: each lands intact.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Repeat([]byte{byte('a' + i)}, 100_000+i)
			ret, err := a.PutBlob(ctx, "pc", bytes.NewReader(data), agent.PutOptions{NameHint: fmt.Sprintf("f%d.bin", i), ChunkSize: 7000})
			if err != nil {
				t.Errorf("upload %d: %v", i, err)
				return
			}
			if filepath.Dir(ret.LandingPath) != root || !strings.HasSuffix(ret.LandingPath, fmt.Sprintf("_f%d.bin", i)) {
				t.Errorf("upload %d landed at %s", i, ret.LandingPath)
			}
			if b, _ := os.ReadFile(ret.LandingPath); !bytes.Equal(b, data) {
				t.Errorf("upload %d landed other bytes", i)
			}
		}()
	}
	wg.Wait()
	if entries, _ := os.ReadDir(filepath.Join(root, blob.PartDir)); len(entries) != 0 {
		t.Errorf("%d .part files left", len(entries))
	}
}

// TestPutBlobWireAnswers: exact acks through a real server, including
// faults a server must relay rather than judge.
func TestPutBlobWireAnswers(t *testing.T) {
	root := t.TempDir()
	srvURL, c := landingOffice(t, Options{LandingRoot: root, Uploads: blob.UploadOptions{MaxBytes: 1000, MaxConcurrent: 1}})
	a := dialRawAgent(t, srvURL, "raw")
	data := []byte("hello")

	got := a.request(t, smcp.EventPutBlob, firstChunk(data, `,"name_hint":"../hi.txt"`))
	var ret smcp.PutBlobRet
	_ = json.Unmarshal([]byte(got), &ret)
	path := filepath.Join(root, ret.UploadID+"_hi.txt")
	if want := fmt.Sprintf(`{"upload_id":%q,"chunk_offset":0,"landing_path":%q,"total_size":5,"sha256":%q,"req_id":"r1"}`, ret.UploadID, path, sha(data)); got != want {
		t.Errorf("ack %s\nwant %s", got, want)
	}

	refusals := []struct{ name, payload, want string }{
		{"total_size of the wrong type", strings.Replace(firstChunk(data, ""), `"total_size":5`, `"total_size":"x"`, 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_declaration"}}`},
		{"blob of the wrong type", strings.Replace(firstChunk(data, ""), `"blob":"aGVsbG8="`, `"blob":5`, 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_declaration"}}`},
		{"too large", strings.Replace(firstChunk(data, ""), `"total_size":5`, `"total_size":1001`, 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"too_large","total_size":1001}}`},
		{"unknown upload", `{"agent":"raw","req_id":"r2","computer":"pc","upload_id":"` + strings.Repeat("f", 32) + `","chunk_offset":5,"eof":true,"blob":""}`,
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_upload","upload_id":"` + strings.Repeat("f", 32) + `"}}`},
		{"agent of the wrong type is the server's", strings.Replace(firstChunk(data, ""), `"agent":"raw"`, `"agent":5`, 1),
			`{"code":400,"message":"invalid payload: field \"agent\" must be string"}`},
	}
	for _, r := range refusals {
		if got := a.request(t, smcp.EventPutBlob, r.payload); got != r.want {
			t.Errorf("%s: %s\nwant %s", r.name, got, r.want)
		}
	}

	// busy: the one place is taken by an open upload.
	open := strings.Replace(firstChunk([]byte("0123456789"), ""), `"eof":true`, `"eof":false`, 1)
	open = strings.Replace(open, base64.StdEncoding.EncodeToString([]byte("0123456789")), base64.StdEncoding.EncodeToString([]byte("01234")), 1)
	if got := a.request(t, smcp.EventPutBlob, open); !strings.Contains(got, `"upload_id"`) {
		t.Fatalf("open: %s", got)
	}
	if got, want := a.request(t, smcp.EventPutBlob, firstChunk(data, "")), `{"code":4019,"message":"Blob write failed","details":{"reason":"busy"}}`; got != want {
		t.Errorf("busy: %s", got)
	}
	// Closing the landing ends the upload in progress.
	c.stopUploads()
	if entries, _ := os.ReadDir(filepath.Join(root, blob.PartDir)); len(entries) != 0 {
		t.Errorf("%d .part files left after stopUploads", len(entries))
	}
}

// TestPutBlobNoRoot: without a landing root every upload is refused and
// nothing is written.
func TestPutBlobNoRoot(t *testing.T) {
	srvURL, _ := landingOffice(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := agent.Dial(ctx, srvURL, agent.Options{Name: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Join(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	_, err = a.PutBlob(ctx, "pc", strings.NewReader("x"), agent.PutOptions{})
	var pe *smcp.Error
	if !errors.As(err, &pe) || pe.Code != smcp.CodeBlobWriteFailed || pe.Reason() != smcp.ReasonForbidden {
		t.Fatalf("err = %v", err)
	}
}
