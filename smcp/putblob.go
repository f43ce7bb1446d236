package smcp

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/a2c-smcp/a2c-go/internal/jsonscan"
)

// PutBlobReq is the payload of [EventPutBlob]: one chunk of an upload from
// an Agent to a Computer (0.4.0). The first chunk has no UploadID and
// declares TotalSize and SHA256 (and optionally NameHint); every later
// chunk names the UploadID the first ack assigned and declares nothing.
// Chunks are sent one at a time, in order, each after the previous ack.
//
// A nil pointer field was absent (or JSON null). Decoding is lenient on
// purpose: a field other than agent, req_id and computer that has a value
// of the wrong JSON type (total_size "x", blob 5) does not fail the
// decode but is recorded (see [PutBlobReq.Malformed]), so that a server
// relays the chunk and the Computer answers it with 4019 (see
// [PutBlobReq.Check]), as the specification wants every fault of a chunk
// judged by the Computer.
type PutBlobReq struct {
	Agent    string `json:"agent"`
	ReqID    string `json:"req_id"`
	Computer string `json:"computer"`
	// UploadID is absent on the first chunk only.
	UploadID *string `json:"upload_id,omitempty"`
	// ChunkOffset must equal the bytes the Computer has received so far.
	ChunkOffset *int64 `json:"chunk_offset,omitempty"`
	// EOF marks the last chunk.
	EOF *bool `json:"eof,omitempty"`
	// TotalSize (at least 1) and SHA256 (hex) describe the whole file, on
	// the first chunk only.
	TotalSize *int64  `json:"total_size,omitempty"`
	SHA256    *string `json:"sha256,omitempty"`
	// NameHint suggests a file name, on the first chunk only.
	NameHint *string `json:"name_hint,omitempty"`
	// Blob is this chunk, base64-encoded (standard alphabet, padded).
	Blob *string `json:"blob,omitempty"`

	// bad has a bit per lenient field that was present with a value of
	// the wrong JSON type; its pointer field is then nil.
	bad uint8
}

// The lenient fields of PutBlobReq, by wire name, and their bits in bad.
var putBlobFields = [...]string{"upload_id", "chunk_offset", "eof", "total_size", "sha256", "name_hint", "blob"}

const (
	badUploadID uint8 = 1 << iota
	badChunkOffset
	badEOF
	badTotalSize
	badSHA256
	badNameHint
	badBlob
)

// UploadIDLen is the length of an upload_id this project assigns: 32
// lower-case hex digits (128 random bits), the form of the reference SDKs.
const UploadIDLen = 32

// PutBlobRet is the successful ack of one [EventPutBlob] chunk. The first
// ack assigns UploadID and later ones echo it; the final ack (after the
// chunk with eof) also carries LandingPath, TotalSize and SHA256 of the
// stored file.
type PutBlobRet struct {
	UploadID    string `json:"upload_id"`
	ChunkOffset int64  `json:"chunk_offset"`
	// LandingPath is the absolute path of the stored file, final ack only.
	LandingPath string `json:"landing_path,omitempty"`
	// TotalSize and SHA256 (recomputed, lower-case hex), final ack only.
	TotalSize *int64 `json:"total_size,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	ReqID     string `json:"req_id"`
}

// CallData returns the request's agent and req_id.
func (r PutBlobReq) CallData() AgentCallData { return AgentCallData{r.Agent, r.ReqID} }

// Target returns the Computer the chunk is addressed to.
func (r PutBlobReq) Target() string { return r.Computer }

// Validate checks agent, req_id and computer only: every other fault of a
// chunk is the Computer's 4019 ([BlobWriteFailed]), so that a server never
// answers for it.
func (r PutBlobReq) Validate() error { return first(checkCall(r.Agent, r.ReqID, r.Computer)...) }

// Malformed reports whether field (a wire name such as "total_size") was
// present with a value of the wrong JSON type. Its pointer field is nil.
func (r *PutBlobReq) Malformed(field string) bool {
	for i, f := range putBlobFields {
		if f == field {
			return r.bad&(1<<i) != 0
		}
	}
	return false
}

// First reports whether r opens an upload: upload_id is absent or null.
// A malformed upload_id (a number, say) is not absent: the chunk is a
// later one with an invalid id.
func (r *PutBlobReq) First() bool { return r.UploadID == nil && r.bad&badUploadID == 0 }

// ValidUploadID reports whether id has the form of an upload_id this
// project assigns ([UploadIDLen] lower-case hex digits). Any other id is
// "malformed" (4019 invalid_upload) without a session lookup.
func ValidUploadID(id string) bool {
	if len(id) != UploadIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidSHA256 reports whether s is a SHA-256 digest in hex: 64 hex digits
// of either case (the specification does not fix the case; senders use
// lower case and comparisons ignore case).
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Check judges the fields of one chunk as a Computer must, without any
// session state, and returns nil or the 4019 answer:
//
//   - first chunk: chunk_offset, eof and blob present with their types,
//     total_size an integer of at least 1, sha256 64 hex digits, name_hint
//     absent or a string; otherwise invalid_declaration. A chunk_offset
//     other than 0 is range (details.chunk_offset 0, what was expected).
//   - later chunk: upload_id of the assigned form ([ValidUploadID]),
//     otherwise invalid_upload; total_size, sha256 and name_hint absent,
//     chunk_offset, eof and blob present with their types, otherwise
//     invalid_declaration (details.upload_id set).
//
// Whether blob is valid base64, the offset matches the bytes received and
// the upload exists is for the landing to judge.
func (r *PutBlobReq) Check() *Error {
	decl := func() *Error { return BlobWriteFailed(ReasonInvalidDeclaration, nil) }
	chunkFields := r.ChunkOffset != nil && r.EOF != nil && r.Blob != nil
	if r.First() {
		switch {
		case !chunkFields, r.TotalSize == nil, *r.TotalSize < 1,
			r.SHA256 == nil, !ValidSHA256(*r.SHA256), r.bad&badNameHint != 0:
			return decl()
		case *r.ChunkOffset != 0:
			return BlobWriteFailed(ReasonRange, map[string]any{"chunk_offset": int64(0)})
		}
		return nil
	}
	if r.UploadID == nil || !ValidUploadID(*r.UploadID) {
		var d map[string]any
		if r.UploadID != nil && len(*r.UploadID) <= 2*UploadIDLen && utf8.ValidString(*r.UploadID) {
			d = map[string]any{"upload_id": *r.UploadID}
		}
		return BlobWriteFailed(ReasonInvalidUpload, d)
	}
	if !chunkFields || r.TotalSize != nil || r.SHA256 != nil || r.NameHint != nil ||
		r.bad&(badTotalSize|badSHA256|badNameHint) != 0 {
		return BlobWriteFailed(ReasonInvalidDeclaration, map[string]any{"upload_id": *r.UploadID})
	}
	return nil
}

// DecodePutBlob is [DecodeRequest] for a client:put_blob payload, with the
// same answers (a 400 [*Error] for a payload that is not a JSON object, is
// malformed, has agent, req_id or computer of the wrong type, or fails
// [PutBlobReq.Validate]) in a single pass over raw: see
// [PutBlobReq.UnmarshalJSON]. DecodeRequest takes the same path for a
// *PutBlobReq.
//
// Unlike UnmarshalJSON, it does not copy the blob: a Blob without escapes
// (base64 never needs one) shares memory with raw, which saves a copy of
// the chunk on every hop. raw must therefore not be modified while r is
// in use; the payloads of received events never are.
func DecodePutBlob(raw []byte, r *PutBlobReq) error {
	if err := decodePutBlob(raw, r); err != nil {
		return err
	}
	return r.Validate()
}

// decodePutBlob is [Decode] for a *PutBlobReq.
func decodePutBlob(raw []byte, r *PutBlobReq) error {
	if i := skipSpace(raw, 0); len(raw)-i >= 4 && string(raw[i:i+4]) == "null" && skipSpace(raw, i+4) == len(raw) {
		return NewError(CodeBadRequest, "invalid payload: must be a JSON object")
	}
	err := r.unmarshal(raw, true)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field == "":
		return NewError(CodeBadRequest, "invalid payload: must be a JSON object")
	}
	return decodeFailure(err)
}

// UnmarshalJSON decodes a chunk in one pass over data, leniently (see
// [PutBlobReq]): agent, req_id and computer of the wrong type fail with a
// *json.UnmarshalTypeError naming the field, malformed JSON fails with a
// *json.SyntaxError, and a key that matches a field only when case is
// ignored is ignored, as [Decode] does for every payload. A chunk is
// mostly its blob, hundreds of kilobytes of base64 that every hop
// decodes, so the blob string is located with a tight scan and copied
// once.
func (r *PutBlobReq) UnmarshalJSON(data []byte) error { return r.unmarshal(data, false) }

// unmarshal is UnmarshalJSON; with alias, a blob without escapes is a
// view of data rather than a copy (see [DecodePutBlob]).
func (r *PutBlobReq) unmarshal(data []byte, alias bool) error {
	*r = PutBlobReq{}
	i := skipSpace(data, 0)
	if i+4 <= len(data) && string(data[i:i+4]) == "null" && skipSpace(data, i+4) == len(data) {
		return nil
	}
	if i >= len(data) || data[i] != '{' {
		if json.Valid(data) {
			return &json.UnmarshalTypeError{Value: "non-object", Type: reflect.TypeFor[PutBlobReq]()}
		}
		return &json.SyntaxError{Offset: int64(i)}
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return r.end(data, i+1, nil)
	}
	// A call field of the wrong type is reported once the whole input is
	// known to be well-formed, as encoding/json does.
	var typeErr error
	for {
		if i >= len(data) || data[i] != '"' {
			return &json.SyntaxError{Offset: int64(i)}
		}
		kend, kesc := jsonscan.String(data, i)
		if kend < 0 {
			return &json.SyntaxError{Offset: int64(i)}
		}
		key := data[i+1 : kend-1]
		if kesc {
			var k string
			if err := json.Unmarshal(data[i:kend], &k); err != nil {
				return &json.SyntaxError{Offset: int64(i)}
			}
			key = []byte(k)
		}
		i = skipSpace(data, kend)
		if i >= len(data) || data[i] != ':' {
			return &json.SyntaxError{Offset: int64(i)}
		}
		i = skipSpace(data, i+1)
		vend, err := r.field(string(key), data, i, alias)
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			if typeErr == nil {
				typeErr = err
			}
		case err != nil:
			return err
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return &json.SyntaxError{Offset: int64(i)}
		}
		switch data[i] {
		case '}':
			return r.end(data, i+1, typeErr)
		case ',':
			i = skipSpace(data, i+1)
		default:
			return &json.SyntaxError{Offset: int64(i)}
		}
	}
}

// end checks that nothing but white space follows the object, and then
// returns typeErr.
func (r *PutBlobReq) end(data []byte, i int, typeErr error) error {
	if skipSpace(data, i) != len(data) {
		return &json.SyntaxError{Offset: int64(i)}
	}
	return typeErr
}

// field decodes the value at data[i:] into the field named key (exact
// match) and returns the index just past the value. With alias, a blob
// without escapes is a view of data.
func (r *PutBlobReq) field(key string, data []byte, i int, alias bool) (int, error) {
	if i >= len(data) {
		return 0, &json.SyntaxError{Offset: int64(i)}
	}
	if data[i] == '"' {
		end, esc := jsonscan.String(data, i)
		if end < 0 {
			return 0, &json.SyntaxError{Offset: int64(i)}
		}
		var s string
		if esc {
			if err := json.Unmarshal(data[i:end], &s); err != nil {
				return 0, &json.SyntaxError{Offset: int64(i)}
			}
		} else if alias && key == "blob" && end-i > 2 {
			// The caller guarantees data is not modified (DecodePutBlob).
			s = unsafe.String(&data[i+1], end-i-2)
		} else {
			s = string(data[i+1 : end-1])
		}
		switch key {
		case "agent":
			r.Agent = s
		case "req_id":
			r.ReqID = s
		case "computer":
			r.Computer = s
		case "upload_id":
			r.UploadID, r.bad = &s, r.bad&^badUploadID
		case "sha256":
			r.SHA256, r.bad = &s, r.bad&^badSHA256
		case "name_hint":
			r.NameHint, r.bad = &s, r.bad&^badNameHint
		case "blob":
			r.Blob, r.bad = &s, r.bad&^badBlob
		case "chunk_offset":
			r.ChunkOffset, r.bad = nil, r.bad|badChunkOffset
		case "eof":
			r.EOF, r.bad = nil, r.bad|badEOF
		case "total_size":
			r.TotalSize, r.bad = nil, r.bad|badTotalSize
		}
		return end, nil
	}
	end := skipValue(data, i)
	if end < 0 {
		return 0, &json.SyntaxError{Offset: int64(i)}
	}
	v := data[i:end]
	if !json.Valid(v) {
		return 0, &json.SyntaxError{Offset: int64(i)}
	}
	null := string(v) == "null"
	switch key {
	case "agent", "req_id", "computer":
		if !null { // null leaves a string unchanged, as encoding/json does
			return end, &json.UnmarshalTypeError{Value: jsonKind(v), Type: reflect.TypeFor[string](), Field: key}
		}
	case "upload_id":
		r.UploadID, r.bad = nil, setBad(r.bad, badUploadID, !null)
	case "sha256":
		r.SHA256, r.bad = nil, setBad(r.bad, badSHA256, !null)
	case "name_hint":
		r.NameHint, r.bad = nil, setBad(r.bad, badNameHint, !null)
	case "blob":
		r.Blob, r.bad = nil, setBad(r.bad, badBlob, !null)
	case "chunk_offset":
		r.ChunkOffset, r.bad = intField(v, r.bad, badChunkOffset)
	case "total_size":
		r.TotalSize, r.bad = intField(v, r.bad, badTotalSize)
	case "eof":
		r.EOF, r.bad = nil, setBad(r.bad, badEOF, !null)
		switch string(v) {
		case "true", "false":
			b := v[0] == 't'
			r.EOF, r.bad = &b, r.bad&^badEOF
		}
	}
	return end, nil
}

// intField reads an integer field: null is absent; anything but a JSON
// integer that fits an int64 (a string, 1.5, 1e3) marks the field bad.
func intField(v []byte, bad, bit uint8) (*int64, uint8) {
	if string(v) == "null" {
		return nil, bad &^ bit
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return nil, bad | bit
	}
	return &n, bad &^ bit
}

func setBad(bad, bit uint8, on bool) uint8 {
	if on {
		return bad | bit
	}
	return bad &^ bit
}

// jsonKind names the JSON type of a valid value, for an UnmarshalTypeError.
func jsonKind(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case '"':
		return "string"
	}
	return "number"
}
