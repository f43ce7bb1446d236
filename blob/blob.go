package blob

import (
	"bytes"
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// Defaults of a [Store].
const (
	DefaultCapacity = 256 << 20 // bytes kept at most
	DefaultTTL      = time.Hour
	// DefaultChunk is the largest chunk served: as base64 inside a
	// GetBlobRet it stays well under the signalling server's 1 MiB limit.
	DefaultChunk = 512 << 10
)

// Store keeps blobs in memory. Its methods are safe for concurrent use.
type Store struct {
	key      [32]byte
	capacity int64
	ttl      time.Duration
	chunk    int64
	now      func() time.Time

	mu    sync.Mutex
	items map[string]*list.Element // by id
	lru   *list.List               // front = most recently used
	used  int64
}

type item struct {
	id      string
	scope   string
	data    []byte
	mime    string
	sha     string
	expires time.Time
	// alive, when set, is asked on every read whether the blob's source
	// still exists; false makes the handle gone (see [Store.PutLive]).
	alive func() bool
}

// Options tune a [Store]; zero values take the defaults.
type Options struct {
	Capacity int64
	TTL      time.Duration
	Chunk    int64
}

// NewStore returns an empty store with a fresh random key.
func NewStore(o Options) *Store {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	s := &Store{capacity: o.Capacity, ttl: o.TTL, chunk: o.Chunk, now: time.Now,
		items: make(map[string]*list.Element), lru: list.New()}
	_, _ = rand.Read(s.key[:])
	return s
}

// Put stores data for scope and returns its handle and hex SHA-256.
func (s *Store) Put(data []byte, mime, scope string) (handle, sum string) {
	return s.PutLive(data, mime, scope, nil)
}

// PutLive is [Store.Put] for a blob that is a snapshot of something that
// may go away, such as a skill's file: every read of the handle first calls
// alive (without the store's lock held), and when it reports false the
// blob is dropped and the read fails with 4018 "gone", as the blob
// channel asks producers to re-check authorisation and existence on every
// resolution. A nil alive is [Store.Put].
func (s *Store) PutLive(data []byte, mime, scope string, alive func() bool) (handle, sum string) {
	var idb [16]byte
	_, _ = rand.Read(idb[:])
	id := base64.RawURLEncoding.EncodeToString(idb[:])
	h := sha256.Sum256(data)
	sum = hex.EncodeToString(h[:])
	it := &item{id: id, scope: scope, data: bytes.Clone(data), mime: mime, sha: sum, expires: s.now().Add(s.ttl), alive: alive}
	s.mu.Lock()
	s.items[id] = s.lru.PushFront(it)
	s.used += int64(len(data))
	for s.used > s.capacity && s.lru.Len() > 1 {
		s.dropLocked(s.lru.Back())
	}
	s.mu.Unlock()
	return "blob1." + id + "." + s.mac(id, scope), sum
}

func (s *Store) mac(id, scope string) string {
	m := hmac.New(sha256.New, s.key[:])
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write([]byte(scope))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

func (s *Store) dropLocked(e *list.Element) {
	it := e.Value.(*item)
	s.lru.Remove(e)
	delete(s.items, it.id)
	s.used -= int64(len(it.data))
}

// Get serves one chunk of the blob behind handle to scope, in the shape
// of client:get_blob's answer. Failures are 4018 errors whose reason is
// invalid_handle (malformed or forged), forbidden (minted for another
// scope), gone (expired, evicted, or its source went: see [Store.PutLive])
// or range (offset outside 0..size).
// maxChunk <= 0 means the store's chunk size; larger values are clamped.
func (s *Store) Get(handle, scope string, offset, maxChunk int64) (smcp.GetBlobRet, *smcp.Error) {
	parts := strings.Split(handle, ".")
	if len(parts) != 3 || parts[0] != "blob1" || len(parts[1]) != 22 || len(parts[2]) != 24 {
		return smcp.GetBlobRet{}, smcp.BlobNotAccessible(smcp.ReasonInvalidHandle)
	}
	id, tag := parts[1], parts[2]
	if !hmac.Equal([]byte(tag), []byte(s.mac(id, scope))) {
		// Either forged, or genuine but minted for someone else: only a
		// handle the store knows under another scope is "forbidden".
		s.mu.Lock()
		e, ok := s.items[id]
		s.mu.Unlock()
		if ok && hmac.Equal([]byte(tag), []byte(s.mac(id, e.Value.(*item).scope))) {
			return smcp.GetBlobRet{}, smcp.BlobNotAccessible(smcp.ReasonForbidden)
		}
		return smcp.GetBlobRet{}, smcp.BlobNotAccessible(smcp.ReasonInvalidHandle)
	}
	s.mu.Lock()
	e, ok := s.items[id]
	if ok && s.now().After(e.Value.(*item).expires) {
		s.dropLocked(e)
		ok = false
	}
	if !ok {
		s.mu.Unlock()
		return smcp.GetBlobRet{}, smcp.BlobNotAccessible(smcp.ReasonGone)
	}
	s.lru.MoveToFront(e)
	it := e.Value.(*item)
	s.mu.Unlock()
	if it.alive != nil && !it.alive() {
		s.mu.Lock()
		if e, ok := s.items[id]; ok && e.Value.(*item) == it {
			s.dropLocked(e)
		}
		s.mu.Unlock()
		return smcp.GetBlobRet{}, smcp.BlobNotAccessible(smcp.ReasonGone)
	}
	size := int64(len(it.data))
	if offset < 0 || offset > size {
		return smcp.GetBlobRet{}, smcp.BlobNotAccessible(smcp.ReasonRange)
	}
	if maxChunk <= 0 || maxChunk > s.chunk {
		maxChunk = s.chunk
	}
	end := min(offset+maxChunk, size)
	return smcp.GetBlobRet{
		BlobHandle:  handle,
		MimeType:    it.mime,
		TotalSize:   size,
		SHA256:      it.sha,
		ChunkOffset: offset,
		EOF:         end == size,
		Blob:        base64.StdEncoding.EncodeToString(it.data[offset:end]),
	}, nil
}
