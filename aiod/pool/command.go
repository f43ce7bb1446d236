package pool

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/a2c-smcp/a2c-go/aiod"
	"github.com/a2c-smcp/a2c-go/aiod/internal/sandbox"
	"github.com/a2c-smcp/a2c-go/internal/origin"
	"github.com/a2c-smcp/a2c-go/internal/redact"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Command is "aiod pool", for aiod.AddCommand.
var Command = aiod.Command{Name: "pool", Namespaces: true,
	Summary: "run many sandboxes on demand: /v2/sandboxes, each one's API under /sandboxes/{id}/, ports proxied",
	Run:     run}

// EnvToken is the variable --token defaults to.
const EnvToken = "A2C_TOKEN"

// warmFlag is --warm: N (the base template's warm sandboxes), or NAME=N
// (a template's warm machines; repeatable).
type warmFlag struct{ cfg *Config }

func (w warmFlag) String() string {
	if w.cfg == nil {
		return ""
	}
	return strconv.Itoa(w.cfg.Warm)
}

func (w warmFlag) Set(v string) error {
	name, count, named := strings.Cut(v, "=")
	if !named {
		count = v
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return errors.New("want N or NAME=N, N a whole number from 0")
	}
	if !named {
		w.cfg.Warm = n
		return nil
	}
	if !templateName.MatchString(name) || name == BaseTemplate {
		return fmt.Errorf("template %q: a name is 1 to 64 of [a-z0-9_.-] (base is --warm N)", name)
	}
	if w.cfg.WarmTemplates == nil {
		w.cfg.WarmTemplates = map[string]int{}
	}
	w.cfg.WarmTemplates[name] = n
	return nil
}

// MachineUsage is --machine's help line (aiod pool, a2c up).
const MachineUsage = "offer whole machines (a create with \"machine\": true): root inside a user namespace of its own, a writable system (/usr, /etc, /opt, /var) on layers over the host's, snapshots and forks; --machine=all: every create is one unless it asks \"machine\": false (or network host); needs root, nsenter, and btrfs-progs for snapshots"

// MachineFlag is the value of --machine for cfg: bare or true sets
// Config.Machine, all sets MachineAll too, false neither.
func MachineFlag(cfg *Config) flag.Value { return machineFlag{cfg} }

type machineFlag struct{ cfg *Config }

func (m machineFlag) IsBoolFlag() bool { return true }

func (m machineFlag) String() string {
	switch {
	case m.cfg == nil || !m.cfg.Machine:
		return "false"
	case m.cfg.MachineAll:
		return "all"
	}
	return "true"
}

func (m machineFlag) Set(v string) error {
	if v == "all" {
		m.cfg.Machine, m.cfg.MachineAll = true, true
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true, false or all")
	}
	m.cfg.Machine, m.cfg.MachineAll = b, false
	return nil
}

// templates is --template NAME=DIR, repeatable.
type templates map[string]string

func (t templates) String() string { return "" }

func (t templates) Set(v string) error {
	name, dir, ok := strings.Cut(v, "=")
	if !ok || name == "" || dir == "" {
		return errors.New("must be NAME=DIR")
	}
	if _, dup := t[name]; dup {
		return fmt.Errorf("template %s given twice", name)
	}
	if err := checkTemplate(name, dir); err != nil {
		return err
	}
	t[name] = dir
	return nil
}

// options are aiod pool's parsed command line.
type options struct {
	cfg    Config
	listen string
	level  slog.Level
}

func flags() (*flag.FlagSet, *options, func(set map[string]bool) error) {
	o := &options{}
	fs := flag.NewFlagSet("aiod pool", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.listen, "listen", DefaultListen, "the pool's address, HOST:PORT (port 0 picks a free one)")
	token := fs.String("token", "", "the token every route, sandbox API and port URL asks for (default $"+EnvToken+")")
	fs.StringVar(&o.cfg.Server, "server", "", "the A2C hub (http://HOST:PORT) that sandboxes created with an office join")
	serverToken := fs.String("server-token", "", "the token presented to --server (default the pool's token)")
	fs.IntVar(&o.cfg.Max, "max", DefaultMax, "the most sandboxes in use at once; a create past it answers 429")
	o.cfg.Warm = DefaultWarm
	fs.Var(warmFlag{&o.cfg}, "warm", "N: sandboxes of the base template kept started and unclaimed, so a create takes one at once; NAME=N (repeatable, with --machine): whole machines of the template NAME, once it exists")
	fs.StringVar(&o.cfg.Root, "root", "", "where the sandboxes' workspaces live (default /var/lib/aiod/pool as root, else $XDG_STATE_HOME/aiod/pool)")
	tpl := templates{}
	fs.Var(tpl, "template", "NAME=DIR: a template whose workspaces start as a copy of DIR (repeatable)")
	memory := fs.String("memory", sandbox.FormatSize(DefaultMemory), "each sandbox's memory by default (KiB, MiB, GiB)")
	disk := fs.String("disk", "", "each workspace's disk space (MiB, GiB; at least 16MiB): a filesystem of its own, needs root and mkfs.ext4 (default: no bound, workspaces share --root's filesystem)")
	fs.IntVar(&o.cfg.Pids, "pids", DefaultPids, "each sandbox's processes and threads by default")
	fs.Float64Var(&o.cfg.CPUs, "cpus", DefaultCPUs, "each sandbox's CPU time by default, in CPUs")
	fs.IntVar(&o.cfg.UIDBase, "uid-base", 0, "the first of the 65536 host uids the sandboxes' accounts take (default: the first range from 1900000000 up that no other pool of this host holds)")
	fs.BoolVar(&o.cfg.AllowHostNetwork, "allow-host-network", false, "let a create ask for network host (the host's network stack)")
	fs.Var(MachineFlag(&o.cfg), "machine", MachineUsage)
	fs.BoolVar(&o.cfg.Egress, "egress", false, "let a create ask for network egress (a routed, filtered way out); needs root, iproute2 and nftables, and turns the host's IPv4 forwarding on")
	egressSubnet := fs.String("egress-subnet", DefaultEgressSubnet.String(), "with --egress: the IPv4 subnet the sandboxes' links are cut from (a /30 each); no address of the host may be in it")
	egressDNS := fs.String("egress-dns", "", "with --egress: the DNS servers (ADDR or ADDR:PORT, comma-separated) the sandboxes' resolvers ask (default the host's /etc/resolv.conf servers)")
	version := smcp.ProtocolVersion
	fs.StringVar(&version, "protocol-version", smcp.ProtocolVersion, "the A2C-SMCP version the sandboxes' Computers speak")
	origins := origin.AddFlags(fs, aiod.EnvAllowedHosts, aiod.EnvAllowedOrigins)
	level := fs.String("log-level", "info", "debug, info, warn or error")
	finish := func(set map[string]bool) error {
		o.cfg.Token = *token
		if !set["token"] {
			o.cfg.Token = os.Getenv(EnvToken)
		}
		o.cfg.ServerToken = *serverToken
		n, err := sandbox.ParseSize(*memory)
		if err == nil {
			err = sandbox.CheckMemory(n)
		}
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		o.cfg.Memory = n
		if *disk != "" {
			n, err := sandbox.ParseSize(*disk)
			if err == nil {
				err = checkDisk(n)
			}
			if err != nil {
				return fmt.Errorf("--disk: %w", err)
			}
			o.cfg.Disk = n
		}
		if err := sandbox.CheckPids(o.cfg.Pids); err != nil {
			return fmt.Errorf("--pids: %w", err)
		}
		if o.cfg.EgressSubnet, err = netip.ParsePrefix(*egressSubnet); err != nil || !o.cfg.EgressSubnet.Addr().Is4() {
			return fmt.Errorf("--egress-subnet: %q is not an IPv4 CIDR such as 10.233.0.0/16", *egressSubnet)
		}
		for a := range strings.SplitSeq(*egressDNS, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				addr, aerr := netip.ParseAddr(a)
				if aerr != nil {
					return fmt.Errorf("--egress-dns: %q is not ADDR or ADDR:PORT", a)
				}
				ap = netip.AddrPortFrom(addr, 53)
			}
			o.cfg.EgressDNS = append(o.cfg.EgressDNS, ap)
		}
		if !o.cfg.Egress && (set["egress-subnet"] || set["egress-dns"]) {
			return errors.New("--egress-subnet and --egress-dns apply with --egress")
		}
		if err := sandbox.CheckCPUs(o.cfg.CPUs); err != nil {
			return fmt.Errorf("--cpus: %w", err)
		}
		if o.cfg.Max < 1 || o.cfg.Max > uidRange/2 {
			return fmt.Errorf("--max must be from 1 to %d", uidRange/2)
		}
		total := o.cfg.Warm
		for _, n := range o.cfg.WarmTemplates {
			total += n
		}
		if len(o.cfg.WarmTemplates) > 0 && !o.cfg.Machine {
			return errors.New("--warm NAME=N keeps whole machines of a template: it needs --machine")
		}
		if o.cfg.Warm < 0 || total > o.cfg.Max {
			return fmt.Errorf("--warm must be from 0 to --max (%d)", o.cfg.Max)
		}
		if o.cfg.Server != "" {
			u, err := url.Parse(o.cfg.Server)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("--server must be an http or https URL, got %q", redact.URL(o.cfg.Server))
			}
		}
		prof, err := smcp.NewProfile(version)
		if err != nil {
			return fmt.Errorf("--protocol-version: %s", strings.TrimPrefix(err.Error(), "smcp: "))
		}
		o.cfg.ProtocolVersion = prof.Version
		if _, _, err := net.SplitHostPort(o.listen); err != nil {
			return fmt.Errorf("--listen must be HOST:PORT, got %q", o.listen)
		}
		if err := o.level.UnmarshalText([]byte(*level)); err != nil {
			return fmt.Errorf("--log-level must be debug, info, warn or error, got %q", *level)
		}
		hosts, origs, err := origins.Resolve(os.Getenv, aiod.EnvAllowedHosts, aiod.EnvAllowedOrigins)
		if err != nil {
			return err
		}
		o.cfg.AllowedHosts, o.cfg.AllowedOrigins = hosts, origs
		if len(tpl) > 0 {
			o.cfg.Templates = tpl
		}
		return nil
	}
	return fs, o, finish
}

// run is aiod pool: it serves the pool until ctx ends (SIGINT, SIGTERM),
// then ends every sandbox within ShutdownBound.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o, finish := flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "Usage: aiod pool [flags]")
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, "Runs many sandboxes on demand (see docs/pool.md): POST /v2/sandboxes creates one; its own aiod API is at /sandboxes/{id}/.")
			fmt.Fprintln(stdout)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return aiod.UsageError(err.Error())
	}
	if fs.NArg() > 0 {
		return aiod.UsageError("unexpected argument " + fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := finish(set); err != nil {
		return aiod.UsageError(err.Error())
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.level}))
	dcfg, err := aiod.ConfigFromEnv()
	if err != nil {
		return aiod.UsageError(err.Error())
	}
	o.cfg.Daemon = dcfg
	o.cfg.Logger = log
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.cfg.Registerer = reg
	o.cfg.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	o.cfg.Listen = ln.Addr().String()
	p, err := New(o.cfg)
	if err != nil {
		ln.Close()
		return err
	}
	log.Info("aiod pool listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(), "auth", o.cfg.Token != "",
		"max", o.cfg.Max, "warm", o.cfg.Warm, "root", p.root, "disk", sandbox.FormatSize(o.cfg.Disk), "server", redact.URL(o.cfg.Server))
	if o.cfg.Token == "" {
		log.Warn("no token: anyone who can reach the pool's address can create sandboxes and run commands in them; set --token or $" + EnvToken)
	}
	hs := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: aiod.ReadHeaderTimeout, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var result error
	select {
	case err := <-errc:
		result = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping: ending every sandbox", "sandboxes", len(p.List(ListFilter{}, "")))
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownBound)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err := p.Close(); err != nil {
		log.Warn("pool close", "err", err)
	}
	log.Info("stopped")
	return result
}
