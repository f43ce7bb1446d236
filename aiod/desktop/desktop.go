package desktop

import (
	"context"
	"errors"
	"io"

	"github.com/jezek/xgb"
)

// DefaultListen is where the worker listens when AIO_COMPUTER_USE_LISTEN
// is not set.
const DefaultListen = "0.0.0.0:18100"

// Run is `aiod computer-use`: it serves the worker until ctx ends. args
// are the subcommand's arguments (none but --help); getenv reads
// DISPLAY, XAUTHORITY, AIO_COMPUTER_USE_LISTEN and AIO_API_KEY.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("computer-use: not built yet")
}

// conn is the worker's connection to the X server.
type conn = xgb.Conn
