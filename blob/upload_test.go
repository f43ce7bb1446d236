package blob

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// clock is a fake time source for idle expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestLanding is a landing on a fresh root (not yet created) with a
// fake clock; it is closed when the test ends.
func newTestLanding(t *testing.T, o UploadOptions) (*Landing, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l, err := newLanding(filepath.Join(t.TempDir(), "root"), o, nil, c.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, c
}

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func ptr[T any](v T) *T { return &v }

// firstReq is the first chunk of an upload of data (total_size and sha256
// declared for the whole of data), carrying data[:n].
func firstReq(agent string, data []byte, n int, nameHint *string) *smcp.PutBlobReq {
	return &smcp.PutBlobReq{Agent: agent, ReqID: "r0", Computer: "pc", ChunkOffset: ptr(int64(0)), EOF: ptr(n == len(data)),
		TotalSize: ptr(int64(len(data))), SHA256: ptr(sumHex(data)), NameHint: nameHint,
		Blob: ptr(base64.StdEncoding.EncodeToString(data[:n]))}
}

// nextReq is a later chunk: data[off:end] of upload id.
func nextReq(agent, id string, data []byte, off, end int) *smcp.PutBlobReq {
	return &smcp.PutBlobReq{Agent: agent, ReqID: "r1", Computer: "pc", UploadID: ptr(id), ChunkOffset: ptr(int64(off)),
		EOF: ptr(end == len(data)), Blob: ptr(base64.StdEncoding.EncodeToString(data[off:end]))}
}

// wire is what an answer looks like on the wire.
func wire(v any) string { return string(smcp.Encode(v)) }

func mustPut(t *testing.T, l *Landing, req *smcp.PutBlobReq) *smcp.PutBlobRet {
	t.Helper()
	ret, err := l.Put(req)
	if err != nil {
		t.Fatalf("Put: %s", wire(err))
	}
	return ret
}

// wantRefused checks a 4019 answer: its reason and details.
func wantRefused(t *testing.T, err *smcp.Error, reason string, details map[string]any) {
	t.Helper()
	if want := wire(smcp.BlobWriteFailed(reason, details)); err == nil || wire(err) != want {
		t.Fatalf("answer %s, want %s", wire(err), want)
	}
}

// files lists what is in the landing root (recursively, relative paths).
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// upload sends data in chunks of size n and returns the final ack.
func upload(t *testing.T, l *Landing, agent string, data []byte, n int, hint *string) *smcp.PutBlobRet {
	t.Helper()
	first := min(n, len(data))
	ret := mustPut(t, l, firstReq(agent, data, first, hint))
	for off := first; off < len(data); off += n {
		ret = mustPut(t, l, nextReq(agent, ret.UploadID, data, off, min(off+n, len(data))))
	}
	return ret
}

func TestLandingHappyPath(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := bytes.Repeat([]byte("0123456789"), 1000) // 10000 bytes
	ret := mustPut(t, l, firstReq("agent", data, 4096, ptr("report.pdf")))
	id := ret.UploadID
	if !smcp.ValidUploadID(id) {
		t.Fatalf("upload_id %q", id)
	}
	if got, want := wire(ret), `{"upload_id":"`+id+`","chunk_offset":0,"req_id":"r0"}`; got != want {
		t.Errorf("first ack %s", got)
	}
	if fi, err := os.Stat(l.Root()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("root created with %v, %v", fi.Mode(), err)
	}
	if got := files(t, l.Root()); len(got) != 1 || got[0] != filepath.Join(PartDir, id+".part") {
		t.Errorf("while uploading: %v", got)
	}
	ret = mustPut(t, l, nextReq("agent", id, data, 4096, 8192))
	if got, want := wire(ret), `{"upload_id":"`+id+`","chunk_offset":4096,"req_id":"r1"}`; got != want {
		t.Errorf("middle ack %s", got)
	}
	ret = mustPut(t, l, nextReq("agent", id, data, 8192, len(data)))
	path := filepath.Join(l.Root(), id+"_report.pdf")
	if got, want := wire(ret), `{"upload_id":"`+id+`","chunk_offset":8192,"landing_path":"`+path+`","total_size":10000,"sha256":"`+sumHex(data)+`","req_id":"r1"}`; got != want {
		t.Errorf("final ack %s\nwant      %s", got, want)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, data) {
		t.Errorf("landed file: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("landed file mode %v", fi.Mode())
	}
	if got := files(t, l.Root()); len(got) != 1 {
		t.Errorf("after landing: %v", got)
	}
	// The upload is over: its id is unknown now.
	_, err := l.Put(nextReq("agent", id, data, 10000, len(data)))
	wantRefused(t, err, smcp.ReasonInvalidUpload, map[string]any{"upload_id": id})
}

func TestLandingSingleChunkAndNoHint(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := []byte("x")
	ret := upload(t, l, "a", data, 1, nil)
	if ret.LandingPath != filepath.Join(l.Root(), ret.UploadID) || ret.ChunkOffset != 0 || *ret.TotalSize != 1 {
		t.Fatalf("ack %s", wire(ret))
	}
	// An upper-case declared sha256 is accepted; the ack has it recomputed in lower case.
	req := firstReq("a", data, 1, ptr(""))
	*req.SHA256 = strings.ToUpper(*req.SHA256)
	ret = mustPut(t, l, req)
	if ret.SHA256 != sumHex(data) || ret.LandingPath != filepath.Join(l.Root(), ret.UploadID) {
		t.Fatalf("ack %s", wire(ret))
	}
}

func TestSanitizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"my report (v2).pdf", "my_report_v2_.pdf"},
		{"../../etc/passwd", "etc_passwd"},
		{"/abs/path/x.txt", "abs_path_x.txt"},
		{`..\..\windows\x`, "windows_x"},
		{"..", ""},
		{".hidden", "hidden"},
		{"a/../../b", "a_.._.._b"},
		{"", ""},
		{"___", ""},
		{"ünïcødé.txt", "n_c_d_.txt"},
		{"a\x00b\nc", "a_b_c"},
		{strings.Repeat("x", 100) + ".txt", strings.Repeat("x", 64)},
		{strings.Repeat("a", 63) + "-.b", strings.Repeat("a", 63)},
	}
	for _, tt := range tests {
		if got := SanitizeName(tt.in); got != tt.want {
			t.Errorf("SanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLandingTraversal: whatever the hint, the file lands directly in
// the (real) root under an absolute path.
func TestLandingTraversal(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	for _, hint := range []string{"../../escape", "/etc/passwd", "..", "a/b/c", `..\..\x`, "\x00", strings.Repeat("../", 50)} {
		ret := upload(t, l, "a", []byte("data"), 4, &hint)
		if !filepath.IsAbs(ret.LandingPath) || filepath.Dir(ret.LandingPath) != l.Root() ||
			!strings.HasPrefix(filepath.Base(ret.LandingPath), ret.UploadID) {
			t.Errorf("hint %q landed at %s", hint, ret.LandingPath)
		}
	}
	if got := files(t, filepath.Dir(l.Root())); len(got) != 7 {
		t.Errorf("files around the root: %v", got)
	}
}

// TestLandingSymlinkRoot: a root reached through a link lands under its
// real path.
func TestLandingSymlinkRoot(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	l, err := NewLanding(filepath.Join(dir, "link"), UploadOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ret := upload(t, l, "a", []byte("abc"), 3, ptr("f"))
	if want := filepath.Join(real, ret.UploadID+"_f"); ret.LandingPath != want {
		t.Errorf("landed at %s, want %s", ret.LandingPath, want)
	}
}

// TestLandingCollision: a taken name is never replaced.
func TestLandingCollision(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := []byte("new content")
	ret := mustPut(t, l, firstReq("a", data, 4, ptr("x.txt")))
	taken := filepath.Join(l.Root(), ret.UploadID+"_x.txt")
	if err := os.WriteFile(taken, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	ret = mustPut(t, l, nextReq("a", ret.UploadID, data, 4, len(data)))
	if want := filepath.Join(l.Root(), ret.UploadID+"-1_x.txt"); ret.LandingPath != want {
		t.Errorf("landed at %s, want %s", ret.LandingPath, want)
	}
	if b, _ := os.ReadFile(taken); string(b) != "old" {
		t.Errorf("the taken file now holds %q", b)
	}
	if b, _ := os.ReadFile(ret.LandingPath); string(b) != string(data) {
		t.Errorf("landed %q", b)
	}
}

func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	_ = os.WriteFile(a, []byte("a"), 0o600)
	_ = os.WriteFile(b, []byte("b"), 0o600)
	for name, f := range map[string]func(string, string) error{"rename": renameNoReplace, "link": linkNoReplace} {
		if err := f(a, b); !os.IsExist(err) {
			t.Errorf("%s onto an existing file: %v", name, err)
		}
		if got, _ := os.ReadFile(b); string(got) != "b" {
			t.Errorf("%s replaced the file", name)
		}
	}
	if err := linkNoReplace(a, filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Errorf("link left the source: %v", err)
	}
}

// TestLandingFirstChunkRefusals: one fault at a time; none writes
// anything (the root is not even created).
func TestLandingFirstChunkRefusals(t *testing.T) {
	data := []byte("hello world")
	tests := []struct {
		name    string
		mod     func(r *smcp.PutBlobReq)
		reason  string
		details map[string]any
	}{
		{"total_size missing", func(r *smcp.PutBlobReq) { r.TotalSize = nil }, smcp.ReasonInvalidDeclaration, nil},
		{"total_size zero", func(r *smcp.PutBlobReq) { r.TotalSize = ptr(int64(0)) }, smcp.ReasonInvalidDeclaration, nil},
		{"sha256 missing", func(r *smcp.PutBlobReq) { r.SHA256 = nil }, smcp.ReasonInvalidDeclaration, nil},
		{"sha256 malformed", func(r *smcp.PutBlobReq) { r.SHA256 = ptr("abc") }, smcp.ReasonInvalidDeclaration, nil},
		{"blob missing", func(r *smcp.PutBlobReq) { r.Blob = nil }, smcp.ReasonInvalidDeclaration, nil},
		{"offset not 0", func(r *smcp.PutBlobReq) { r.ChunkOffset = ptr(int64(3)) }, smcp.ReasonRange, map[string]any{"chunk_offset": int64(0)}},
		{"too large", func(r *smcp.PutBlobReq) { r.TotalSize = ptr(int64(1001)) }, smcp.ReasonTooLarge, map[string]any{"total_size": int64(1001)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLanding(t, UploadOptions{MaxBytes: 1000})
			req := firstReq("a", data, 5, nil)
			tt.mod(req)
			_, err := l.Put(req)
			wantRefused(t, err, tt.reason, tt.details)
			if _, err := os.Stat(l.Root()); !os.IsNotExist(err) {
				t.Errorf("the refusal created the root: %v", err)
			}
		})
	}
}

// TestLandingDecodedFaults: a wrong-typed field, as a server relays it,
// is the Computer's invalid_declaration.
func TestLandingDecodedFaults(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	for _, p := range []string{
		`{"agent":"a","req_id":"r","computer":"pc","chunk_offset":0,"eof":true,"total_size":"x","sha256":"` + sumHex([]byte("a")) + `","blob":"YQ=="}`,
		`{"agent":"a","req_id":"r","computer":"pc","chunk_offset":0,"eof":true,"total_size":1,"sha256":"` + sumHex([]byte("a")) + `","blob":5}`,
	} {
		var req smcp.PutBlobReq
		if err := smcp.DecodePutBlob([]byte(p), &req); err != nil {
			t.Fatal(err)
		}
		_, err := l.Put(&req)
		wantRefused(t, err, smcp.ReasonInvalidDeclaration, nil)
	}
}

func TestLandingForbidden(t *testing.T) {
	t.Run("no root", func(t *testing.T) {
		l, err := NewLanding("", UploadOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, perr := l.Put(firstReq("a", []byte("abc"), 3, nil))
		wantRefused(t, perr, smcp.ReasonForbidden, nil)
		// Even a malformed first chunk: the landing is closed to all.
		req := firstReq("a", []byte("abc"), 3, nil)
		req.TotalSize = nil
		_, perr = l.Put(req)
		wantRefused(t, perr, smcp.ReasonForbidden, nil)
	})
	t.Run("root is a file", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "file")
		_ = os.WriteFile(root, []byte("x"), 0o600)
		l, _ := NewLanding(root, UploadOptions{}, nil)
		defer l.Close()
		_, perr := l.Put(firstReq("a", []byte("abc"), 3, nil))
		if perr == nil || perr.Reason() != smcp.ReasonForbidden {
			t.Fatalf("answer %s", wire(perr))
		}
		// The refused upload holds no place.
		l.mu.Lock()
		n := len(l.sessions)
		l.mu.Unlock()
		if n != 0 {
			t.Errorf("%d sessions left", n)
		}
	})
	t.Run(PartDir+" is a link", func(t *testing.T) {
		l, _ := newTestLanding(t, UploadOptions{})
		elsewhere := t.TempDir()
		_ = os.MkdirAll(l.Root(), 0o700)
		_ = os.Symlink(elsewhere, filepath.Join(l.Root(), PartDir))
		_, perr := l.Put(firstReq("a", []byte("abc"), 3, nil))
		if perr == nil || perr.Reason() != smcp.ReasonForbidden {
			t.Fatalf("answer %s", wire(perr))
		}
		if got := files(t, elsewhere); len(got) != 0 {
			t.Errorf("wrote through the link: %v", got)
		}
	})
}

// TestLandingLaterChunkRefusals: each fault of a later chunk, and what
// becomes of the upload (ended: its .part gone, its id unknown).
func TestLandingLaterChunkRefusals(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefgh"), 100) // 800 bytes
	tests := []struct {
		name    string
		req     func(id string) *smcp.PutBlobReq
		reason  string
		details func(id string) map[string]any
		ends    bool
	}{
		{"unknown id", func(string) *smcp.PutBlobReq { return nextReq("a", strings.Repeat("0", 32), data, 100, 200) },
			smcp.ReasonInvalidUpload, func(string) map[string]any { return map[string]any{"upload_id": strings.Repeat("0", 32)} }, false},
		{"malformed id", func(string) *smcp.PutBlobReq { return nextReq("a", "../x", data, 100, 200) },
			smcp.ReasonInvalidUpload, func(string) map[string]any { return map[string]any{"upload_id": "../x"} }, false},
		{"another agent's id", func(id string) *smcp.PutBlobReq { return nextReq("mallory", id, data, 100, 200) },
			smcp.ReasonInvalidUpload, func(id string) map[string]any { return map[string]any{"upload_id": id} }, false},
		{"out of order", func(id string) *smcp.PutBlobReq { return nextReq("a", id, data, 200, 300) },
			smcp.ReasonRange, func(id string) map[string]any { return map[string]any{"upload_id": id, "chunk_offset": int64(100)} }, true},
		{"repeated chunk", func(id string) *smcp.PutBlobReq { return nextReq("a", id, data, 0, 100) },
			smcp.ReasonRange, func(id string) map[string]any { return map[string]any{"upload_id": id, "chunk_offset": int64(100)} }, true},
		{"declaration repeated", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, data, 100, 200)
			r.TotalSize = ptr(int64(len(data)))
			return r
		}, smcp.ReasonInvalidDeclaration, func(id string) map[string]any { return map[string]any{"upload_id": id} }, true},
		{"name_hint repeated", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, data, 100, 200)
			r.NameHint = ptr("x")
			return r
		}, smcp.ReasonInvalidDeclaration, func(id string) map[string]any { return map[string]any{"upload_id": id} }, true},
		{"bad base64", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, data, 100, 200)
			r.Blob = ptr("!!!!")
			return r
		}, smcp.ReasonInvalidDeclaration, func(id string) map[string]any { return map[string]any{"upload_id": id} }, true},
		{"base64 with a newline", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, data, 100, 200)
			*r.Blob = (*r.Blob)[:8] + "\n" + (*r.Blob)[8:]
			return r
		}, smcp.ReasonInvalidDeclaration, func(id string) map[string]any { return map[string]any{"upload_id": id} }, true},
		{"unpadded base64", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, data, 100, 101)
			*r.Blob = strings.TrimRight(*r.Blob, "=")
			return r
		}, smcp.ReasonInvalidDeclaration, func(id string) map[string]any { return map[string]any{"upload_id": id} }, true},
		{"overrun before eof", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, append(data, 'z'), 100, len(data)+1)
			r.EOF = ptr(false)
			return r
		}, smcp.ReasonRange, func(id string) map[string]any { return map[string]any{"upload_id": id, "chunk_offset": int64(100)} }, true},
		{"eof short", func(id string) *smcp.PutBlobReq {
			r := nextReq("a", id, data, 100, 200)
			r.EOF = ptr(true)
			return r
		}, smcp.ReasonRange, func(id string) map[string]any { return map[string]any{"upload_id": id, "chunk_offset": int64(100)} }, true},
		{"integrity", func(id string) *smcp.PutBlobReq {
			other := bytes.Clone(data)
			other[500] ^= 1
			return nextReq("a", id, other, 100, len(data))
		}, smcp.ReasonIntegrity, func(id string) map[string]any { return map[string]any{"upload_id": id} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLanding(t, UploadOptions{})
			id := mustPut(t, l, firstReq("a", data, 100, ptr("f.bin"))).UploadID
			_, err := l.Put(tt.req(id))
			wantRefused(t, err, tt.reason, tt.details(id))
			left := files(t, l.Root())
			if tt.ends {
				if len(left) != 0 {
					t.Errorf("files left: %v", left)
				}
				_, err := l.Put(nextReq("a", id, data, 100, 200))
				wantRefused(t, err, smcp.ReasonInvalidUpload, map[string]any{"upload_id": id})
				return
			}
			// The upload goes on untouched.
			ret := mustPut(t, l, nextReq("a", id, data, 100, len(data)))
			if b, _ := os.ReadFile(ret.LandingPath); !bytes.Equal(b, data) {
				t.Errorf("landed %d bytes", len(b))
			}
		})
	}
}

func TestLandingBusy(t *testing.T) {
	l, c := newTestLanding(t, UploadOptions{MaxConcurrent: 2})
	data := []byte("0123456789")
	a := mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
	mustPut(t, l, firstReq("b", data, 5, nil))
	_, err := l.Put(firstReq("c", data, 5, nil))
	wantRefused(t, err, smcp.ReasonBusy, nil)
	if got := files(t, l.Root()); len(got) != 2 {
		t.Errorf("busy wrote: %v", got)
	}
	// A finished upload frees its place.
	mustPut(t, l, nextReq("a", a, data, 5, 10))
	mustPut(t, l, firstReq("c", data, 5, nil))
	_, err = l.Put(firstReq("d", data, 5, nil))
	wantRefused(t, err, smcp.ReasonBusy, nil)
	// Expired uploads hold no place.
	c.add(l.opts.IdleTimeout + time.Second)
	mustPut(t, l, firstReq("d", data, 5, nil))
}

func TestLandingIdleExpiry(t *testing.T) {
	l, c := newTestLanding(t, UploadOptions{IdleTimeout: time.Minute})
	data := []byte("0123456789")
	id := mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
	c.add(59 * time.Second)
	ret := mustPut(t, l, nextReq("a", id, data, 5, 6)) // activity keeps it open
	c.add(61 * time.Second)
	_, err := l.Put(nextReq("a", id, data, 6, 10))
	wantRefused(t, err, smcp.ReasonInvalidUpload, map[string]any{"upload_id": ret.UploadID})
	if got := files(t, l.Root()); len(got) != 0 {
		t.Errorf("expired upload left %v", got)
	}
	// The janitor's sweep ends an idle upload by itself.
	id = mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
	c.add(2 * time.Minute)
	l.Sweep()
	if got := files(t, l.Root()); len(got) != 0 {
		t.Errorf("swept upload left %v", got)
	}
	l.mu.Lock()
	_, open := l.sessions[id]
	l.mu.Unlock()
	if open {
		t.Error("sweep left the session open")
	}
}

// TestLandingOneChunkAtATime: a chunk sent before the previous one's ack
// is refused; the one being written goes on.
func TestLandingOneChunkAtATime(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := []byte("0123456789")
	id := mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
	p, err := l.Accept(nextReq("a", id, data, 5, 10))
	if err != nil {
		t.Fatal(wire(err))
	}
	_, err = l.Accept(nextReq("a", id, data, 5, 10))
	wantRefused(t, err, smcp.ReasonRange, map[string]any{"upload_id": id, "chunk_offset": int64(5)})
	if ret, err := p.Finish(); err != nil || ret.LandingPath == "" {
		t.Fatalf("finish: %s %s", wire(ret), wire(err))
	}
}

func TestLandingIOError(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		l, _ := newTestLanding(t, UploadOptions{})
		data := []byte("0123456789")
		id := mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
		l.mu.Lock()
		_ = l.sessions[id].file.Close() // the disk fails under the upload
		l.mu.Unlock()
		_, err := l.Put(nextReq("a", id, data, 5, 10))
		wantRefused(t, err, smcp.ReasonIOError, map[string]any{"upload_id": id})
		if got := files(t, l.Root()); len(got) != 0 {
			t.Errorf("left %v", got)
		}
	})
	t.Run("landing", func(t *testing.T) {
		l, _ := newTestLanding(t, UploadOptions{})
		data := []byte("0123456789")
		id := mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
		if err := os.RemoveAll(l.Root()); err != nil { // the root vanishes before the last chunk
			t.Fatal(err)
		}
		_, err := l.Put(nextReq("a", id, data, 5, 10))
		wantRefused(t, err, smcp.ReasonIOError, map[string]any{"upload_id": id})
	})
	t.Run("closed", func(t *testing.T) {
		l, _ := newTestLanding(t, UploadOptions{})
		l.Close()
		_, err := l.Put(firstReq("a", []byte("x"), 1, nil))
		wantRefused(t, err, smcp.ReasonIOError, nil)
	})
}

// TestLandingGC: orphaned .part files (of no open upload, old enough)
// are removed at start and by Sweep; nothing else is touched.
func TestLandingGC(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	parts := filepath.Join(root, PartDir)
	if err := os.MkdirAll(parts, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	write := func(path string, age time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, age, age); err != nil {
			t.Fatal(err)
		}
	}
	orphan := filepath.Join(parts, strings.Repeat("a", 32)+".part")
	young := filepath.Join(parts, strings.Repeat("b", 32)+".part")
	other := filepath.Join(parts, "notes.txt")
	landed := filepath.Join(root, strings.Repeat("c", 32)+"_old.bin")
	write(orphan, old)
	write(young, time.Now())
	write(other, old)
	write(landed, old)
	target := filepath.Join(t.TempDir(), "target")
	write(target, old)
	link := filepath.Join(parts, strings.Repeat("d", 32)+".part")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	l, err := NewLanding(root, UploadOptions{IdleTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The janitor's first sweep runs at start.
	deadline := time.Now().Add(10 * time.Second)
	for _, err := os.Stat(orphan); !os.IsNotExist(err); _, err = os.Stat(orphan) {
		if time.Now().After(deadline) {
			t.Fatal("the orphan was not collected at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range []string{young, other, landed, target, link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
	// An open upload's .part is not an orphan, however old.
	data := []byte("0123456789")
	id := mustPut(t, l, firstReq("a", data, 5, nil)).UploadID
	part := filepath.Join(parts, id+".part")
	_ = os.Chtimes(part, old, old)
	_ = os.Chtimes(young, old, old)
	l.Sweep()
	if _, err := os.Stat(part); err != nil {
		t.Errorf("open upload collected: %v", err)
	}
	if _, err := os.Stat(young); !os.IsNotExist(err) {
		t.Errorf("aged orphan kept: %v", err)
	}
	mustPut(t, l, nextReq("a", id, data, 5, 10))
}

// TestLandingClose: Close stops the janitor and removes the uploads in
// progress.
func TestLandingClose(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	mustPut(t, l, firstReq("a", []byte("0123456789"), 5, nil))
	l.Close()
	select {
	case <-l.done:
	default:
		t.Error("janitor still running")
	}
	if got := files(t, l.Root()); len(got) != 0 {
		t.Errorf("left %v", got)
	}
	l.Close() // idempotent
}

// TestLandingConcurrentUploads runs uploads of several Agents at once
// (for the race detector).
func TestLandingConcurrentUploads(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{MaxConcurrent: 8})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Repeat([]byte{byte(i)}, 10000+i)
			ret, err := l.Put(firstReq(string(rune('a'+i)), data, 1000, nil))
			for off := 1000; err == nil && off < len(data); off += 1000 {
				ret, err = l.Put(nextReq(string(rune('a'+i)), ret.UploadID, data, off, min(off+1000, len(data))))
			}
			if err != nil {
				t.Errorf("upload %d: %s", i, wire(err))
				return
			}
			if b, _ := os.ReadFile(ret.LandingPath); !bytes.Equal(b, data) {
				t.Errorf("upload %d landed wrong bytes", i)
			}
		}()
	}
	wg.Wait()
	l.Sweep()
	if got := files(t, filepath.Join(l.Root(), PartDir)); len(got) != 0 {
		t.Errorf("parts left: %v", got)
	}
}

// stagedUpload sends data in chunks of size n through Accept and Stage,
// as a Computer does, and returns every answer.
func stagedUpload(t *testing.T, l *Landing, data []byte, n int) []*smcp.PutBlobRet {
	t.Helper()
	var rets []*smcp.PutBlobRet
	req := firstReq("a", data, min(n, len(data)), nil)
	for off := 0; ; {
		p, err := l.Accept(req)
		if err != nil {
			t.Fatalf("accept at %d: %s", off, wire(err))
		}
		ret, err := p.Stage()
		if err != nil {
			t.Fatalf("stage at %d: %s", off, wire(err))
		}
		rets = append(rets, ret)
		if off += min(n, len(data)-off); off == len(data) {
			return rets
		}
		req = nextReq("a", ret.UploadID, data, off, min(off+n, len(data)))
	}
}

// TestLandingStage: chunks answered before they are on disk land the same
// file, the final answer comes once every byte is written and checked,
// and the answers are those of Finish.
func TestLandingStage(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	rets := stagedUpload(t, l, data, 10000)
	last := rets[len(rets)-1]
	for i, r := range rets[:len(rets)-1] {
		if r.UploadID != last.UploadID || r.ChunkOffset != int64(i*10000) || r.LandingPath != "" {
			t.Fatalf("answer %d: %s", i, wire(r))
		}
	}
	if last.LandingPath == "" || *last.TotalSize != int64(len(data)) || last.SHA256 != sumHex(data) {
		t.Fatalf("final answer %s", wire(last))
	}
	// Landed when answered: no write may still be running.
	if b, err := os.ReadFile(last.LandingPath); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("landed file: %v, equal %v", err, bytes.Equal(b, data))
	}
	if got := files(t, l.Root()); len(got) != 1 {
		t.Fatalf("files %v", got)
	}
}

// TestLandingStageWriteFailure: a write that fails behind an early answer
// is the next chunk's answer (io_error), which ends the upload and
// removes its .part.
func TestLandingStageWriteFailure(t *testing.T) {
	for _, lastNext := range []bool{false, true} {
		l, _ := newTestLanding(t, UploadOptions{})
		data := bytes.Repeat([]byte("x"), 30)
		id := mustPut(t, l, firstReq("a", data, 10, nil)).UploadID
		p, err := l.Accept(nextReq("a", id, data, 10, 20))
		if err != nil {
			t.Fatal(wire(err))
		}
		l.mu.Lock()
		_ = l.sessions[id].file.Close() // the disk fails under the upload
		l.mu.Unlock()
		if ret, err := p.Stage(); err != nil || ret.ChunkOffset != 10 {
			t.Fatalf("early answer %s %s", wire(ret), wire(err))
		}
		next := nextReq("a", id, data, 20, 30) // the last chunk
		if !lastNext {
			next = nextReq("a", id, append(bytes.Clone(data), 'y'), 20, 30) // not the last
		}
		p, err = l.Accept(next)
		if err != nil {
			t.Fatal(wire(err))
		}
		_, err = p.Stage()
		wantRefused(t, err, smcp.ReasonIOError, map[string]any{"upload_id": id})
		if got := files(t, l.Root()); len(got) != 0 {
			t.Errorf("left %v", got)
		}
		_, err = l.Accept(nextReq("a", id, data, 30, 30))
		wantRefused(t, err, smcp.ReasonInvalidUpload, map[string]any{"upload_id": id})
	}
}

// TestLandingStageFaultsAtOnce: the faults a chunk carries (its base64,
// its range) are its own answer, never deferred.
func TestLandingStageFaultsAtOnce(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := bytes.Repeat([]byte("x"), 30)
	id := mustPut(t, l, firstReq("a", data, 10, nil)).UploadID
	bad := nextReq("a", id, data, 10, 20)
	*bad.Blob = "not base64!"
	p, err := l.Accept(bad)
	if err != nil {
		t.Fatal(wire(err))
	}
	_, err = p.Stage()
	wantRefused(t, err, smcp.ReasonInvalidDeclaration, map[string]any{"upload_id": id})

	id = mustPut(t, l, firstReq("a", data, 10, nil)).UploadID
	long := nextReq("a", id, append(bytes.Clone(data), "more"...), 10, 34) // past total_size
	*long.EOF = false
	if p, err = l.Accept(long); err != nil {
		t.Fatal(wire(err))
	}
	_, err = p.Stage()
	wantRefused(t, err, smcp.ReasonRange, map[string]any{"upload_id": id, "chunk_offset": int64(10)})
}

// TestLandingStageCloseWaits: Close waits for a write behind an early
// answer and removes the .part.
func TestLandingStageCloseWaits(t *testing.T) {
	l, _ := newTestLanding(t, UploadOptions{})
	data := bytes.Repeat([]byte("x"), 30)
	id := mustPut(t, l, firstReq("a", data, 10, nil)).UploadID
	p, err := l.Accept(nextReq("a", id, data, 10, 20))
	if err != nil {
		t.Fatal(wire(err))
	}
	if _, err := p.Stage(); err != nil {
		t.Fatal(wire(err))
	}
	l.Close()
	if got := files(t, l.Root()); len(got) != 0 {
		t.Errorf("left %v", got)
	}
}

// TestStageRefusalDuringBackgroundWrite: a chunk refused (wrong offset, bad
// fields) while the previous chunk's early-acked write still runs ends the
// upload without closing the file under that write (run with -race), and
// the .part goes once the write is over.
func TestStageRefusalDuringBackgroundWrite(t *testing.T) {
	for _, bad := range []string{"offset", "declaration"} {
		t.Run(bad, func(t *testing.T) {
			l, _ := newTestLanding(t, UploadOptions{MaxBytes: 1 << 30})
			data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20)
			n := 8 << 20
			p, err := l.Accept(firstReq("a", data, n, nil))
			if err != nil {
				t.Fatal(wire(err))
			}
			ret, err := p.Stage() // answered early; the write goes on behind
			if err != nil {
				t.Fatal(wire(err))
			}
			next := nextReq("a", ret.UploadID, data, n, n+10)
			want, details := smcp.ReasonInvalidDeclaration, map[string]any{"upload_id": ret.UploadID}
			if bad == "offset" {
				next = nextReq("a", ret.UploadID, data, 5, 10)
				want, details = smcp.ReasonRange, map[string]any{"upload_id": ret.UploadID, "chunk_offset": int64(n)}
			} else {
				next.TotalSize = ptr(int64(len(data)))
			}
			_, err = l.Accept(next)
			wantRefused(t, err, want, details)
			l.Close() // waits for the write and the discard
			if got := files(t, l.root); len(got) != 0 {
				t.Errorf("left behind: %v", got)
			}
		})
	}
}

// TestLandingDo: with UploadOptions.Do every step of an upload that
// touches a path (the first chunk's open, the landing, an abort, the
// janitor's listing and removal) runs through it, and a middle chunk,
// content only, does not; a Do that fails refuses the upload, before
// anything is made or with what it made removed. (TestLandingDoConfines, as root, shows that nothing
// escapes it.)
func TestLandingDo(t *testing.T) {
	var calls atomic.Int32
	first := make(chan struct{})
	var once sync.Once
	var fail, failAfter atomic.Bool
	do := func(f func() error) error {
		calls.Add(1)
		once.Do(func() { close(first) }) // the janitor's sweep at start
		if fail.Load() {
			return errors.New("no sandbox")
		}
		if err := f(); err != nil || !failAfter.Load() {
			return err
		}
		return errors.New("the sandbox ended")
	}
	l, c := newTestLanding(t, UploadOptions{Do: do})
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the janitor's first sweep did not run through Do")
	}
	data := []byte("0123456789")
	var id string
	old := time.Unix(1_000_000_000, 0)
	steps := []struct {
		name string
		run  func(t *testing.T)
		want int32
	}{
		{"open", func(t *testing.T) { id = mustPut(t, l, firstReq("a", data, 3, nil)).UploadID }, 1},
		{"content", func(t *testing.T) { mustPut(t, l, nextReq("a", id, data, 3, 6)) }, 0},
		{"land", func(t *testing.T) { mustPut(t, l, nextReq("a", id, data, 6, 10)) }, 1},
		{"abort", func(t *testing.T) {
			id = mustPut(t, l, firstReq("a", data, 3, nil)).UploadID
			_, err := l.Put(nextReq("a", id, data, 4, 6))
			wantRefused(t, err, smcp.ReasonRange, map[string]any{"upload_id": id, "chunk_offset": int64(3)})
		}, 2},
		{"sweep nothing", func(t *testing.T) { l.Sweep() }, 1},
		{"sweep an orphan", func(t *testing.T) {
			orphan := filepath.Join(l.Root(), PartDir, strings.Repeat("e", 32)+".part")
			if err := os.WriteFile(orphan, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			_ = os.Chtimes(orphan, old, old)
			l.Sweep()
			if _, err := os.Stat(orphan); !os.IsNotExist(err) {
				t.Errorf("orphan kept: %v", err)
			}
		}, 2},
		{"expire", func(t *testing.T) {
			id = mustPut(t, l, firstReq("a", data, 3, nil)).UploadID
			c.add(time.Hour)
			l.Sweep() // with the open: the session's removal, the listing
			if got := files(t, l.Root()); len(got) != 1 {
				t.Errorf("files = %v", got)
			}
		}, 3},
		{"refused", func(t *testing.T) {
			fail.Store(true)
			defer fail.Store(false)
			if err := os.RemoveAll(l.Root()); err != nil {
				t.Fatal(err)
			}
			_, err := l.Put(firstReq("a", data, 3, nil))
			if err == nil || err.Reason() != smcp.ReasonForbidden {
				t.Fatalf("answer %s, want forbidden", wire(err))
			}
			if _, err := os.Lstat(l.Root()); !os.IsNotExist(err) {
				t.Errorf("root made outside Do: %v", err)
			}
		}, 1},
		{"failed after its work", func(t *testing.T) {
			failAfter.Store(true)
			defer failAfter.Store(false)
			_, err := l.Put(firstReq("a", data, 3, nil))
			if err == nil || err.Reason() != smcp.ReasonForbidden {
				t.Fatalf("answer %s, want forbidden", wire(err))
			}
			if got := files(t, l.Root()); len(got) != 0 {
				t.Errorf("files = %v", got)
			}
		}, 2}, // the open, the removal of its .part
	}
	for _, st := range steps {
		calls.Store(0)
		st.run(t)
		if got := calls.Load(); got != st.want {
			t.Errorf("%s: %d calls of Do, want %d", st.name, got, st.want)
		}
	}
}
