package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/pool"
	"github.com/a2c-smcp/a2c-go/server/console"
)

// upPool is a2c up's in-process sandbox pool: it gives every office but
// the default one a sandbox of its own, and serves the pool's routes
// (/v2/sandboxes, /sandboxes/{id}/..., the port hosts) on the sandbox
// API's address beside the default sandbox's own API.
type upPool struct {
	*pool.Pool
	root string
}

// upPoolPrefix names the temporary roots of a2c up's pools: one per
// process, removed at exit (the per-office sandboxes end with it).
const upPoolPrefix = "a2c-up-pool-"

// startUpPool starts the pool, or returns nil with a warning where the
// machine cannot give each office an isolated sandbox (not root, or no
// isolation): then only the default office has a sandbox.
func startUpPool(cfg pool.Config, isolated bool, log *slog.Logger) (*upPool, error) {
	if (cfg.Egress || cfg.Machine) && (!isolated || os.Geteuid() != 0) {
		return nil, errors.New("--egress and --machine: the sandbox pool needs isolation namespaces as root")
	}
	if !isolated || os.Geteuid() != 0 {
		log.Warn("offices other than the default one get no sandbox of their own: that needs isolation namespaces as root")
		return nil, nil
	}
	removeStaleUpPools()
	root, err := os.MkdirTemp("", upPoolPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox pool: %w", err)
	}
	cfg.Root = root
	p, err := pool.New(cfg)
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("sandbox pool: %w", err)
	}
	return &upPool{Pool: p, root: root}, nil
}

// Close ends every office's sandbox and removes the pool's root.
func (u *upPool) Close() error {
	if u == nil {
		return nil
	}
	err := u.Pool.Close()
	if rerr := os.RemoveAll(u.root); err == nil {
		err = rerr
	}
	return err
}

// handler is what the sandbox API's address serves: the pool's routes,
// and fallback (the default sandbox's API) for everything else.
func (u *upPool) handler(fallback http.Handler) http.Handler {
	if u == nil {
		return fallback
	}
	return u.Handler()
}

// removeStaleUpPools removes the roots of a2c up processes that died
// without removing their own (killed with SIGKILL).
func removeStaleUpPools() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), upPoolPrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), upPoolPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = os.RemoveAll(m)
	}
}

// upPoolConfig is the pool's configuration from a2c up's: the hub to
// join, the token, the sandbox API's address and Host rule, and the
// daemon settings of the environment.
func upPoolConfig(base aiod.Config, dial, token, listen string, hosts, origins []string, log *slog.Logger, fallback http.Handler) pool.Config {
	base.Browser, base.Desktop, base.PublicURL = false, false, ""
	return pool.Config{Warm: 1, Server: dial, Token: token, Listen: listen, AllowedHosts: hosts, AllowedOrigins: origins,
		Daemon: base, Logger: log.With("pool", "offices"), Fallback: fallback}
}

// localPool is the in-process pool as a sandboxPool (officeSandboxes'
// view of a pool, which the HTTP client is too).
type localPool struct{ p *pool.Pool }

func (l localPool) Create(ctx context.Context, req pool.CreateRequest) (pool.Sandbox, error) {
	return l.p.Create(ctx, req, "")
}

func (l localPool) List(_ context.Context, f pool.ListFilter) ([]pool.Sandbox, error) {
	return l.p.List(f, ""), nil
}

func (l localPool) Delete(ctx context.Context, id string, keep bool) error {
	return l.p.Delete(ctx, id, keep)
}

func (l localPool) Pause(_ context.Context, id string) (pool.Sandbox, error) {
	return l.p.Pause(id, "")
}

// upOffices gives a2c up's offices their sandboxes: the default office
// has a2c up's own sandbox Computer (never created or released here),
// every other office one from the in-process pool.
type upOffices struct {
	*officeSandboxes
	office, name string // the default office and its Computer's name
}

// Ensure implements server.Provisioner.
func (u *upOffices) Ensure(ctx context.Context, office string) (string, error) {
	if office == u.office {
		return u.name, nil
	}
	return u.officeSandboxes.Ensure(ctx, office)
}

// Release implements server.Provisioner.
func (u *upOffices) Release(office string) {
	if office != u.office {
		u.officeSandboxes.Release(office)
	}
}

// consolePool is the in-process pool as the console's Sandboxes page
// sees it.
type consolePool struct{ p *pool.Pool }

func (c consolePool) List(context.Context) ([]pool.Sandbox, error) {
	return c.p.List(pool.ListFilter{}, ""), nil
}

func (c consolePool) Metrics(_ context.Context, id string) (pool.Metrics, error) {
	return c.p.Metrics(id)
}

func (c consolePool) Pause(_ context.Context, id string) error {
	_, err := c.p.Pause(id, "")
	return err
}

func (c consolePool) Resume(_ context.Context, id string) error {
	_, err := c.p.Resume(id, nil, "")
	return err
}

func (c consolePool) Delete(ctx context.Context, id string) error { return c.p.Delete(ctx, id, false) }

// console is the pool for console.Config.Pool: nil (no page section)
// without one.
func (u *upPool) console() console.Pool {
	if u == nil {
		return nil
	}
	return consolePool{u.Pool}
}
