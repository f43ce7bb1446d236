package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// defaultSandboxPool is the pool a2c sandbox talks to without --pool or
// $A2C_SANDBOX_POOL: aiod pool's default --listen.
const defaultSandboxPool = "http://127.0.0.1:18100"

const sandboxHelp = `Usage: a2c sandbox COMMAND [ARGS] [--pool URL] [--token T] [--json]

Sandboxes on demand, from a pool (aiod pool).

Commands:
  create   [--template NAME] [--office ID] [--name NAME] [--timeout S] [--on-timeout kill|pause]
           [--idle-timeout S] [--env K=V]... [--memory SIZE] [--pids N] [--cpus N]
           [--network none|host] [--metadata K=V]...
           start a sandbox; prints its id on stdout, a summary on stderr
  ls       [--state running|paused] [--office ID] [--metadata K=V]...
           list sandboxes
  get      ID                      show a sandbox
  rm       ID [--keep-workspace]   kill a sandbox and remove its workspace
  pause    ID                      freeze every process of a sandbox
  resume   ID [--timeout S]        thaw it (and set its deadline to now + S seconds)
  timeout  ID S                    set its deadline to now + S seconds (0: none)
  metrics  ID                      its CPU, memory, process and disk usage
  url      ID PORT [--path]        the URL of a server on PORT inside it (--path: the
                                   path form, for a pool on another machine)

Every command takes:
  --pool URL   the pool (default $A2C_SANDBOX_POOL, else ` + defaultSandboxPool + `)
  --token T    its credential (default $A2C_TOKEN)
  --json       print JSON for scripts

Run "a2c sandbox COMMAND -h" for the flags of a command.
`

// poolFlags are the flags every a2c sandbox command shares: the pool and
// how to print.
type poolFlags struct {
	pool, token string
	json        bool
}

func addPoolFlags(fs *flag.FlagSet) *poolFlags {
	f := &poolFlags{}
	fs.StringVar(&f.pool, "pool", "", "pool URL (default $A2C_SANDBOX_POOL, else "+defaultSandboxPool+")")
	fs.StringVar(&f.token, "token", "", "credential to present (default $A2C_TOKEN)")
	fs.BoolVar(&f.json, "json", false, "print JSON for scripts")
	return f
}

// client is the pool client of the flags: --pool, else
// $A2C_SANDBOX_POOL, else the default; --token, else $A2C_TOKEN. A pool
// URL that is not one is a usage error.
func (f *poolFlags) client() (*pool.Client, error) {
	base := f.pool
	if base == "" {
		base = os.Getenv("A2C_SANDBOX_POOL")
	}
	if base == "" {
		base = defaultSandboxPool
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Sprintf("the pool URL must be http://HOST:PORT, got %q", base)}
	}
	token := f.token
	if token == "" {
		token = os.Getenv("A2C_TOKEN")
	}
	return pool.NewClient(base, token), nil
}

// runSandbox is "a2c sandbox COMMAND ...": the pool's routes from a
// shell.
func runSandbox(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, sandboxHelp)
		return usageError{}
	}
	var err error
	switch args[0] {
	case "create":
		err = sandboxCreate(ctx, e, args[1:])
	case "ls":
		err = sandboxList(ctx, e, args[1:])
	case "get":
		err = sandboxGet(ctx, e, args[1:])
	case "rm":
		err = sandboxRemove(ctx, e, args[1:])
	case "pause", "resume", "timeout":
		err = sandboxState(ctx, e, args[0], args[1:])
	case "metrics":
		err = sandboxMetrics(ctx, e, args[1:])
	case "url":
		err = sandboxURL(e, args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, sandboxHelp)
		return nil
	default:
		return usageError{fmt.Sprintf("unknown command %q (create, ls, get, rm, pause, resume, timeout, metrics, url)", args[0])}
	}
	return sandboxError(err)
}

// sandboxError words a failure for the user: the pool's refusal with its
// status, and a hint when nothing listens at the pool's address.
func sandboxError(err error) error {
	var pe *pool.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe) && strings.HasPrefix(pe.Message, strconv.Itoa(pe.Status)):
		return errors.New("the pool answered " + pe.Message) // "502 Bad Gateway: ..."
	case errors.As(err, &pe):
		return fmt.Errorf("the pool answered %d: %s", pe.Status, pe.Message)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w (is aiod pool running there? see --pool, $A2C_SANDBOX_POOL)", err)
	}
	return err
}

// sandboxCommand parses the flags and the positional arguments of one
// command, which must be exactly names (ID, PORT: named in the usage
// error), none of them empty.
func sandboxCommand(e *env, fs *flag.FlagSet, args []string, names ...string) error {
	if err := e.parse(fs, args); err != nil {
		return err
	}
	cmd := strings.TrimPrefix(fs.Name(), "a2c sandbox ")
	switch {
	case fs.NArg() != len(names) && len(names) == 0:
		return usageError{fmt.Sprintf("%s takes no arguments, got %q", cmd, fs.Args())}
	case fs.NArg() != len(names):
		return usageError{fmt.Sprintf("%s wants %s, got %d arguments", cmd, strings.Join(names, " "), fs.NArg())}
	}
	for i, a := range fs.Args() {
		if a == "" {
			return usageError{fmt.Sprintf("%s: %s is empty", cmd, names[i])}
		}
	}
	return nil
}

func sandboxCreate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox create")
	f := addPoolFlags(fs)
	var req pool.CreateRequest
	var timeout optInt
	var memory sizeFlag
	env, metadata := kvFlag{}, kvFlag{}
	var lim pool.Limits
	fs.StringVar(&req.Template, "template", "", "template of its workspace (default base: empty)")
	fs.StringVar(&req.Office, "office", "", "A2C office it joins as a Computer, on the pool's hub")
	fs.StringVar(&req.Name, "name", "", "its Computer name in --office (default sandbox)")
	fs.Var(&timeout, "timeout", "lifetime in seconds, then --on-timeout (default the pool's, 300; 0: none)")
	fs.StringVar(&req.OnTimeout, "on-timeout", "", "at its deadline or idle timeout: kill (default) or pause")
	fs.IntVar(&req.IdleTimeoutS, "idle-timeout", 0, "seconds without an API request, tool call or terminal input before --on-timeout (0: never)")
	fs.Var(env, "env", "K=V added to the environment of its processes (repeatable)")
	fs.Var(&memory, "memory", "memory limit, such as 512MiB or 2GiB (default the pool's)")
	fs.IntVar(&lim.Pids, "pids", 0, "process limit (default the pool's)")
	fs.Float64Var(&lim.CPUs, "cpus", 0, "CPU limit, in CPUs (default the pool's)")
	fs.StringVar(&req.Network, "network", "", "none (default: its own loopback only), host, or egress (a routed, filtered way out)")
	fs.Var(optBool{&req.Machine}, "machine", "a whole machine (a pool started with --machine): root inside, a writable system on layers, snapshots and forks; --machine=false: a plain sandbox (default the pool's: plain, or a machine with --machine=all)")
	fs.StringVar(&req.FromSnapshot, "from-snapshot", "", "start from this snapshot of a whole machine (its files, packages and workspace)")
	var allow, deny listFlag
	fs.Var(&allow, "allow", "with --network egress: an IPv4 address or CIDR, a host name or *.NAME it may reach (repeatable; none: all but --deny)")
	fs.Var(&deny, "deny", "with --network egress: an IPv4 address or CIDR, a host name or *.NAME it may not reach (repeatable)")
	fs.Var(metadata, "metadata", "K=V kept with it, echoed back and matched by ls --metadata (repeatable)")
	if err := sandboxCommand(e, fs, args); err != nil {
		return err
	}
	if err := nonNegativeFlags(fs, "timeout", "idle-timeout", "pids", "cpus"); err != nil {
		return err
	}
	if timeout.set {
		req.TimeoutS = &timeout.n
	}
	if lim.Memory = pool.Size(memory); lim != (pool.Limits{}) {
		req.Limits = &lim
	}
	if len(env) > 0 {
		req.Env = env
	}
	if len(metadata) > 0 {
		req.Metadata = metadata
	}
	if allow != nil || deny != nil {
		req.Egress = &pool.Egress{Allow: allow, Deny: deny} // the pool writes a missing list as []
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	s, err := c.Create(ctx, req)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e, s)
	}
	// The id alone on stdout, for id=$(a2c sandbox create).
	fmt.Fprintln(e.stdout, s.ID)
	where := ""
	if s.Office != "" {
		where = fmt.Sprintf(", office %s as %s", s.Office, cell(s.Computer))
	}
	fmt.Fprintf(e.stderr, "sandbox %s %s: template %s%s, %s, api %s\n", s.ID, s.State, s.Template, where, expiry(s), s.APIURL)
	return nil
}

func sandboxList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox ls")
	f := addPoolFlags(fs)
	var lf pool.ListFilter
	metadata := kvFlag{}
	fs.StringVar(&lf.State, "state", "", "only sandboxes in this state: running or paused")
	fs.StringVar(&lf.Office, "office", "", "only sandboxes in this A2C office")
	fs.Var(metadata, "metadata", "only sandboxes with this K=V metadata (repeatable: all must match)")
	if err := sandboxCommand(e, fs, args); err != nil {
		return err
	}
	lf.Metadata = metadata
	c, err := f.client()
	if err != nil {
		return err
	}
	list, err := c.List(ctx, lf)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e, list)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTEMPLATE\tOFFICE\tCREATED\tEXPIRES")
	for _, s := range list {
		exp := "never"
		if s.ExpiresAt != nil {
			exp = stamp(*s.ExpiresAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.ID), cell(string(s.State)), cell(s.Template), cell(s.Office), stamp(s.CreatedAt), exp)
	}
	return tw.Flush()
}

func sandboxGet(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox get")
	f := addPoolFlags(fs)
	if err := sandboxCommand(e, fs, args, "ID"); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	s, err := c.Get(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e, s)
	}
	printSandbox(e.stdout, s)
	return nil
}

func sandboxRemove(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox rm")
	f := addPoolFlags(fs)
	keep := fs.Bool("keep-workspace", false, "keep its workspace folder on the pool's disk")
	if err := sandboxCommand(e, fs, args, "ID"); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	if err := c.Delete(ctx, id, *keep); err != nil {
		return err
	}
	if f.json {
		return printJSON(e, map[string]any{"id": id, "removed": true, "keep_workspace": *keep})
	}
	if *keep {
		fmt.Fprintf(e.stdout, "sandbox %s removed, its workspace kept\n", id)
	} else {
		fmt.Fprintf(e.stdout, "sandbox %s removed\n", id)
	}
	return nil
}

// sandboxState is pause ID, resume ID [--timeout S] and timeout ID S:
// each answers the sandbox, shown as its state and deadline.
func sandboxState(ctx context.Context, e *env, cmd string, args []string) error {
	fs := newFlags(e, "sandbox "+cmd)
	f := addPoolFlags(fs)
	var timeout optInt
	names := []string{"ID"}
	switch cmd {
	case "resume":
		fs.Var(&timeout, "timeout", "set its deadline to now + this many seconds (0: none; default: keep it)")
	case "timeout":
		names = append(names, "SECONDS")
	}
	if err := sandboxCommand(e, fs, args, names...); err != nil {
		return err
	}
	if cmd == "timeout" {
		if err := timeout.Set(fs.Arg(1)); err != nil {
			return usageError{fmt.Sprintf("SECONDS: %v", err)}
		}
	}
	if timeout.n < 0 {
		if cmd == "resume" {
			return nonNegativeFlags(fs, "timeout")
		}
		return usageError{fmt.Sprintf("SECONDS must be zero or more, got %d", timeout.n)}
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var s pool.Sandbox
	switch id := fs.Arg(0); cmd {
	case "pause":
		s, err = c.Pause(ctx, id)
	case "resume":
		var t *int
		if timeout.set {
			t = &timeout.n
		}
		s, err = c.Resume(ctx, id, t)
	default:
		s, err = c.SetTimeout(ctx, id, timeout.n)
	}
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e, s)
	}
	fmt.Fprintf(e.stdout, "sandbox %s %s, %s\n", s.ID, s.State, expiry(s))
	return nil
}

func sandboxMetrics(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox metrics")
	f := addPoolFlags(fs)
	if err := sandboxCommand(e, fs, args, "ID"); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	m, err := c.Metrics(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e, m)
	}
	fmt.Fprintf(e.stdout, "cpu_usage_ns: %d\nmemory_bytes: %d\nmemory_limit_bytes: %d\npids: %d\npids_limit: %d\ndisk_bytes: %d\nsince: %s\n",
		m.CPUUsageNs, m.MemoryBytes, m.MemoryLimitBytes, m.Pids, m.PidsLimit, m.DiskBytes, stamp(m.Since))
	return nil
}

// sandboxURL prints the URL of a port inside a sandbox; it asks the pool
// nothing, so a URL of a sandbox that does not exist is printed too.
func sandboxURL(e *env, args []string) error {
	fs := newFlags(e, "sandbox url")
	f := addPoolFlags(fs)
	path := fs.Bool("path", false, "the path form POOL/sandboxes/ID/ports/PORT/ (works from another machine), not the host form PORT-ID.localhost")
	if err := sandboxCommand(e, fs, args, "ID", "PORT"); err != nil {
		return err
	}
	port, err := strconv.Atoi(fs.Arg(1))
	if err != nil || port < 1 || port > 65535 {
		return usageError{fmt.Sprintf("PORT must be 1-65535, got %q", fs.Arg(1))}
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	u := c.PortURL(id, port)
	if *path {
		u = c.PortPathURL(id, port)
	}
	if u == "" {
		return usageError{fmt.Sprintf("sandbox id %q cannot be part of a host name; use --path", id)}
	}
	if f.json {
		return printJSON(e, map[string]string{"url": u})
	}
	fmt.Fprintln(e.stdout, u)
	return nil
}

// printSandbox writes s as "key: value" lines, in the order and with the
// names of its JSON; limits and metadata one line per field
// (limits.memory, metadata.KEY), absent values as "-".
func printSandbox(w io.Writer, s pool.Sandbox) {
	exp := "never"
	if s.ExpiresAt != nil {
		exp = stamp(*s.ExpiresAt)
	}
	mem := "-"
	if b, err := json.Marshal(s.Limits.Memory); err == nil && s.Limits.Memory > 0 {
		mem = strings.Trim(string(b), `"`) // the wire's own form: 1GiB
	}
	lines := [][2]string{
		{"id", s.ID}, {"state", string(s.State)}, {"template", s.Template},
		{"office", s.Office}, {"computer", s.Computer},
		{"created_at", stamp(s.CreatedAt)}, {"expires_at", exp},
		{"on_timeout", s.OnTimeout}, {"idle_timeout_s", strconv.Itoa(s.IdleTimeoutS)},
		{"limits.memory", mem}, {"limits.pids", strconv.Itoa(s.Limits.Pids)},
		{"limits.cpus", strconv.FormatFloat(s.Limits.CPUs, 'f', -1, 64)},
		{"network", s.Network},
	}
	if s.Machine {
		lines = append(lines, [2]string{"machine", "true"})
	}
	if s.Parent != nil {
		lines = append(lines, [2]string{"parent", *s.Parent}, [2]string{"ancestors", strings.Join(s.Ancestors, " ")})
	}
	if s.Egress != nil {
		lines = append(lines, [2]string{"egress.allow", strings.Join(s.Egress.Allow, " ")}, [2]string{"egress.deny", strings.Join(s.Egress.Deny, " ")})
	}
	keys := make([]string, 0, len(s.Metadata))
	for k := range s.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lines = append(lines, [2]string{"metadata." + cell(k), s.Metadata[k]})
	}
	lines = append(lines, [2]string{"api_url", s.APIURL}, [2]string{"mcp_url", s.MCPURL})
	for _, l := range lines {
		fmt.Fprintf(w, "%s: %s\n", l[0], cell(l[1]))
	}
}

// expiry says when s ends: "expires TIME" or "no deadline".
func expiry(s pool.Sandbox) string {
	if s.ExpiresAt == nil {
		return "no deadline"
	}
	return "expires " + stamp(*s.ExpiresAt)
}

// stamp writes t in UTC to the second (RFC 3339), "-" when zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cell is s as one table cell or value: "-" when empty, quoted when it
// holds spaces other than a plain space, or anything unprintable, so a
// value from the pool cannot break a line or a column.
func cell(s string) string {
	switch {
	case s == "":
		return "-"
	case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return strconv.Quote(s)
	}
	return s
}

// optInt is an integer flag that knows whether it was given.
type optInt struct {
	n   int
	set bool
}

func (o *optInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.n)
}

func (o *optInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a whole number")
	}
	o.n, o.set = n, true
	return nil
}

// Get makes optInt a flag.Getter, for nonNegativeFlags.
func (o *optInt) Get() any { return o.n }

// sizeFlag is a size in aiod's syntax ("512MiB", "2GiB", bytes), read as
// the pool's wire reads it.
type sizeFlag pool.Size

func (s *sizeFlag) String() string {
	if s == nil || *s == 0 {
		return ""
	}
	b, _ := json.Marshal(pool.Size(*s))
	return strings.Trim(string(b), `"`)
}

func (s *sizeFlag) Set(v string) error {
	var n pool.Size
	if err := json.Unmarshal([]byte(strconv.Quote(v)), &n); err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

// optBool is a boolean flag that may be left unset (nil): --NAME or
// --NAME=true, --NAME=false.
type optBool struct{ p **bool }

func (o optBool) IsBoolFlag() bool { return true }

func (o optBool) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.FormatBool(**o.p)
}

func (o optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*o.p = &v
	return nil
}

// listFlag is a repeatable flag whose values are kept in order.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// kvFlag is a repeatable K=V flag; a later K replaces an earlier one.
type kvFlag map[string]string

func (kv kvFlag) String() string {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + kv[k]
	}
	return strings.Join(keys, ",")
}

func (kv kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	kv[k] = v
	return nil
}
