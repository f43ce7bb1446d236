package mcphost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TypeMemory is the [Spec.Type] of a server that runs in this process and
// is reached through [Spec.Connect] (for example an in-memory transport
// pair of the MCP SDK). It is not a configuration-file type.
const TypeMemory = "memory"

// Spec says how to reach one MCP server. Placeholders are already
// substituted.
type Spec struct {
	BundleID string
	Type     string // "stdio", "sse", "streamable" or [TypeMemory]

	Command string
	Args    []string
	Env     map[string]string
	Cwd     string

	URL     string
	Headers map[string]string

	// Secrets are values to mask ("***") in every error the Upstream
	// reports or logs for a session of this Spec: the inputs' values a
	// rendering put in its command, arguments, URL or headers, which a
	// failed exec or connect would otherwise repeat.
	Secrets []string

	// Connect, for [TypeMemory], returns the client end of a fresh
	// transport to the server, once per session: after a session ends the
	// Upstream calls it again (with backoff), as it restarts a stdio
	// server. ctx lives as long as that session; the server side may stop
	// serving when it ends.
	Connect func(ctx context.Context) (mcp.Transport, error)
}

// Options tune an [Upstream].
type Options struct {
	// OnChange is called (on its own goroutine, never concurrently for one
	// Upstream) when the tool list or the connection state changes.
	OnChange func()
	// OnResources, if set, is called (on its own goroutine) when the
	// server reports that its resource list or one resource changed.
	OnResources func(ResourceChange)
	// MinBackoff and MaxBackoff bound the restart delay. Defaults 200ms
	// and 30s.
	MinBackoff, MaxBackoff time.Duration
	// ConnectTimeout bounds one connect and initialize. Default 30s.
	ConnectTimeout time.Duration
	// Prepare, if set, is called before every connection attempt (the
	// first, and each restart after a session ended or an attempt failed)
	// and returns the Spec that attempt uses in place of the one given to
	// Start; its BundleID and Type are kept from Start's. It lets the
	// caller resolve a server's inputs afresh for each real start, so that
	// a restarted stdio server is run with current values, never a cached
	// rendering. A Prepare error fails the attempt: the Upstream goes to
	// Backoff with that error (State reports it, so it must hold no secret)
	// and tries again after the backoff. A session that is running is never
	// touched: new values take effect at its next start.
	Prepare func(ctx context.Context) (Spec, error)
	// Supervisor is the path of a binary that runs [Supervise] when its
	// first argument is [SupervisorArg] (the a2c binary itself). On Linux
	// every stdio server then runs under such a supervisor, so that its
	// whole process tree ends with the Computer, even after a SIGKILL.
	// Empty means no supervisor: see the process-tree notes in proc.go.
	Supervisor string
	Logger     *slog.Logger
}

// ResourceChange says what changed: the list (URI empty) or one resource.
type ResourceChange struct {
	BundleID string
	URI      string
}

// State is an Upstream's connection state.
type State string

// Upstream states.
const (
	Connecting State = "connecting"
	Ready      State = "ready"
	Backoff    State = "backoff"
	Closed     State = "closed"
)

// ErrNotReady is returned by calls on an Upstream that is not connected.
var ErrNotReady = errors.New("mcphost: upstream not connected")

// Upstream is one supervised MCP server.
type Upstream struct {
	bundleID string
	opts     Options
	stop     context.CancelFunc
	done     chan struct{}

	mu       sync.Mutex
	spec     Spec // of the current (or last) attempt
	state    State
	session  *mcp.ClientSession
	subs     map[string]bool // resources subscribed to on session
	tools    []*mcp.Tool
	caps     *mcp.ServerCapabilities
	lastErr  error
	secrets  []string // the current session's Spec.Secrets
	restarts int

	changes chan struct{}
}

// Start supervises the server described by spec until Close.
func Start(spec Spec, o Options) *Upstream {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &Upstream{bundleID: spec.BundleID, spec: spec, opts: o, stop: cancel, done: make(chan struct{}), state: Connecting, changes: make(chan struct{}, 1)}
	go u.notifier(ctx)
	go u.supervise(ctx)
	return u
}

// Spec returns what the Upstream connects to: the Spec of its current (or
// last) connection attempt, which [Options.Prepare] may have replaced.
func (u *Upstream) Spec() Spec {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.spec
}

// State reports the connection state and the last connection error.
func (u *Upstream) State() (State, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state, u.lastErr
}

// Tools returns the tool list of the current (or, while reconnecting, the
// last) session; nil before the first session and after Close.
func (u *Upstream) Tools() []*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

// Capabilities returns what the server declared at initialization, or nil.
func (u *Upstream) Capabilities() *mcp.ServerCapabilities {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.caps
}

func (u *Upstream) current() (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == nil || u.state != Ready {
		return nil, ErrNotReady
	}
	return u.session, nil
}

// AuthError is an upstream authorisation failure seen at the HTTP layer
// while a call was in flight: the server answered 401 or 403.
type AuthError struct {
	Status int
	// Challenge reports a WWW-Authenticate header (the OAuth form of 401).
	Challenge bool
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("mcphost: upstream refused the call with HTTP %d", e.Status)
}

// Code is the A2C-SMCP code of the failure: 4007 for 403 (authorised, but
// not for this), 4006 for 401 or any other authorisation signal.
func (e *AuthError) Code() int {
	if e.Status == http.StatusForbidden && !e.Challenge {
		return 4007
	}
	return 4006
}

// authSink collects the authorisation signal of one call and ends the call
// at once, so that an SDK that would wait for a response that never comes
// does not hang.
type authSink struct {
	mu     sync.Mutex
	err    *AuthError
	cancel context.CancelCauseFunc
}

type authKey struct{}

var errAuth = errors.New("mcphost: authorisation failure")

func (a *authSink) set(e *AuthError) {
	a.mu.Lock()
	if a.err == nil {
		a.err = e
	}
	a.mu.Unlock()
	a.cancel(errAuth)
}

func (a *authSink) get() *AuthError {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// CallTool calls a tool by its original name. Cancelling ctx interrupts
// the call: the SDK sends notifications/cancelled upstream. An HTTP 401 or
// 403 from the server during the call ends it with an *[AuthError].
func (u *Upstream) CallTool(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	return u.CallToolMeta(ctx, name, args, nil)
}

// CallToolMeta is [Upstream.CallTool] with meta as the request's
// params._meta (nil or empty: none). The Computer puts W3C trace context
// there (traceparent, tracestate), as MCP clients that trace do.
func (u *Upstream) CallToolMeta(ctx context.Context, name string, args any, meta map[string]any) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		s, err := u.live(ctx)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithCancelCause(ctx)
		sink := &authSink{cancel: cancel}
		res, err := s.CallTool(context.WithValue(cctx, authKey{}, sink), &mcp.CallToolParams{Meta: meta, Name: name, Arguments: args})
		cancel(nil)
		if ae := sink.get(); ae != nil {
			return nil, ae
		}
		// A session found closed before the request left was not used:
		// the call is safe to send once more, on the next session.
		if attempt == 0 && errors.Is(err, mcp.ErrConnectionClosed) && ctx.Err() == nil {
			u.retire(s)
			continue
		}
		return res, err
	}
}

// retire marks s as no longer usable, so that callers wait for the next
// session instead of finding s again.
func (u *Upstream) retire(s *mcp.ClientSession) {
	u.mu.Lock()
	if u.session == s {
		u.session = nil
		u.state = Connecting
	}
	u.mu.Unlock()
}

// ListResources returns one page of resources/list.
func (u *Upstream) ListResources(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error) {
	s, err := u.live(ctx)
	if err != nil {
		return nil, err
	}
	return s.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
}

// Subscribe asks for notifications/resources/updated about uri, once per
// session, if the server supports subscriptions.
func (u *Upstream) Subscribe(ctx context.Context, uri string) error {
	u.mu.Lock()
	s, caps := u.session, u.caps
	if s == nil || caps == nil || caps.Resources == nil || !caps.Resources.Subscribe || u.subs[uri] {
		u.mu.Unlock()
		return nil
	}
	u.subs[uri] = true
	u.mu.Unlock()
	return s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
}

// ReadResource reads one resource.
func (u *Upstream) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	s, err := u.live(ctx)
	if err != nil {
		return nil, err
	}
	return s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
}

// Close stops supervising and ends the connection (and the process of a
// stdio server).
func (u *Upstream) Close() {
	u.stop()
	<-u.done
}

func (u *Upstream) changed() {
	select {
	case u.changes <- struct{}{}:
	default:
	}
}

// notifier delivers OnChange one at a time, coalescing bursts.
func (u *Upstream) notifier(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.changes:
			if u.opts.OnChange != nil {
				u.opts.OnChange()
			}
		}
	}
}

// setState records a state change. While the Upstream reconnects it keeps
// its last tool list, so that a restart does not make tools vanish (calls
// wait for the new session), and the last failure, so that State says
// why it is connecting again; only Ready clears the failure and only
// Close the tools.
func (u *Upstream) setState(st State, err error) {
	u.mu.Lock()
	if err == nil && st == Connecting {
		err = u.lastErr
	}
	u.state, u.lastErr = st, err
	if st != Ready {
		u.session, u.caps = nil, nil
	}
	if st == Closed {
		u.tools = nil
	}
	u.mu.Unlock()
	u.changed()
}

// ReadyWait is how long a call waits for a reconnecting Upstream before it
// fails with ErrNotReady (at most until its context ends).
const ReadyWait = 10 * time.Second

// live returns the live session, waiting up to ReadyWait (or until ctx
// ends) while the Upstream connects or restarts.
func (u *Upstream) live(ctx context.Context) (*mcp.ClientSession, error) {
	deadline := time.Now().Add(ReadyWait)
	for {
		s, err := u.current()
		if err == nil {
			return s, nil
		}
		if st, _ := u.State(); st == Closed || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// supervise connects, waits for the session to end, and reconnects with
// exponential backoff (reset after a session that lived a minute).
func (u *Upstream) supervise(ctx context.Context) {
	defer close(u.done)
	backoff := u.opts.MinBackoff
	for ctx.Err() == nil {
		u.setState(Connecting, nil)
		start := time.Now()
		err := maskSecrets(u.session1(ctx), u.lastSecrets())
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > time.Minute {
			backoff = u.opts.MinBackoff
		}
		u.mu.Lock()
		u.restarts++
		u.mu.Unlock()
		u.opts.Logger.Warn("mcp upstream down; restarting", "bundle_id", u.bundleID, "in", backoff.String(), "err", err)
		u.setState(Backoff, err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, u.opts.MaxBackoff)
	}
	u.setState(Closed, nil)
}

// prepare returns the Spec of the next connection attempt: Start's, or
// the one Options.Prepare returns.
func (u *Upstream) prepare(ctx context.Context) (Spec, error) {
	u.mu.Lock()
	spec := u.spec
	u.mu.Unlock()
	if u.opts.Prepare == nil {
		return spec, nil
	}
	next, err := u.opts.Prepare(ctx)
	if err != nil {
		return Spec{}, fmt.Errorf("prepare: %w", err)
	}
	next.BundleID, next.Type = spec.BundleID, spec.Type
	u.mu.Lock()
	u.spec = next
	u.mu.Unlock()
	return next, nil
}

// session1 runs one connection until it ends.
func (u *Upstream) session1(ctx context.Context) error {
	spec, err := u.prepare(ctx)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.secrets = spec.Secrets
	u.mu.Unlock()
	client := mcp.NewClient(&mcp.Implementation{Name: "a2c-computer", Version: "0.3.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { u.refreshAsync(ctx) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			u.resourceChange("")
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params != nil {
				u.resourceChange(r.Params.URI)
			}
		},
	})
	// The session context lives as long as the session: the SSE transport
	// keeps its event stream on it, and an in-process server serves on it.
	// A watchdog bounds the handshake.
	sctx, cancel := context.WithCancel(ctx)
	t, cleanup, err := u.transport(sctx, spec)
	if err != nil {
		cancel()
		return err
	}
	// Runs after the session's transport has closed (deferred first, so
	// last): whatever is left of a stdio server's process group goes.
	defer cleanup()
	defer cancel()
	watchdog := time.AfterFunc(u.opts.ConnectTimeout, cancel)
	s, err := client.Connect(sctx, t, nil)
	if !watchdog.Stop() && err == nil {
		err = errors.New("initialize timed out")
		s.Close()
	}
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	stopWatch := context.AfterFunc(ctx, func() { s.Close() })
	defer stopWatch()
	caps := &mcp.ServerCapabilities{}
	if ir := s.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	tools, err := listTools(ctx, s)
	if err != nil {
		s.Close()
		return fmt.Errorf("list tools: %w", err)
	}
	u.mu.Lock()
	u.session, u.tools, u.caps, u.state, u.lastErr = s, tools, caps, Ready, nil
	u.subs = map[string]bool{}
	u.mu.Unlock()
	u.changed()
	u.opts.Logger.Info("mcp upstream ready", "bundle_id", u.bundleID, "tools", len(tools))
	err = s.Wait()
	if err == nil {
		err = errors.New("session ended")
	}
	return err
}

func (u *Upstream) resourceChange(uri string) {
	if f := u.opts.OnResources; f != nil {
		go f(ResourceChange{BundleID: u.bundleID, URI: uri})
	}
}

func (u *Upstream) refreshAsync(ctx context.Context) {
	go func() {
		s, err := u.current()
		if err != nil {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		tools, err := listTools(lctx, s)
		if err != nil {
			u.opts.Logger.Warn("tools/list after list_changed failed", "bundle_id", u.bundleID, "err", err)
			return
		}
		u.mu.Lock()
		if u.session == s {
			u.tools = tools
		}
		u.mu.Unlock()
		u.changed()
	}()
}

// listTools reads every page of tools/list.
func listTools(ctx context.Context, s *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// transport is how one session reaches the server; cleanup, to be called
// once the session is over, ends what a stdio server left running. ctx is
// the session's context.
func (u *Upstream) transport(ctx context.Context, spec Spec) (t mcp.Transport, cleanup func(), err error) {
	switch spec.Type {
	case TypeMemory:
		if spec.Connect == nil {
			return nil, nil, errors.New("memory server without a Connect function")
		}
		t, err := spec.Connect(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("connect in-process server: %w", err)
		}
		return t, func() {}, nil
	case "stdio":
		cmd, cleanup, err := stdioCommand(spec, u.opts.Supervisor, &logWriter{log: u.opts.Logger, bundle: spec.BundleID})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: stdioTerminate}, cleanup, nil
	case "sse":
		return &mcp.SSEClientTransport{Endpoint: spec.URL, HTTPClient: httpClient(spec.Headers)}, func() {}, nil
	case "streamable":
		return &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: httpClient(spec.Headers), MaxRetries: -1}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown server type %q", spec.Type)
}

// httpClient sends headers with every request of an HTTP upstream.
func httpClient(headers map[string]string) *http.Client {
	return &http.Client{Transport: &headerTransport{base: http.DefaultTransport, headers: headers}}
}

// headerTransport adds the configured headers to every upstream request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		if sink, ok := r.Context().Value(authKey{}).(*authSink); ok {
			sink.set(&AuthError{Status: resp.StatusCode, Challenge: resp.Header.Get("WWW-Authenticate") != ""})
		}
	}
	return resp, err
}

// logWriter turns a stdio server's stderr into debug log lines.
type logWriter struct {
	log    *slog.Logger
	bundle string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Debug("mcp upstream stderr", "bundle_id", w.bundle, "text", string(p))
	return len(p), nil
}

// lastSecrets are the secrets of the session last prepared.
func (u *Upstream) lastSecrets() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.secrets
}

// maskSecrets returns err with each of secrets in its text replaced by
// "***" (err itself when none occurs). The masked error keeps no chain:
// what it wrapped held the secret too.
func maskSecrets(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	masked := msg
	for _, s := range secrets {
		if s != "" {
			masked = strings.ReplaceAll(masked, s, "***")
		}
	}
	if masked == msg {
		return err
	}
	return errors.New(masked)
}
