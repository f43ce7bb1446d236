package aiod

// This file is the aiod command line: flag parsing and wiring of the
// daemon. cmd/aiod only calls [Main].

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Main runs aiod with args (without the program name) and returns the
// exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "start" {
		args = args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, args, stdout, stderr); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			if ue != "" {
				fmt.Fprintf(stderr, "aiod: %s\n", string(ue))
			}
			return 2
		}
		fmt.Fprintf(stderr, "aiod: %s\n", err)
		return 1
	}
	return 0
}

// ReadHeaderTimeout bounds how long a client may take to send a
// request's headers; the body is bounded by progress instead (see
// [Config.BodyIdle]).
const ReadHeaderTimeout = 10 * time.Second

// newServer is the daemon's HTTP server. It has no ReadTimeout or
// WriteTimeout, which would cut long uploads, downloads, streams and
// WebSockets by their total time.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: 120 * time.Second}
}

type usageError string

func (e usageError) Error() string { return string(e) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, usageError(fmt.Sprintf("%s must be a positive integer, got %q", name, v))
	}
	return n, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("aiod", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defPort, _ := strconv.Atoi(envOr("AIO_PORT", "18091"))
	host := fs.String("host", envOr("AIO_HOST", "127.0.0.1"), "address to listen on (env AIO_HOST)")
	port := fs.Int("port", defPort, "port to listen on, 0 picks a free one (env AIO_PORT)")
	workspace := fs.String("workspace", "", "directory commands start in and relative paths resolve against (default the account's home)")
	apiKey := fs.String("api-key", envOr("AIO_API_KEY", os.Getenv("SANDBOX_API_KEY")), "API key required on protected routes (env AIO_API_KEY)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "Usage of aiod:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument " + fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError("bad --log-level " + *logLevel)
	}
	if *port < 0 || *port > 65535 {
		return usageError("bad --port")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := hideSelf(); err != nil {
		log.Warn("aiod: cannot make the process non-dumpable; commands running as its account can read its environment", "error", err.Error())
	}
	maxSessions, err := envInt("AIO_BASH_MAX_SESSIONS", 50)
	if err != nil {
		return err
	}
	idleSecs, err := envInt("AIO_BASH_SESSION_TIMEOUT_SECS", 3600)
	if err != nil {
		return err
	}
	killGrace, err := envInt("AIO_BASH_KILL_GRACE_SECS", 2)
	if err != nil {
		return err
	}
	if killGrace > 10 {
		return usageError(fmt.Sprintf("AIO_BASH_KILL_GRACE_SECS must be at most 10, got %d", killGrace))
	}
	bodyIdle, err := envInt("AIO_BODY_IDLE_TIMEOUT_SECS", int(DefaultBodyIdle/time.Second))
	if err != nil {
		return err
	}
	maxTerms, err := envInt("AIO_SHELL_MAX_SESSIONS", 20)
	if err != nil {
		return err
	}
	termIdle, err := envInt("AIO_SHELL_SESSION_TIMEOUT_SECS", 3600)
	if err != nil {
		return err
	}
	var lim [4]int
	for i, v := range []struct {
		name string
		def  int
	}{{"AIO_KERNEL_MAX_SESSIONS", 5}, {"AIO_CODE_MAX_SESSIONS", 20}, {"AIO_KERNEL_SESSION_TIMEOUT_SECS", 300}, {"AIO_CODE_SESSION_TIMEOUT_SECS", 1800}} {
		if lim[i], err = envInt(v.name, v.def); err != nil {
			return err
		}
	}
	d, err := New(Config{MaxTerminals: maxTerms, TerminalIdle: time.Duration(termIdle) * time.Second,
		MaxKernels: lim[0], MaxCodeSessions: lim[1], KernelIdle: time.Duration(lim[2]) * time.Second, CodeIdle: time.Duration(lim[3]) * time.Second, Workspace: *workspace, APIKey: *apiKey, Logger: log,
		DefaultUser: os.Getenv("AIO_DEFAULT_USER"), MaxCommandSessions: maxSessions,
		CommandSessionIdle: time.Duration(idleSecs) * time.Second, CommandKillGrace: time.Duration(killGrace) * time.Second,
		BodyIdle:  time.Duration(bodyIdle) * time.Second,
		PythonBin: os.Getenv("AIO_PYTHON_BIN"), NodeBin: os.Getenv("AIO_NODE_BIN")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	log.Log(ctx, max(slog.LevelInfo, level), "aiod listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"version", Version, "auth", *apiKey != "")
	hs := newServer(d.Handler())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.Shutdown(sctx)
	_ = hs.Shutdown(sctx)
	log.Info("stopped")
	return nil
}
