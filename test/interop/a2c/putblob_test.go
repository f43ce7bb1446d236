package a2c

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
	"github.com/a2c-smcp/a2c-go/test/interop/internal/harness"
)

// putAgent is an Agent that sends client:put_blob payloads as given, to
// check the exact answers of the real binaries.
type putAgent struct {
	t    *testing.T
	sock *sio.Socket
	name string
}

func (*putAgent) Event(*sio.Socket, *sio.Event)  {}
func (*putAgent) Disconnect(*sio.Socket, string) {}

// dialPutAgent connects an Agent speaking version and joins office,
// waiting (10 s at most) for the office's previous Agent to be gone: an
// office has one Agent at a time.
func dialPutAgent(t *testing.T, serverURL, version, office, name string) *putAgent {
	t.Helper()
	a := &putAgent{t: t, name: name}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sio.Dial(ctx, serverURL, sio.ClientOptions{Namespace: smcp.Namespace,
		Query: url.Values{smcp.QueryVersion: {version}}, Handler: a})
	if err != nil {
		t.Fatalf("agent dial: %v", err)
	}
	a.sock = s
	t.Cleanup(s.Disconnect)
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleAgent, Name: name, OfficeID: office})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := a.send(smcp.EventJoinOffice, string(b))
		if got == "true" {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent join: %s", got)
		}
	}
}

// runPut runs "a2c put args..." like runA2C, again while the office still
// holds the previous Agent (10 s at most).
func runPut(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, stdout, stderr = runA2C(t, append([]string{"put"}, args...)...)
		if !strings.Contains(stderr, "already has an agent") || time.Now().After(deadline) {
			return code, stdout, stderr
		}
	}
}

// send emits event with payload and returns the ack's first argument.
func (a *putAgent) send(event, payload string) string {
	a.t.Helper()
	ch := make(chan sio.Message, 1)
	a.sock.Request(event, sio.Message{Args: []json.RawMessage{json.RawMessage(payload)}}, 20*time.Second, func(m sio.Message, err error) {
		if err != nil {
			a.t.Errorf("%s: %v", event, err)
		}
		ch <- m
	})
	m := <-ch
	if len(m.Args) == 0 {
		return ""
	}
	return string(m.Args[0])
}

// chunk is a client:put_blob payload for Computer pc. first declares the
// whole of file; otherwise id names the upload.
func (a *putAgent) chunk(id string, file []byte, off, end int, eof bool, extra string) string {
	m := map[string]any{"agent": a.name, "req_id": fmt.Sprintf("r-%d", off), "computer": "pc", "chunk_offset": off, "eof": eof,
		"blob": base64.StdEncoding.EncodeToString(file[off:end])}
	if id == "" {
		m["total_size"], m["sha256"] = len(file), sha256hex(file)
	} else {
		m["upload_id"] = id
	}
	b, _ := json.Marshal(m)
	if extra != "" {
		b = append(b[:len(b)-1], ","+extra+"}"...)
	}
	return string(b)
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// uploadID reads the upload_id of an ack.
func uploadID(t *testing.T, ack string) string {
	t.Helper()
	var r struct {
		UploadID string `json:"upload_id"`
	}
	if json.Unmarshal([]byte(ack), &r) != nil || !smcp.ValidUploadID(r.UploadID) {
		t.Fatalf("ack without upload_id: %s", ack)
	}
	return r.UploadID
}

// refused is the exact 4019 answer for reason and details (JSON members,
// in the Computer's order: keys sorted).
func refused(reason string, details ...string) string {
	d := append([]string{`"reason":"` + reason + `"`}, details...)
	// encoding/json sorts map keys; every detail key sorts as below.
	order := map[string]int{"chunk_offset": 0, "reason": 1, "total_size": 2, "upload_id": 3}
	for i := range d {
		for j := i + 1; j < len(d); j++ {
			ki, _, _ := strings.Cut(strings.Trim(d[i], `"`), `"`)
			kj, _, _ := strings.Cut(strings.Trim(d[j], `"`), `"`)
			if order[kj] < order[ki] {
				d[i], d[j] = d[j], d[i]
			}
		}
	}
	return `{"code":4019,"message":"Blob write failed","details":{` + strings.Join(d, ",") + `}}`
}

// startLandingComputer runs "a2c computer" named name in office default of
// serverURL with extra flags, and waits until agent a sees it.
func startLandingComputer(t *testing.T, serverURL, name string, extra ...string) *harness.Proc {
	t.Helper()
	args := append([]string{"computer", "--server", serverURL, "--name", name, "--skills", "", "--log-level", "debug"}, extra...)
	return harness.Run(t, exec.Command(harness.Bin(t, "a2c"), args...), false)
}

// waitComputers waits until the office "default", which Agent a has
// joined, lists the Computers names.
func waitComputers(t *testing.T, a *agent.Client, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sessions, err := a.ListRoom(ctx10(t))
		found := 0
		for _, s := range sessions {
			for _, n := range names {
				if err == nil && s.Role == smcp.RoleComputer && s.Name == n {
					found++
				}
			}
		}
		if found == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Computers %v never joined", names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPutBlobBinaries: a2c server, a2c computer --landing-root and the
// uploaders (a2c put, the Go Agent, raw payloads), with the exact answers
// of every 4019 reason the binaries can be made to give.
func TestPutBlobBinaries(t *testing.T) {
	srv := startServer(t)
	root := filepath.Join(t.TempDir(), "landing")
	startLandingComputer(t, srv.URL, "pc", "--landing-root", root)
	startLandingComputer(t, srv.URL, "closed")

	file := make([]byte, 700_000) // three chunks of the default 256 KiB
	_, _ = rand.Read(file)
	path := filepath.Join(t.TempDir(), "data set.bin")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("go agent", func(t *testing.T) {
		a := dialAgent(t, srv.URL, "go-agent", agent.Options{})
		if err := a.Join(ctx10(t), "default"); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = a.Leave(ctx10(t)); a.Close() }()
		waitComputers(t, a, "pc", "closed")
		ret, err := a.PutBlob(ctx10(t), "pc", bytes.NewReader(file), agent.PutOptions{NameHint: "../../etc/passwd", ChunkSize: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		if ret.LandingPath != filepath.Join(root, ret.UploadID+"_etc_passwd") || *ret.TotalSize != int64(len(file)) || ret.SHA256 != sha256hex(file) {
			t.Errorf("ack %s", smcp.Encode(ret))
		}
		if b, _ := os.ReadFile(ret.LandingPath); !bytes.Equal(b, file) {
			t.Error("landed bytes differ")
		}
	})

	t.Run("a2c put", func(t *testing.T) {
		code, out, stderr := runPut(t, path, "--server", srv.URL, "--to", "pc")
		landed := strings.TrimSpace(out)
		if code != 0 || filepath.Dir(landed) != root || !strings.HasSuffix(landed, "_data_set.bin") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		if b, _ := os.ReadFile(landed); !bytes.Equal(b, file) {
			t.Error("landed bytes differ")
		}
		code, out, stderr = runPut(t, path, "--server", srv.URL, "--to", "pc", "--as", "x.bin", "--json")
		var res struct {
			Computer    string `json:"computer"`
			LandingPath string `json:"landing_path"`
			TotalSize   int64  `json:"total_size"`
			SHA256      string `json:"sha256"`
			UploadID    string `json:"upload_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("--json: exit %d, %q, %q", code, out, stderr)
		}
		if res.Computer != "pc" || res.LandingPath != filepath.Join(root, res.UploadID+"_x.bin") || res.TotalSize != int64(len(file)) || res.SHA256 != sha256hex(file) {
			t.Errorf("--json: %s", out)
		}
		code, _, stderr = runPut(t, path, "--server", srv.URL, "--to", "closed")
		if code != 1 || !strings.Contains(stderr, "closed refused the upload (4019 forbidden)") {
			t.Errorf("to closed: exit %d, %q", code, stderr)
		}
	})

	a := dialPutAgent(t, srv.URL, smcp.ProtocolVersion, "default", "raw")
	small := file[:10]

	t.Run("ack shapes", func(t *testing.T) {
		ack := a.send(smcp.EventPutBlob, a.chunk("", small, 0, 4, false, `"name_hint":"a b.txt"`))
		id := uploadID(t, ack)
		if want := `{"upload_id":"` + id + `","chunk_offset":0,"req_id":"r-0"}`; ack != want {
			t.Errorf("first ack %s", ack)
		}
		if got, want := a.send(smcp.EventPutBlob, a.chunk(id, small, 4, 8, false, "")), `{"upload_id":"`+id+`","chunk_offset":4,"req_id":"r-4"}`; got != want {
			t.Errorf("middle ack %s", got)
		}
		landed := filepath.Join(root, id+"_a_b.txt")
		want := fmt.Sprintf(`{"upload_id":%q,"chunk_offset":8,"landing_path":%q,"total_size":10,"sha256":%q,"req_id":"r-8"}`, id, landed, sha256hex(small))
		if got := a.send(smcp.EventPutBlob, a.chunk(id, small, 8, 10, true, "")); got != want {
			t.Errorf("final ack %s\nwant %s", got, want)
		}
	})

	t.Run("4019", func(t *testing.T) {
		open := func() string { return uploadID(t, a.send(smcp.EventPutBlob, a.chunk("", small, 0, 4, false, ""))) }

		id := open()
		if got, want := a.send(smcp.EventPutBlob, a.chunk(id, small, 6, 8, false, "")), refused("range", `"chunk_offset":4`, `"upload_id":"`+id+`"`); got != want {
			t.Errorf("out of order: %s\nwant %s", got, want)
		}
		if got, want := a.send(smcp.EventPutBlob, a.chunk(id, small, 4, 8, false, "")), refused("invalid_upload", `"upload_id":"`+id+`"`); got != want {
			t.Errorf("after range the upload is over: %s", got)
		}

		id = open()
		wrong := bytes.Clone(small)
		wrong[9] ^= 1
		if got, want := a.send(smcp.EventPutBlob, a.chunk(id, wrong, 4, 10, true, "")), refused("integrity", `"upload_id":"`+id+`"`); got != want {
			t.Errorf("integrity: %s", got)
		}

		id = open()
		if got, want := a.send(smcp.EventPutBlob, a.chunk(id, small, 4, 8, true, "")), refused("range", `"chunk_offset":4`, `"upload_id":"`+id+`"`); got != want {
			t.Errorf("short eof: %s", got)
		}

		id = open()
		if got, want := a.send(smcp.EventPutBlob, a.chunk(id, small, 4, 8, false, `"total_size":10`)), refused("invalid_declaration", `"upload_id":"`+id+`"`); got != want {
			t.Errorf("declaration repeated: %s", got)
		}

		id = open()
		bad := strings.Replace(a.chunk(id, small, 4, 10, true, ""), `"blob":"`, `"blob":"!!`, 1)
		if got, want := a.send(smcp.EventPutBlob, bad), refused("invalid_declaration", `"upload_id":"`+id+`"`); got != want {
			t.Errorf("bad base64: %s", got)
		}

		for name, payload := range map[string]string{
			"total_size string": strings.Replace(a.chunk("", small, 0, 10, true, ""), `"total_size":10`, `"total_size":"x"`, 1),
			"blob number":       strings.Replace(a.chunk("", small, 0, 10, true, ""), `"blob":"`+base64.StdEncoding.EncodeToString(small)+`"`, `"blob":5`, 1),
			"total_size zero":   strings.Replace(a.chunk("", small, 0, 10, true, ""), `"total_size":10`, `"total_size":0`, 1),
			"sha256 missing":    strings.Replace(a.chunk("", small, 0, 10, true, ""), `"sha256":"`+sha256hex(small)+`",`, ``, 1),
		} {
			if got, want := a.send(smcp.EventPutBlob, payload), refused("invalid_declaration"); got != want {
				t.Errorf("%s: %s", name, got)
			}
		}
		if got, want := a.send(smcp.EventPutBlob, strings.Replace(a.chunk("", small, 0, 10, true, ""), `"total_size":10`, `"total_size":209715200`, 1)),
			refused("too_large", `"total_size":209715200`); got != want {
			t.Errorf("too large: %s", got)
		}
		unknown := strings.Repeat("0", 32)
		if got, want := a.send(smcp.EventPutBlob, a.chunk(unknown, small, 4, 10, true, "")), refused("invalid_upload", `"upload_id":"`+unknown+`"`); got != want {
			t.Errorf("unknown upload: %s", got)
		}
		closed := strings.Replace(a.chunk("", small, 0, 10, true, ""), `"computer":"pc"`, `"computer":"closed"`, 1)
		if got, want := a.send(smcp.EventPutBlob, closed), refused("forbidden"); got != want {
			t.Errorf("no landing root: %s", got)
		}
		if got, want := a.send(smcp.EventPutBlob, strings.Replace(a.chunk("", small, 0, 10, true, ""), `"agent":"raw"`, `"agent":5`, 1)),
			`{"code":400,"message":"invalid payload: field \"agent\" must be string"}`; got != want {
			t.Errorf("a server's 400: %s", got)
		}

		// busy: with four uploads open the fifth is refused. (Every refusal
		// above ended its upload.)
		for range 4 {
			open()
		}
		if got, want := a.send(smcp.EventPutBlob, a.chunk("", small, 0, 10, true, "")), refused("busy"); got != want {
			t.Errorf("busy: %s", got)
		}
	})

	// Only landed files remain: every refused upload's .part is gone, and
	// the open ones are the four of the busy case.
	entries, _ := os.ReadDir(filepath.Join(root, ".a2c-upload"))
	if len(entries) != 4 {
		t.Errorf("%d uploads in progress, want the 4 left open", len(entries))
	}
}

// TestPutBlobUnknownIn030: a 0.3.0 server does not route client:put_blob
// (the event does not exist in 0.3), and a 0.3 Agent does not send it.
func TestPutBlobUnknownIn030(t *testing.T) {
	srv := startServer(t, "--protocol-version", "0.3.0")
	startLandingComputer(t, srv.URL, "pc", "--protocol-version", "0.3.0", "--landing-root", t.TempDir())
	file := []byte("0123456789")
	path := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(path, file, 0o600)
	code, _, stderr := runPut(t, path, "--server", srv.URL, "--to", "pc", "--protocol-version", "0.3.0")
	if code != 1 || !strings.Contains(stderr, "put_blob needs protocol 0.4 or later") {
		t.Errorf("a2c put --protocol-version 0.3.0: exit %d, %q", code, stderr)
	}
	a := dialPutAgent(t, srv.URL, "0.3.0", "default", "raw")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := a.send(smcp.EventGetTools, `{"agent":"raw","req_id":"t","computer":"pc"}`); strings.Contains(got, `"tools"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the 0.3.0 Computer never joined")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, want := a.send(smcp.EventPutBlob, a.chunk("", file, 0, 10, true, "")), `{"code":400,"message":"unknown event"}`; got != want {
		t.Errorf("put_blob to a 0.3.0 server: %s", got)
	}
}
