package agent

import (
	"context"
	"errors"
	"io"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// PutBlob uploads size bytes read from r to the Computer named computer
// through client:put_blob. SKELETON.
func (c *Client) PutBlob(ctx context.Context, computer string, r io.Reader, size int64, nameHint string) (*smcp.PutBlobRet, error) {
	return nil, errors.New("a2c: put_blob not implemented yet")
}
