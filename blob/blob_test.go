package blob

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

func TestStore(t *testing.T) {
	s := NewStore(Options{Chunk: 1000})
	data := bytes.Repeat([]byte{1, 2, 3, 250}, 1000) // 4000 bytes
	h, sum := s.Put(data, "image/png", "agent-a")
	want := sha256.Sum256(data)
	if sum != hex.EncodeToString(want[:]) {
		t.Fatalf("sum = %s", sum)
	}
	var got []byte
	for off := int64(0); ; {
		ret, err := s.Get(h, "agent-a", off, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := base64.StdEncoding.DecodeString(ret.Blob)
		if ret.ChunkOffset != off || ret.TotalSize != 4000 || ret.SHA256 != sum || ret.MimeType != "image/png" || len(b) > 1000 {
			t.Fatalf("chunk %+v", ret)
		}
		got = append(got, b...)
		off += int64(len(b))
		if ret.EOF != (off == 4000) {
			t.Fatalf("eof = %v at %d", ret.EOF, off)
		}
		if ret.EOF {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	if ret, err := s.Get(h, "agent-a", 4000, 0); err != nil || !ret.EOF || ret.Blob != "" {
		t.Fatalf("read at the end: %+v %v", ret, err)
	}
	for _, tc := range []struct {
		name, handle, scope string
		off                 int64
		reason              string
	}{
		{"malformed", "nope", "agent-a", 0, smcp.ReasonInvalidHandle},
		{"forged tag", h[:len(h)-2] + "AA", "agent-a", 0, smcp.ReasonInvalidHandle},
		{"other scope", h, "agent-b", 0, smcp.ReasonForbidden},
		{"negative offset", h, "agent-a", -1, smcp.ReasonRange},
		{"past the end", h, "agent-a", 4001, smcp.ReasonRange},
	} {
		_, err := s.Get(tc.handle, tc.scope, tc.off, 0)
		if err == nil || err.Code != smcp.CodeBlobNotAccessible || err.Reason() != tc.reason {
			t.Errorf("%s: err = %v, want reason %s", tc.name, err, tc.reason)
		}
	}
}

func TestEviction(t *testing.T) {
	s := NewStore(Options{Capacity: 100, TTL: time.Minute})
	now := time.Now()
	s.now = func() time.Time { return now }
	h1, _ := s.Put(make([]byte, 60), "", "a")
	h2, _ := s.Put(make([]byte, 60), "", "a") // over capacity: h1 goes
	if _, err := s.Get(h1, "a", 0, 0); err == nil || err.Reason() != smcp.ReasonGone {
		t.Fatalf("evicted: %v", err)
	}
	if _, err := s.Get(h2, "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.Get(h2, "a", 0, 0); err == nil || err.Reason() != smcp.ReasonGone {
		t.Fatalf("expired: %v", err)
	}
	// A handle of another store (another key) is refused, not "gone".
	other := NewStore(Options{})
	h3, _ := other.Put([]byte("x"), "", "a")
	if _, err := s.Get(h3, "a", 0, 0); err == nil || err.Reason() != smcp.ReasonInvalidHandle {
		t.Fatalf("foreign handle: %v", err)
	}
}

// FuzzGet checks that no handle string can panic the store or read
// another scope's blob.
func FuzzGet(f *testing.F) {
	s := NewStore(Options{})
	h, _ := s.Put([]byte("secret"), "", "owner")
	f.Add(h, int64(0))
	f.Add("blob1.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAA", int64(3))
	f.Fuzz(func(t *testing.T, handle string, off int64) {
		if ret, err := s.Get(handle, "intruder", off, 0); err == nil {
			t.Fatalf("intruder read %+v", ret)
		}
	})
}

// TestPutLive: a blob whose source goes reads as gone, and is dropped;
// while it lives it reads as any other.
func TestPutLive(t *testing.T) {
	s := NewStore(Options{})
	alive := true
	calls := 0
	h, _ := s.PutLive([]byte("skill body"), "text/markdown", "a", func() bool { calls++; return alive })
	if ret, err := s.Get(h, "a", 0, 0); err != nil || ret.Blob != "c2tpbGwgYm9keQ==" || calls != 1 {
		t.Fatalf("live read: %+v %v (alive asked %d times)", ret, err, calls)
	}
	if _, err := s.Get(h, "b", 0, 0); err == nil || err.Reason() != smcp.ReasonForbidden || calls != 1 {
		t.Fatalf("another scope: %v (alive asked %d times, want 1: scope is checked first)", err, calls)
	}
	alive = false
	if _, err := s.Get(h, "a", 0, 0); err == nil || err.Reason() != smcp.ReasonGone {
		t.Fatalf("source gone: %v, want 4018 gone", err)
	}
	alive = true // dropped for good: a source that comes back mints a new handle
	if _, err := s.Get(h, "a", 0, 0); err == nil || err.Reason() != smcp.ReasonGone {
		t.Fatalf("after the drop: %v, want gone", err)
	}
	if s.used != 0 {
		t.Fatalf("store still counts %d bytes", s.used)
	}
}
