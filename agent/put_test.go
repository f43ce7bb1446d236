package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/blob"
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// landingFake is a fake server whose client:put_blob answers come from a
// real landing; other events are acked true, null.
func landingFake(t *testing.T) (*fakeServer, string, *blob.Landing) {
	t.Helper()
	l, err := blob.NewLanding(t.TempDir(), blob.UploadOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	f, url := startFake(t, func(e *sio.Event) []json.RawMessage {
		if e.Name != smcp.EventPutBlob {
			return raw("true", "null")
		}
		var req smcp.PutBlobReq
		if err := smcp.DecodePutBlob(e.Args[0], &req); err != nil {
			return []json.RawMessage{smcp.Encode(err)}
		}
		ret, perr := l.Put(&req)
		if perr != nil {
			return []json.RawMessage{smcp.Encode(perr)}
		}
		return []json.RawMessage{smcp.Encode(ret)}
	})
	return f, url, l
}

func TestPutBlob(t *testing.T) {
	f, url, l := landingFake(t)
	c := dial(t, url, Options{})
	data := bytes.Repeat([]byte("0123456789"), 250) // 2500 bytes: chunks of 1000, 1000, 500
	sum := sha256.Sum256(data)
	ret, err := c.PutBlob(context.Background(), "pc", bytes.NewReader(data), PutOptions{NameHint: "d.bin", ChunkSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if ret.LandingPath != filepath.Join(l.Root(), ret.UploadID+"_d.bin") || *ret.TotalSize != 2500 || ret.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("ack %s", smcp.Encode(ret))
	}
	if b, _ := os.ReadFile(ret.LandingPath); !bytes.Equal(b, data) {
		t.Fatal("landed bytes differ")
	}
	sent := f.events(smcp.EventPutBlob)
	if len(sent) != 3 {
		t.Fatalf("sent %d chunks", len(sent))
	}
	seen := map[string]bool{}
	for i, s := range sent {
		var m map[string]any
		_ = json.Unmarshal([]byte(s), &m)
		want := "agent blob chunk_offset computer eof name_hint req_id sha256 total_size"
		if i > 0 {
			want = "agent blob chunk_offset computer eof req_id upload_id"
		}
		if got := strings.Join(slices.Sorted(maps.Keys(m)), " "); got != want {
			t.Errorf("chunk %d keys: %s", i, got)
		}
		if m["chunk_offset"] != float64(i*1000) || m["eof"] != (i == 2) || m["agent"] != "agent" || m["computer"] != "pc" {
			t.Errorf("chunk %d: %v %v", i, m["chunk_offset"], m["eof"])
		}
		id, _ := m["req_id"].(string)
		if seen[id] {
			t.Errorf("req_id %s reused", id)
		}
		seen[id] = true
	}
}

func TestPutFile(t *testing.T) {
	_, url, l := landingFake(t)
	c := dial(t, url, Options{})
	path := filepath.Join(t.TempDir(), "notes v1.txt")
	_ = os.WriteFile(path, []byte("hello"), 0o600)
	ret, err := c.PutFile(context.Background(), "pc", path, PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(l.Root(), ret.UploadID+"_notes_v1.txt"); ret.LandingPath != want {
		t.Fatalf("landed at %s", ret.LandingPath)
	}
	if _, err := c.PutFile(context.Background(), "pc", filepath.Join(t.TempDir(), "missing"), PutOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestPutBlobFromOffset: the upload starts at the reader's position.
func TestPutBlobFromOffset(t *testing.T) {
	_, url, _ := landingFake(t)
	c := dial(t, url, Options{})
	r := bytes.NewReader([]byte("skip:payload"))
	_, _ = r.Seek(5, 0)
	ret, err := c.PutBlob(context.Background(), "pc", r, PutOptions{ChunkSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(ret.LandingPath); string(b) != "payload" {
		t.Fatalf("landed %q", b)
	}
}

func TestPutBlobErrors(t *testing.T) {
	busy := smcp.Encode(smcp.BlobWriteFailed(smcp.ReasonBusy, nil))
	tests := []struct {
		name   string
		o      Options
		answer func(e *sio.Event) []json.RawMessage
		put    PutOptions
		data   string
		check  func(t *testing.T, err error, sent int)
	}{
		{"4019 is typed", Options{}, func(*sio.Event) []json.RawMessage { return []json.RawMessage{busy} }, PutOptions{}, "x",
			func(t *testing.T, err error, _ int) {
				var pe *smcp.Error
				if !errors.As(err, &pe) || pe.Code != smcp.CodeBlobWriteFailed || pe.Reason() != smcp.ReasonBusy {
					t.Errorf("err = %v", err)
				}
			}},
		{"no answer is unsupported", Options{RequestTimeout: 300 * time.Millisecond}, func(*sio.Event) []json.RawMessage { return nil }, PutOptions{}, "x",
			func(t *testing.T, err error, _ int) {
				if !errors.Is(err, ErrPutBlobUnsupported) {
					t.Errorf("err = %v", err)
				}
			}},
		{"server timeout is unsupported", Options{}, func(*sio.Event) []json.RawMessage {
			return []json.RawMessage{smcp.Encode(smcp.NewError(smcp.CodeTimeout, "Computer did not answer in time"))}
		}, PutOptions{}, "x",
			func(t *testing.T, err error, _ int) {
				var pe *smcp.Error
				if !errors.Is(err, ErrPutBlobUnsupported) || !errors.As(err, &pe) || pe.Code != 408 {
					t.Errorf("err = %v", err)
				}
			}},
		{"0.3 agent", Options{ProtocolVersion: "0.3.0"}, nil, PutOptions{}, "x",
			func(t *testing.T, err error, sent int) {
				if !errors.Is(err, errors.ErrUnsupported) || sent != 0 {
					t.Errorf("err = %v, sent %d", err, sent)
				}
			}},
		{"empty", Options{}, nil, PutOptions{}, "",
			func(t *testing.T, err error, sent int) {
				if err == nil || sent != 0 {
					t.Errorf("err = %v, sent %d", err, sent)
				}
			}},
		{"chunk too large", Options{}, nil, PutOptions{ChunkSize: MaxPutChunk + 1}, "x",
			func(t *testing.T, err error, sent int) {
				if err == nil || sent != 0 {
					t.Errorf("err = %v, sent %d", err, sent)
				}
			}},
		{"stored size differs", Options{}, func(e *sio.Event) []json.RawMessage {
			n := int64(2)
			return []json.RawMessage{smcp.Encode(smcp.PutBlobRet{UploadID: strings.Repeat("a", 32), LandingPath: "/x", TotalSize: &n,
				SHA256: strings.Repeat("0", 64), ReqID: "r"})}
		}, PutOptions{}, "x",
			func(t *testing.T, err error, _ int) {
				if err == nil || !strings.Contains(err.Error(), "stored 2 bytes") {
					t.Errorf("err = %v", err)
				}
			}},
		{"stored hash differs", Options{}, func(e *sio.Event) []json.RawMessage {
			n := int64(1)
			return []json.RawMessage{smcp.Encode(smcp.PutBlobRet{UploadID: strings.Repeat("a", 32), LandingPath: "/x", TotalSize: &n,
				SHA256: strings.Repeat("0", 64), ReqID: "r"})}
		}, PutOptions{}, "x",
			func(t *testing.T, err error, _ int) {
				if err == nil || !strings.Contains(err.Error(), "sha256") {
					t.Errorf("err = %v", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := tt.answer
			if answer == nil {
				answer = func(*sio.Event) []json.RawMessage { return []json.RawMessage{busy} }
			}
			f, url := startFake(t, answer)
			c := dial(t, url, tt.o)
			_, err := c.PutBlob(context.Background(), "pc", strings.NewReader(tt.data), tt.put)
			tt.check(t, err, len(f.events(smcp.EventPutBlob)))
		})
	}
}

// TestPutBlobWire pins each chunk's payload, byte for byte, to what
// encoding/json writes for the smcp.PutBlobReq it stands for, with names
// that need escaping and an upload_id too long for the room reserved
// before the blob (the payload is then assembled by copy).
func TestPutBlobWire(t *testing.T) {
	for _, id := range []string{strings.Repeat("ab", 16), strings.Repeat("u", 700)} {
		t.Run(strconv.Itoa(len(id)), func(t *testing.T) {
			var sum string
			f, url := startFake(t, func(e *sio.Event) []json.RawMessage {
				if e.Name != smcp.EventPutBlob {
					return raw("true", "null")
				}
				var req smcp.PutBlobReq
				if err := smcp.DecodePutBlob(e.Args[0], &req); err != nil {
					return []json.RawMessage{smcp.Encode(err)}
				}
				if req.SHA256 != nil {
					sum = *req.SHA256
				}
				ret := smcp.PutBlobRet{UploadID: id, ChunkOffset: *req.ChunkOffset, ReqID: req.ReqID}
				if *req.EOF {
					n := int64(2500)
					ret.LandingPath, ret.TotalSize, ret.SHA256 = "/x", &n, sum
				}
				return []json.RawMessage{smcp.Encode(ret)}
			})
			c := dial(t, url, Options{})
			c.opts.Name = "a<&>\"é" // dial names every test Agent "agent"
			data := bytes.Repeat([]byte("0123456789"), 250)
			hint := "n<a>me\u2028.bin"
			if _, err := c.PutBlob(context.Background(), "p&c", bytes.NewReader(data), PutOptions{NameHint: hint, ChunkSize: 1000}); err != nil {
				t.Fatal(err)
			}
			sent := f.events(smcp.EventPutBlob)
			if len(sent) != 3 {
				t.Fatalf("sent %d chunks", len(sent))
			}
			size, digest := int64(len(data)), sha256.Sum256(data)
			hexSum := hex.EncodeToString(digest[:])
			for i, s := range sent {
				var got map[string]any
				_ = json.Unmarshal([]byte(s), &got)
				off, eof := int64(i*1000), i == 2
				blob := base64.StdEncoding.EncodeToString(data[off:min(off+1000, size)])
				want := smcp.PutBlobReq{Agent: "a<&>\"é", ReqID: got["req_id"].(string), Computer: "p&c", ChunkOffset: &off, EOF: &eof, Blob: &blob}
				if i == 0 {
					want.TotalSize, want.SHA256, want.NameHint = &size, &hexSum, &hint
				} else {
					want.UploadID = &id
				}
				wb, _ := json.Marshal(want)
				if s != string(wb) {
					t.Errorf("chunk %d:\n got %.300s\nwant %.300s", i, s, wb)
				}
			}
		})
	}
}
