package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/origin"
)

// defaultListen is where the worker listens when AIO_COMPUTER_USE_LISTEN
// is not set: every interface, as the published worker does. Set a key
// (AIO_API_KEY) or listen on 127.0.0.1 where the network is not trusted.
const defaultListen = "0.0.0.0:18100"

// Server timeouts: the headers must arrive within readHeaderTimeout, and
// a request body must keep making progress (bodyIdle per read).
const (
	readHeaderTimeout = 10 * time.Second
	bodyIdle          = 30 * time.Second
	shutdownWait      = 5 * time.Second
)

const usageText = `Usage: aiod computer-use

Serves the computer-use worker: /v2/computer/* (screenshots, input
actions, clipboard, windows, recording) on the X display in DISPLAY, for
aiod to forward to (AIO_COMPUTER_USE_URL). It takes no flags.

Environment:
  DISPLAY                  the X display to drive (required), e.g. :99
  XAUTHORITY               the X authority file, when the display needs one
  AIO_COMPUTER_USE_LISTEN  host:port to listen on (default 0.0.0.0:18100)
  AIO_API_KEY              when set, every route but /healthz and
                           /openapi.json needs it (Authorization: Bearer,
                           x-api-key or ?api_key=)

Programs (Debian packages): xdotool (keyboard input), xclip (clipboard),
ffmpeg (recording). A missing one is reported by GET /capabilities and
its routes answer 503.
`

// Run is `aiod computer-use`: it serves the worker until ctx ends. args
// are the subcommand's arguments (none but --help); getenv reads
// DISPLAY, XAUTHORITY, AIO_COMPUTER_USE_LISTEN and AIO_API_KEY. A
// missing DISPLAY or an X server that cannot be reached at start is an
// error (aiod exits 1); a display lost later is reconnected, its routes
// answering 503 meanwhile.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			fmt.Fprint(stdout, usageText)
			return nil
		}
		return fmt.Errorf("computer-use takes no arguments (got %q); see aiod computer-use --help", args[0])
	}
	name := getenv("DISPLAY")
	if name == "" {
		return errors.New("computer-use: DISPLAY is not set; it needs an X display (e.g. Xvfb :99 -screen 0 1920x1080x24 and DISPLAY=:99)")
	}
	xauth := getenv("XAUTHORITY")
	if xauth != "" && os.Getenv("XAUTHORITY") != xauth {
		// xgb reads the authority file's name from the process environment
		_ = os.Setenv("XAUTHORITY", xauth)
	}
	listen := getenv("AIO_COMPUTER_USE_LISTEN")
	if listen == "" {
		listen = defaultListen
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	w := newWorker(name, xauth, getenv("AIO_API_KEY"), logger)
	defer w.close()
	if err := w.x.connect(); err != nil {
		return fmt.Errorf("computer-use: cannot reach the X display %s: %w", name, err)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("computer-use: listen on %s: %w", listen, err)
	}
	caps := w.capabilities()
	logger.Info("computer-use worker listening", "addr", l.Addr().String(), "display", name, "status", caps.Status, "missing", caps.Missing)
	if w.key == "" && !loopback(l.Addr()) {
		logger.Warn("no AIO_API_KEY: anyone who reaches this address drives the display", "addr", l.Addr().String())
	}
	if w.origins, err = origin.New(origin.Config{Listen: l.Addr().String()}); err != nil {
		return fmt.Errorf("computer-use: %w", err)
	}
	srv := &http.Server{Handler: w.handler(bodyIdle), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("computer-use: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-served
	logger.Info("computer-use worker stopped")
	return nil
}

func loopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
