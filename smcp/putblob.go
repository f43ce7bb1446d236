package smcp

// PutBlobReq is the payload of [EventPutBlob]: one chunk of an upload from
// an Agent to a Computer (0.4.0). The first chunk has no UploadID and
// declares TotalSize and SHA256 (and optionally NameHint); every later
// chunk names the UploadID the first ack assigned and declares nothing.
// Chunks are sent one at a time, in order, each after the previous ack.
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
}

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
