package computer

import (
	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// putBlob handles one client:put_blob chunk. SKELETON: refuses every
// upload until the landing is built.
func (c *Computer) putBlob(e *sio.Event, raw []byte) {
	var req smcp.PutBlobReq
	if c.decode(e, raw, &req) {
		answer(e, smcp.BlobWriteFailed(smcp.ReasonForbidden, nil))
	}
}
