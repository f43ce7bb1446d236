package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/pool"
	"github.com/a2c-smcp/a2c-go/server"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/server/console"
	"github.com/a2c-smcp/a2c-go/server/gateway"
	"github.com/a2c-smcp/a2c-go/tracing"
)

func runServer(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "server")
	listen := fs.String("listen", "127.0.0.1:8000", "address to listen on, HOST:PORT (port 0 picks a free one)")
	path := fs.String("path", "/socket.io/", "Engine.IO path")
	token := fs.String("token", "", "shared secret clients must present (default $A2C_TOKEN)")
	tokenFile := fs.String("token-file", "", "read the shared secret from this file")
	authField := fs.String("auth-field", "x-api-key", "name of the auth field or HTTP header that carries the token")
	version := addVersionFlag(fs)
	relayTimeout := fs.Duration("relay-timeout", 30*time.Second, "wait for a Computer's answer to client:get_* requests")
	maxPayload := fs.Int64("max-payload", 1<<20, "largest Socket.IO message accepted, in bytes (larger closes the connection)")
	maxRequest := fs.Int("max-request", 512<<10, "largest request payload accepted, in bytes (larger is answered with a 400)")
	drain := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long in-flight calls may take to finish")
	bodyIdle := fs.Duration("body-idle-timeout", 30*time.Second, "cut a request body that makes no progress for this long")
	wsMode := fs.String("websocket-mode", "loop", "how WebSockets are served: loop (one epoll event loop, Linux) or goroutine (a reader goroutine each)")
	redisURL := fs.String("redis", "", "join a cluster of servers through this Redis: redis://HOST:PORT[/DB], rediss://..., or several addresses, comma-separated, of a Redis Cluster (default $A2C_REDIS_URL)")
	nodeID := fs.String("node-id", "", "this server's name in the cluster: letters, digits, '-', '_', '.' (default $A2C_NODE_ID, else random)")
	clusterKey := fs.String("cluster-key", "", "with --redis, the key every node of the cluster shares (at least 16 bytes; 32 random ones are best): frames between nodes are sealed with it, and forged or replayed ones refused (default $A2C_CLUSTER_KEY)")
	clusterKeyFile := fs.String("cluster-key-file", "", "with --redis, read the cluster key from this file (a trailing newline is not part of it)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpu-profile", "", "write a Go CPU profile to this file until shutdown (for benchmarks)")
	withConsole := fs.Bool("console", false, "serve the web console at / (offices, tools, live calls, traces); it asks for the token when one is set")
	var boxes sandboxFlags
	fs.Var(&boxes, "sandbox", "with --console, offer the files, commands and python cells of the aiod daemon at URL as NAME (NAME=URL; repeatable)")
	boxTokenFile := fs.String("sandbox-token-file", "", "read the --sandbox daemons' API key from this file (default $AIO_API_KEY, else $SANDBOX_API_KEY)")
	poolURL := fs.String("sandbox-pool", "", "give each office its own sandbox from the aiod pool at this URL (http:// or https://), created when its first Agent joins")
	poolToken := fs.String("sandbox-pool-token", "", "the --sandbox-pool's token (default: this server's own, from --token, --token-file or $A2C_TOKEN)")
	officeIdle := fs.Duration("office-idle", 10*time.Minute, "with --sandbox-pool, release an office's sandbox after the office has had no Agent for this long")
	officeOnTimeout := fs.String("office-on-timeout", pool.OnTimeoutKill, "with --sandbox-pool, what releasing an office's sandbox does: kill or pause")
	allowed := addOriginFlags(fs)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	if err := positiveFlags(fs, "relay-timeout", "max-payload", "max-request", "body-idle-timeout", "office-idle"); err != nil {
		return err
	}
	if err := nonNegativeFlags(fs, "shutdown-timeout"); err != nil {
		return err
	}
	if *wsMode != "loop" && *wsMode != "goroutine" {
		return usageError{"bad --websocket-mode " + *wsMode + " (loop or goroutine)"}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{"bad --log-level " + *logLevel}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	origins, err := originPolicy(allowed, *listen)
	if err != nil {
		return err
	}

	secret := *token
	if *tokenFile != "" {
		if secret != "" {
			return errSecretBoth("token")
		}
		if secret, err = readSecretFile(*tokenFile, "token"); err != nil {
			return err
		}
	}
	if secret == "" {
		secret = os.Getenv("A2C_TOKEN")
	}
	if *redisURL == "" {
		*redisURL = os.Getenv("A2C_REDIS_URL")
	}
	if *nodeID == "" {
		*nodeID = os.Getenv("A2C_NODE_ID")
	}
	if *nodeID != "" && *redisURL == "" {
		return usageError{"--node-id needs --redis"}
	}
	key, err := readClusterKey(*clusterKey, *clusterKeyFile)
	if err != nil {
		return err
	}
	if key != nil && *redisURL == "" {
		return usageError{"--cluster-key, --cluster-key-file and $A2C_CLUSTER_KEY need --redis"}
	}
	if len(boxes) > 0 && !*withConsole {
		return usageError{"--sandbox needs --console"}
	}
	if err := checkSandboxPool(fs, *poolURL, *officeOnTimeout); err != nil {
		return err
	}
	boxToken := os.Getenv("AIO_API_KEY")
	if boxToken == "" {
		boxToken = os.Getenv("SANDBOX_API_KEY")
	}
	if *boxTokenFile != "" {
		if boxToken, err = readSecretFile(*boxTokenFile, "sandbox token"); err != nil {
			return err
		}
	}
	for i := range boxes {
		boxes[i].Token = boxToken
	}
	var rec *tracing.Recorder
	if *withConsole {
		rec = tracing.NewRecorder(0, 0)
	}
	tr, stopTracing, err := startTracing(ctx, "a2c-server", true, rec, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg := server.Config{
		TracerProvider:   tr.Provider,
		Recorder:         rec,
		Calls:            *withConsole,
		Version:          *version,
		Path:             *path,
		RelayTimeout:     *relayTimeout,
		MaxPayload:       *maxPayload,
		MaxRequest:       *maxRequest,
		GoroutinePerConn: *wsMode == "goroutine",
		BodyIdleTimeout:  *bodyIdle,
		Cluster:          cluster.Config{URL: *redisURL, NodeID: *nodeID, Key: key},
		Logger:           log,
		Origins:          origins,
	}
	if secret != "" {
		cfg.Auth = server.TokenAuth(secret, *authField)
	}
	var poolClient *pool.Client // --sandbox-pool's, for the offices and the console
	if *poolURL != "" {
		if *poolToken == "" {
			*poolToken = secret
		}
		poolClient = pool.NewClient(*poolURL, *poolToken)
		boxes := newOfficeSandboxes(poolClient, *officeOnTimeout, log)
		// Deferred before the server's Shutdown runs (below), so it runs
		// after it: the server makes no more calls by then.
		defer boxes.Close()
		cfg.Provisioner = boxes
		cfg.OfficeIdle = *officeIdle
	}
	srv, err := server.New(cfg)
	if errors.Is(err, cluster.ErrNodeIDInUse) {
		return err // another process is that node: not a usage error
	}
	if errors.Is(err, cluster.ErrUnavailable) {
		// Redis did not answer: not a usage error. The address is named
		// without the URL's credentials.
		where := "Redis"
		if o, _, perr := cluster.ParseURL(*redisURL); perr == nil {
			where += " at " + strings.Join(o.Addrs, ",")
		}
		return fmt.Errorf("%s did not answer: %w", where, err)
	}
	if err != nil { // a Config that cannot be (server.Config's own check)
		return usageError{strings.TrimPrefix(err.Error(), "server: ")}
	}
	gw, err := gateway.New(gateway.Config{Hub: srv, Logger: log, Version: aiod.Version})
	if err != nil {
		return err
	}
	srv.HandleMCP(gw)
	var con *console.Console
	if *withConsole {
		ccfg := console.Config{Server: srv, Token: secret, Logger: log, Sandboxes: boxes}
		if poolClient != nil {
			ccfg.Pool = clientConsolePool{poolClient}
		}
		con, err = console.New(ccfg)
		if err != nil {
			return usageError{err.Error()}
		}
		defer con.Close()
	}
	stopProfile, err := cpuProfileTo(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	cfg = srv.Config()
	// The first line says where the server listens, whatever the level.
	log.Log(ctx, max(slog.LevelInfo, level), "a2c server listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"path", cfg.Path, "protocol", cfg.Version, "auth", secret != "", "node", srv.NodeID())
	if key == nil && *redisURL != "" {
		log.Warn("cluster without a key: frames between nodes are not authenticated, so whoever may PUBLISH on this Redis can make a node relay a request of their choosing; set --cluster-key-file or $A2C_CLUSTER_KEY on every node",
			"node", srv.NodeID())
	}
	if *withConsole {
		log.Log(ctx, max(slog.LevelInfo, level), "a2c console serving", "console", "http://"+localURL(ln.Addr().String())+"/", "sandboxes", len(boxes))
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	if con != nil {
		// The console's live streams and proxied requests end as the
		// HTTP server's shutdown starts, not at its timeout.
		hs.RegisterOnShutdown(con.Close)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", drain.String())
	gw.Close() // its calls are cancelled on their Computers before the drain

	sctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("in-flight calls did not finish in time", "err", err)
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	if err := hs.Shutdown(hctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	log.Info("stopped")
	return nil
}

// cpuProfileTo starts a Go CPU profile written to path until the
// returned stop is called; an empty path profiles nothing. For the
// benchmarks of "a2c server" and "a2c up".
func cpuProfileTo(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// readClusterKey is the cluster key: --cluster-key, else the file of
// --cluster-key-file (less a trailing newline), else $A2C_CLUSTER_KEY;
// nil if none is given. The key is never logged.
func readClusterKey(flagKey, file string) ([]byte, error) {
	// Surrounding white space is no part of a key, wherever it comes
	// from: the same key in a file (with its newline) and in the
	// environment must seal alike.
	switch {
	case flagKey != "" && file != "":
		return nil, errSecretBoth("cluster-key")
	case flagKey != "":
		if k := strings.TrimSpace(flagKey); k != "" {
			return []byte(k), nil
		}
		return nil, errors.New("--cluster-key is blank")
	case file != "":
		k, err := readSecretFile(file, "cluster key")
		return []byte(k), err
	case os.Getenv("A2C_CLUSTER_KEY") != "":
		if k := strings.TrimSpace(os.Getenv("A2C_CLUSTER_KEY")); k != "" {
			return []byte(k), nil
		}
		return nil, errors.New("$A2C_CLUSTER_KEY is blank")
	}
	return nil, nil
}

// sandboxFlags is --sandbox NAME=URL, repeatable: the aiod daemons the
// console offers.
type sandboxFlags []console.Sandbox

func (f *sandboxFlags) String() string {
	var parts []string
	for _, b := range *f {
		parts = append(parts, b.Name+"="+b.URL)
	}
	return strings.Join(parts, ",")
}

func (f *sandboxFlags) Set(v string) error {
	name, u, ok := strings.Cut(v, "=")
	if !ok || name == "" || u == "" {
		return errors.New("want NAME=URL")
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return errors.New("the URL must be http:// or https://")
	}
	for _, b := range *f {
		if b.Name == name {
			return errors.New("sandbox " + name + " given twice")
		}
	}
	*f = append(*f, console.Sandbox{Name: name, URL: u})
	return nil
}

// checkSandboxPool refuses, as usage errors, a --sandbox-pool that is not
// an http or https URL with a host, an --office-on-timeout other than
// kill or pause, and the office flags given without --sandbox-pool.
func checkSandboxPool(fs *flag.FlagSet, poolURL, onTimeout string) error {
	if poolURL == "" {
		var stray string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "sandbox-pool-token", "office-idle", "office-on-timeout":
				stray = f.Name
			}
		})
		if stray != "" {
			return usageError{"--" + stray + " needs --sandbox-pool"}
		}
		return nil
	}
	u, err := url.Parse(poolURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return usageError{"bad --sandbox-pool " + poolURL + " (want http://HOST:PORT or https://...)"}
	}
	if onTimeout != pool.OnTimeoutKill && onTimeout != pool.OnTimeoutPause {
		return usageError{"bad --office-on-timeout " + onTimeout + " (kill or pause)"}
	}
	return nil
}
