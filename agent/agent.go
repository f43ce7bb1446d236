package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// Options configure [Dial].
type Options struct {
	// Name is the Agent's name in its office; it is also sent as the agent
	// field of every request.
	Name string
	// Path is the server's Engine.IO path. Default "/socket.io/".
	Path string
	// Auth is the connect auth object, for example {"token": "..."}: which
	// field the server reads is the deployment's choice. It should not
	// repeat the role, office or name. AuthFunc, when set, replaces it.
	Auth map[string]any
	// AuthFunc, if set, is called before every connection attempt (Dial's
	// and each reconnect's) and its result is the connect auth object, so
	// that a rotated token is the one presented after a reconnect. ctx
	// ends with the attempt. An error fails that attempt: Dial returns it;
	// a reconnect reports it to OnReconnectError and tries again later.
	AuthFunc func(ctx context.Context) (map[string]any, error)
	// Header is sent with every HTTP request, for servers that read
	// credentials from a header.
	Header http.Header
	// WebSocketOnly skips the long-polling handshake. The default, polling
	// first and then upgrading, is what the specification asks of SDKs.
	WebSocketOnly bool
	// RequestTimeout bounds client:get_* and server:* requests. Default 30s.
	RequestTimeout time.Duration
	// CallSlack is how much longer than a tool call's own timeout the
	// Agent waits for its answer before it gives up, cancels the call and
	// returns a result marked a2c_timeout. Default [CallSlack].
	CallSlack time.Duration
	// Reconnect says what the Client does when its connection is lost.
	// The zero value reconnects (see [ReconnectOptions]).
	Reconnect ReconnectOptions
	// OnNotify, if set, receives every notify:* event, one at a time in the
	// order the server sent them. It must not block. Notifications resume
	// on their own after a reconnect.
	OnNotify func(Notification)
	// OnDisconnect, if set, is called each time a connection ends: after a
	// loss, with the transport's reason ("transport close", "io server
	// disconnect", "transport error", ...) before the Client reconnects,
	// and once more with "io client disconnect" when Close ends a live
	// connection.
	OnDisconnect func(reason string)
	// OnReconnect, if set, is called each time the Client is connected
	// again and, if it had joined an office, has joined it again. Requests
	// that waited for the reconnect may already be on their way.
	OnReconnect func()
	// OnReconnectError, if set, receives the error of each failed
	// reconnect attempt: a *[JoinError] or *[smcp.Error] for a refused
	// rejoin (for example the office's Agent seat still held by the old
	// session), a *[ConnectError] or *[ProtocolVersionError] for a refused
	// connection, or a network error. After a permanent refusal, or the
	// last of MaxAttempts, the Client ends: Done closes and Err returns a
	// *[ReconnectError] wrapping the same error.
	OnReconnectError func(err error)
	Logger           *slog.Logger
	// TracerProvider, if set, traces each tool call as the root span of
	// the call's trace (a2c.agent.tool_call; see package tracing). For the
	// hub's and the Computer's spans to join it, the provider must use
	// tracing.IDGenerator. Nil, the default, traces nothing.
	TracerProvider trace.TracerProvider
	// ProtocolVersion is the A2C-SMCP version the Agent speaks, one of
	// [smcp.SupportedVersions]. Default [smcp.ProtocolVersion].
	ProtocolVersion string
}

// ReconnectOptions configure what a [Client] does after it loses its
// connection (the server restarted or shut it, the network cut it, or
// pings stopped). Unless Disabled, it connects again with bounded
// exponential backoff and joins the office it had joined, under the same
// name, before it sends anything else. The n-th attempt after a loss
// waits a delay drawn uniformly from [d/2, d], where d = MinDelay·2^(n-1)
// capped at MaxDelay.
//
// A refused connection for a protocol version mismatch (4008 or 4900) or
// for authentication (a CONNECT refusal, or a handshake refused with 400,
// 401 or 403) is permanent and ends the Client at once; every other
// failure, including a refused rejoin, is retried.
type ReconnectOptions struct {
	// Disabled turns reconnecting off: the first loss of the connection
	// ends the Client.
	Disabled bool
	// MinDelay is the backoff of the first attempt. Default 500ms.
	MinDelay time.Duration
	// MaxDelay caps the backoff. Default 30s.
	MaxDelay time.Duration
	// MaxAttempts ends the Client after that many failed attempts in a
	// row; 0 means no limit.
	MaxAttempts int
	// AttemptTimeout bounds one attempt: connecting and rejoining.
	// Default 15s.
	AttemptTimeout time.Duration
}

// Reconnect defaults; see [ReconnectOptions].
const (
	DefaultReconnectMinDelay       = 500 * time.Millisecond
	DefaultReconnectMaxDelay       = 30 * time.Second
	DefaultReconnectAttemptTimeout = 15 * time.Second
)

// delay is the backoff before the n-th attempt (n ≥ 1), with jitter.
func (r ReconnectOptions) delay(n int) time.Duration {
	d := r.MinDelay
	for i := 1; i < n && d < r.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, r.MaxDelay)
	half := d / 2
	return half + mrand.N(d-half+1)
}

// Notification is a notify:* event. Fields that its event does not carry
// are empty.
type Notification struct {
	Event    string `json:"-"`
	OfficeID string `json:"office_id,omitempty"`
	Computer string `json:"computer,omitempty"`
	Agent    string `json:"agent,omitempty"`
	ReqID    string `json:"req_id,omitempty"`
	// Raw is the payload as received.
	Raw json.RawMessage `json:"-"`
}

// Client is a connected Agent. Its methods may be called from any
// goroutine.
//
// A Client outlives its connections: when one is lost it reconnects and
// rejoins its office by itself (see [ReconnectOptions]). Requests in
// flight when the connection is lost end at once with an error matching
// [ErrConnectionLost]; requests made while it reconnects wait for the
// rejoin, up to their own timeout or context. The Client ends only on
// [Client.Close], when reconnecting is off and the connection is lost, or
// when it gives up reconnecting; then [Client.Done] closes and
// [Client.Err] says why.
type Client struct {
	opts    Options
	profile smcp.Profile
	url     string

	ctx      context.Context // ends when the Client ends
	stop     context.CancelFunc
	lost     chan string   // the published connection was lost (reason)
	closing  chan struct{} // closed by Close
	done     chan struct{} // closed when the Client ends
	loopDone chan struct{} // closed when run returns
	// inCallback counts lifecycle callbacks running on run's goroutine,
	// so that Close called from one does not wait for itself.
	inCallback atomic.Int32

	doneOnce  sync.Once
	closeOnce sync.Once

	mu     sync.Mutex
	sock   *sio.Socket   // the live (and rejoined) connection; nil while reconnecting
	ready  chan struct{} // closed once sock is set
	office string
	reason string
	err    error // why the Client ended; nil while it lives
}

// ProtocolVersionError is a connection refused because the client's and
// the server's protocol versions are incompatible (code 4008, from the
// HTTP 400 body), or a WebSocket closed with 4900 whose reason could not
// be read (code 4900, version fields empty). It is never retried.
type ProtocolVersionError struct {
	Code          int
	Message       string
	ClientVersion string
	ServerVersion string
	MinSupported  string
	MaxSupported  string
}

func (e *ProtocolVersionError) Error() string {
	if e.Code == smcp.CloseVersionMismatch {
		return "a2c: protocol version rejected (WebSocket close 4900)"
	}
	return fmt.Sprintf("a2c: protocol version mismatch: client %s, server %s (supports %s to %s)",
		e.ClientVersion, e.ServerVersion, e.MinSupported, e.MaxSupported)
}

// ConnectError is a connection the server refused after the version check,
// normally for authentication.
type ConnectError struct {
	Message string
	// Data is the server's refusal data, raw.
	Data json.RawMessage
}

func (e *ConnectError) Error() string { return "a2c: connection refused: " + e.Message }

// transient reports a refusal that is not about the client's credentials:
// one whose data carries a 5xx code, as this project's server sends
// (503) while it drains.
func (e *ConnectError) transient() bool {
	var d struct {
		Code int `json:"code"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Code >= 500
}

var (
	// ErrClosed is returned by requests on a Client that Close has closed,
	// and by requests in flight when Close was called.
	ErrClosed = errors.New("a2c: connection closed")
	// ErrConnectionLost is matched (with errors.Is) by the error of a
	// request whose connection was lost while it was in flight, of a
	// request that waited for a reconnect longer than its timeout or
	// context allowed, and by [Client.Err] once a Client has ended for a
	// lost connection (reconnecting off, or given up).
	ErrConnectionLost = errors.New("a2c: connection lost")
)

// ReconnectError is why a Client gave up reconnecting: the last attempt's
// error, which was permanent or the last of MaxAttempts. It matches
// [ErrConnectionLost] and unwraps to that error.
type ReconnectError struct {
	Attempts int
	Err      error
}

func (e *ReconnectError) Error() string {
	return fmt.Sprintf("a2c: connection lost; reconnect failed after %d attempt(s): %v", e.Attempts, e.Err)
}

// Unwrap returns [ErrConnectionLost] and the last attempt's error.
func (e *ReconnectError) Unwrap() []error { return []error{ErrConnectionLost, e.Err} }

// JoinError is a join or leave the server refused, with its reason.
type JoinError struct{ Message string }

func (e *JoinError) Error() string { return "a2c: " + e.Message }

// Dial connects to the server at serverURL (http or https) as an Agent.
// The protocol version is [smcp.ProtocolVersion], added to the URL by the
// SDK. A version refusal is a *[ProtocolVersionError], a refused
// handshake with a flat body a *[smcp.Error], an authentication refusal a
// *[ConnectError]; none is retried: Dial makes one attempt, bounded by
// ctx. Reconnecting (see [ReconnectOptions]) starts only after Dial has
// succeeded.
func Dial(ctx context.Context, serverURL string, o Options) (*Client, error) {
	if o.Name == "" {
		return nil, errors.New("a2c: agent name is required")
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.CallSlack <= 0 {
		o.CallSlack = CallSlack
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = smcp.ProtocolVersion
	}
	r := &o.Reconnect
	if r.MinDelay <= 0 {
		r.MinDelay = DefaultReconnectMinDelay
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = DefaultReconnectMaxDelay
	}
	r.MaxDelay = max(r.MaxDelay, r.MinDelay)
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = DefaultReconnectAttemptTimeout
	}
	profile, err := smcp.NewProfile(o.ProtocolVersion)
	if err != nil {
		return nil, fmt.Errorf("a2c: %w", err)
	}
	o.ProtocolVersion = profile.Version
	c := &Client{opts: o, profile: profile, url: serverURL,
		lost: make(chan string, 1), closing: make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{})}
	sock, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.ready = make(chan struct{})
	if !c.publish(sock) {
		c.stop()
		return nil, fmt.Errorf("a2c: connect: %w", ErrConnectionLost)
	}
	go c.run()
	return c, nil
}

// connect makes one connection attempt: the auth object of this attempt,
// the handshake, and the typed errors of Dial.
func (c *Client) connect(ctx context.Context) (*sio.Socket, error) {
	o := c.opts
	so := sio.ClientOptions{
		Path:      o.Path,
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {o.ProtocolVersion}},
		Header:    o.Header,
		Handler:   (*clientHandler)(c),
	}
	auth := o.Auth
	if o.AuthFunc != nil {
		a, err := callAuth(ctx, o.AuthFunc)
		if err != nil {
			return nil, err
		}
		auth = a
	}
	if auth != nil {
		so.Auth = auth
	}
	if o.WebSocketOnly {
		so.Transport = sio.WebSocketOnly
	}
	sock, err := sio.Dial(ctx, c.url, so)
	var ce *sio.CloseError
	if errors.As(err, &ce) && ce.Code == smcp.CloseVersionMismatch {
		// Read the reason once over polling; never loop.
		so.Transport = sio.PollingOnly
		_, err2 := sio.Dial(ctx, c.url, so)
		if perr := handshakeError(err2); perr != nil {
			var pve *ProtocolVersionError
			if errors.As(perr, &pve) {
				return nil, perr
			}
		}
		return nil, &ProtocolVersionError{Code: smcp.CloseVersionMismatch, Message: ce.Text, ClientVersion: o.ProtocolVersion}
	}
	if err != nil {
		if herr := handshakeError(err); herr != nil {
			return nil, herr
		}
		return nil, fmt.Errorf("a2c: connect: %w", err)
	}
	return sock, nil
}

// handshakeError maps a refused handshake to the typed errors of Dial.
func handshakeError(err error) error {
	var he *sio.HTTPError
	if errors.As(err, &he) {
		if e, ok := smcp.DecodeError(he.Body); ok {
			if e.Code == smcp.CodeVersionMismatch {
				return &ProtocolVersionError{Code: e.Code, Message: e.Message, ClientVersion: e.ClientVersion,
					ServerVersion: e.ServerVersion, MinSupported: e.MinSupported, MaxSupported: e.MaxSupported}
			}
			return e
		}
		return fmt.Errorf("a2c: handshake refused with HTTP %d", he.StatusCode)
	}
	var ce *sio.ConnectError
	if errors.As(err, &ce) {
		var data json.RawMessage
		if raw, ok := ce.Data.(json.RawMessage); ok {
			data = raw
		}
		return &ConnectError{Message: ce.Message, Data: data}
	}
	return nil
}

// permanent reports a reconnect failure that retrying cannot cure: a
// version mismatch, or a refusal of the client's credentials or request.
func permanent(err error) bool {
	var pve *ProtocolVersionError
	if errors.As(err, &pve) {
		return true
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		return !ce.transient()
	}
	var je *JoinError
	if errors.As(err, &je) {
		return false // the seat may be held by our own old session until it times out
	}
	var se *smcp.Error
	if errors.As(err, &se) {
		switch se.Code {
		case smcp.CodeBadRequest, smcp.CodeUnauthorized, smcp.CodeForbidden, smcp.CodeVersionMismatch:
			return true
		}
	}
	return false
}

type clientHandler Client

func (h *clientHandler) Event(_ *sio.Socket, e *sio.Event) {
	c := (*Client)(h)
	if e.WantsAck() {
		_ = e.Ack(sio.Message{})
	}
	if c.opts.OnNotify == nil || len(e.Args) == 0 {
		return
	}
	n := Notification{Event: e.Name, Raw: e.Args[0]}
	if err := json.Unmarshal(e.Args[0], &n); err != nil {
		c.opts.Logger.Debug("undecodable notification", "event", e.Name)
		return
	}
	c.opts.OnNotify(n)
}

// Disconnect hears of the end of any of the Client's sockets; only the
// published one's loss matters (one still rejoining fails its attempt
// instead). It never blocks: run does the work.
func (h *clientHandler) Disconnect(s *sio.Socket, reason string) {
	c := (*Client)(h)
	c.mu.Lock()
	if c.sock != s || c.err != nil {
		c.mu.Unlock()
		return
	}
	c.sock = nil
	c.ready = make(chan struct{})
	c.reason = reason
	c.mu.Unlock()
	c.opts.Logger.Info("a2c: connection lost", "reason", reason)
	select {
	case c.lost <- reason:
	default:
	}
}

// publish makes s the Client's connection, unless s has closed already
// (then its Disconnect may have come before s was published, and was
// ignored) or the Client has ended.
func (c *Client) publish(s *sio.Socket) bool {
	c.mu.Lock()
	if c.err != nil || s.Closed() {
		c.mu.Unlock()
		s.Disconnect() // outside mu: it calls Disconnect, which takes mu
		return false
	}
	c.sock = s
	c.reason = ""
	close(c.ready)
	c.mu.Unlock()
	return true
}

// end ends the Client once: err is what Err returns, reason what Reason
// returns.
func (c *Client) end(err error, reason string) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err, c.reason = err, reason
	s := c.sock
	c.sock = nil
	c.mu.Unlock()
	if c.stop != nil {
		c.stop()
	}
	if s != nil {
		s.Disconnect() // fails the requests in flight with ErrClosed
	}
	c.doneOnce.Do(func() { close(c.done) })
}

// callback runs a lifecycle callback on run's goroutine.
func (c *Client) callback(f func()) {
	c.inCallback.Add(1)
	defer c.inCallback.Add(-1)
	f()
}

// run owns the Client's connections after Dial: it hears of each loss,
// reconnects and rejoins, and ends the Client when it cannot. It is the
// only goroutine that calls the lifecycle callbacks, so they come one at
// a time and in order.
func (c *Client) run() {
	defer close(c.loopDone)
	for {
		select {
		case <-c.closing:
			if f := c.opts.OnDisconnect; f != nil {
				c.callback(func() { f("io client disconnect") })
			}
			return
		case <-c.done:
			return
		case reason := <-c.lost:
			if f := c.opts.OnDisconnect; f != nil {
				c.callback(func() { f(reason) })
			}
			if c.opts.Reconnect.Disabled {
				c.end(fmt.Errorf("a2c: %s: %w", reason, ErrConnectionLost), reason)
				return
			}
			if !c.reconnect() {
				return
			}
		}
	}
}

// reconnect tries until a connection is published (true) or the Client
// ends (false).
func (c *Client) reconnect() bool {
	r := c.opts.Reconnect
	for n := 1; ; n++ {
		t := time.NewTimer(r.delay(n))
		select {
		case <-c.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		s, err := c.attempt()
		if err == nil {
			if c.publish(s) {
				c.opts.Logger.Info("a2c: reconnected", "attempts", n, "office", c.Office())
				if f := c.opts.OnReconnect; f != nil {
					c.callback(f)
				}
				return true
			}
			err = fmt.Errorf("a2c: connection closed while rejoining: %w", ErrConnectionLost)
		}
		if c.ctx.Err() != nil {
			return false
		}
		c.opts.Logger.Warn("a2c: reconnect failed", "attempt", n, "err", err)
		if f := c.opts.OnReconnectError; f != nil {
			c.callback(func() { f(err) })
		}
		if permanent(err) || (r.MaxAttempts > 0 && n >= r.MaxAttempts) {
			c.end(&ReconnectError{Attempts: n, Err: err}, "reconnect failed: "+err.Error())
			return false
		}
	}
}

// attempt connects once and rejoins the office the Client is in, on a
// socket not yet published (so no other request can go first).
func (c *Client) attempt() (*sio.Socket, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Reconnect.AttemptTimeout)
	defer cancel()
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	office := c.Office()
	if office == "" {
		return s, nil
	}
	b, _ := json.Marshal(smcp.EnterOfficeReq{Role: smcp.RoleAgent, Name: c.opts.Name, OfficeID: office})
	args, err := c.send(ctx, s, smcp.EventJoinOffice, b, c.opts.Reconnect.AttemptTimeout)
	if err == nil {
		err = tupleError(args)
	}
	if err != nil {
		s.Disconnect()
		return nil, fmt.Errorf("a2c: rejoin office %q: %w", office, err)
	}
	return s, nil
}

// Done is closed when the Client ends: on Close, when the connection is
// lost and reconnecting is off, or when reconnecting gives up. A lost
// connection that the Client reconnects does not close it.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the Client lives. Once Done is closed it is
// [ErrClosed] after Close, and otherwise an error matching
// [ErrConnectionLost]: a *[ReconnectError] when reconnecting gave up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Reason says why the Client ended ("io client disconnect" after Close,
// the transport's reason when reconnecting is off, "reconnect failed:
// ..." when it gave up), or, while it reconnects, why the connection was
// lost ("transport close", "io server disconnect", ...). It is "" while
// the Client is connected.
func (c *Client) Reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// Name is the Agent's name.
func (c *Client) Name() string { return c.opts.Name }

// Office is the office joined (and rejoined after each reconnect), or "".
func (c *Client) Office() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.office
}

// Close leaves the server and stops reconnecting. Requests in flight end
// with [ErrClosed]. It returns when every goroutine of the Client has
// ended, except when called from a lifecycle callback (OnDisconnect,
// OnReconnect, OnReconnectError): then the Client's goroutine ends as soon
// as that callback returns. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.end(ErrClosed, "io client disconnect")
	})
	if c.inCallback.Load() == 0 {
		<-c.loopDone
	}
	return nil
}

// NewReqID returns a fresh request id: 128 random bits, hex.
func NewReqID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call sends one request and waits for the first ack argument(s). While
// the Client reconnects it first waits for the rejoin, within timeout
// (when > 0) and ctx. A connection lost with the request in flight ends
// it at once with ErrConnectionLost (ErrClosed after Close).
func (c *Client) call(ctx context.Context, event string, req any, timeout time.Duration) ([]json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("a2c: encode %s: %w", event, err)
	}
	return c.callRaw(ctx, event, b, timeout)
}

// callRaw is [Client.call] for a payload already encoded (put_blob builds
// its chunks' JSON itself). The time spent waiting for a reconnect counts
// against timeout.
func (c *Client) callRaw(ctx context.Context, event string, b []byte, timeout time.Duration) ([]json.RawMessage, error) {
	start := time.Now()
	s, err := c.socket(ctx, event, timeout)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		if timeout -= time.Since(start); timeout <= 0 {
			return nil, fmt.Errorf("a2c: %s: %w", event, context.DeadlineExceeded)
		}
	}
	return c.send(ctx, s, event, b, timeout)
}

// socket returns the live connection, waiting while the Client
// reconnects.
func (c *Client) socket(ctx context.Context, event string, timeout time.Duration) (*sio.Socket, error) {
	var expired <-chan time.Time
	for {
		c.mu.Lock()
		s, ready, err := c.sock, c.ready, c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if s != nil {
			return s, nil
		}
		if expired == nil && timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-ready:
		case <-c.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("a2c: %s: %w while reconnecting: %w", event, ctx.Err(), ErrConnectionLost)
		case <-expired:
			return nil, fmt.Errorf("a2c: %s: not reconnected in time (%w): %w", event, context.DeadlineExceeded, ErrConnectionLost)
		}
	}
}

// send sends one request on s and waits for its ack.
func (c *Client) send(ctx context.Context, s *sio.Socket, event string, b []byte, timeout time.Duration) ([]json.RawMessage, error) {
	type answer struct {
		m   sio.Message
		err error
	}
	ch := make(chan answer, 1)
	s.Request(event, sio.Message{Args: []json.RawMessage{b}}, timeout, func(m sio.Message, err error) {
		ch <- answer{m, err}
	})
	select {
	case a := <-ch:
		switch {
		case a.err == nil:
			return a.m.Args, nil
		case errors.Is(a.err, sio.ErrAckTimeout):
			return nil, fmt.Errorf("a2c: %s: %w", event, context.DeadlineExceeded)
		case errors.Is(a.err, sio.ErrTooLarge):
			return nil, fmt.Errorf("a2c: %s: %w", event, a.err)
		}
		if err := c.Err(); errors.Is(err, ErrClosed) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("a2c: %s: %w", event, ErrConnectionLost)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// request sends a client:* or server:* request and decodes its answer into
// out, returning a flat ErrorPayload as *smcp.Error.
func (c *Client) request(ctx context.Context, event string, req, out any) error {
	args, err := c.call(ctx, event, req, c.opts.RequestTimeout)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return fmt.Errorf("a2c: %s: empty answer", event)
	}
	if e, ok := smcp.DecodeError(args[0]); ok {
		return e
	}
	if err := json.Unmarshal(args[0], out); err != nil {
		return fmt.Errorf("a2c: %s: undecodable answer: %w", event, err)
	}
	return nil
}

// Join enters an office as its Agent. The server refuses a second Agent
// in an office, and an Agent that is already in another office.
func (c *Client) Join(ctx context.Context, officeID string) error {
	args, err := c.call(ctx, smcp.EventJoinOffice, smcp.EnterOfficeReq{Role: smcp.RoleAgent, Name: c.opts.Name, OfficeID: officeID}, c.opts.RequestTimeout)
	if err != nil {
		return err
	}
	if err := tupleError(args); err != nil {
		return err
	}
	c.mu.Lock()
	c.office = officeID
	c.mu.Unlock()
	return nil
}

// Leave leaves the office joined.
func (c *Client) Leave(ctx context.Context) error {
	office := c.Office()
	args, err := c.call(ctx, smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: office}, c.opts.RequestTimeout)
	if err != nil {
		return err
	}
	if err := tupleError(args); err != nil {
		return err
	}
	c.mu.Lock()
	c.office = ""
	c.mu.Unlock()
	return nil
}

// tupleError reads a join/leave answer: (true, null) or (false, message)
// as two arguments or one two-element array; also a flat ErrorPayload, or
// a lone null or true, which newer servers send on success.
func tupleError(args []json.RawMessage) error {
	if len(args) == 1 {
		if e, ok := smcp.DecodeError(args[0]); ok {
			return e
		}
		var pair []json.RawMessage
		if json.Unmarshal(args[0], &pair) == nil && len(pair) > 0 {
			args = pair
		}
	}
	if len(args) == 0 {
		return nil
	}
	var ok *bool
	if err := json.Unmarshal(args[0], &ok); err != nil {
		return fmt.Errorf("a2c: undecodable join answer")
	}
	if ok == nil || *ok {
		return nil
	}
	msg := "refused"
	if len(args) > 1 {
		_ = json.Unmarshal(args[1], &msg)
	}
	return &JoinError{Message: msg}
}

// ListRoom lists the sessions of the Agent's office.
func (c *Client) ListRoom(ctx context.Context) ([]smcp.SessionInfo, error) {
	var ret smcp.ListRoomRet
	err := c.request(ctx, smcp.EventListRoom, smcp.ListRoomReq{Agent: c.opts.Name, ReqID: NewReqID(), OfficeID: c.Office()}, &ret)
	return ret.Sessions, err
}

// Tools lists a Computer's tools.
func (c *Client) Tools(ctx context.Context, computer string) ([]smcp.SMCPTool, error) {
	var ret smcp.GetToolsRet
	err := c.request(ctx, smcp.EventGetTools, smcp.GetToolsReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer}, &ret)
	return ret.Tools, err
}

// Config returns a Computer's MCP server configuration (without secrets).
func (c *Client) Config(ctx context.Context, computer string) (*smcp.GetComputerConfigRet, error) {
	var ret smcp.GetComputerConfigRet
	if err := c.request(ctx, smcp.EventGetConfig, smcp.GetComputerConfigReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer}, &ret); err != nil {
		return nil, err
	}
	return &ret, nil
}

// Desktop returns a Computer's desktop: at most size entries when size is
// not nil, and only the window whose URI equals window when it is not "".
func (c *Client) Desktop(ctx context.Context, computer string, size *int, window string) ([]string, error) {
	req := smcp.GetDesktopReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer, DesktopSize: size}
	if window != "" {
		req.Window = &window
	}
	var ret smcp.GetDesktopRet
	err := c.request(ctx, smcp.EventGetDesktop, req, &ret)
	return ret.Desktops, err
}

// Resources returns one page of one MCP server's resources; pass the
// previous page's NextCursor to continue.
func (c *Client) Resources(ctx context.Context, computer, bundleID string, cursor *string) (*smcp.GetResourcesRet, error) {
	var ret smcp.GetResourcesRet
	req := smcp.GetResourcesReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer, MCPServer: bundleID, Cursor: cursor}
	if err := c.request(ctx, smcp.EventGetResources, req, &ret); err != nil {
		return nil, err
	}
	return &ret, nil
}

// Skills lists a Computer's skills.
func (c *Client) Skills(ctx context.Context, computer string) ([]smcp.A2CSkillRef, error) {
	var ret smcp.GetSkillsRet
	err := c.request(ctx, smcp.EventGetSkills, smcp.GetSkillsReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer}, &ret)
	return ret.Skills, err
}

// Skill reads one file of a skill; relPath "" means SKILL.md. A large
// file comes back with a BlobHandle instead of a Body: read it with
// [Client.Blob].
func (c *Client) Skill(ctx context.Context, computer, name, relPath string) (*smcp.GetSkillRet, error) {
	req := smcp.GetSkillReq{Agent: c.opts.Name, ReqID: NewReqID(), Computer: computer, Name: name}
	if relPath != "" {
		req.RelPath = &relPath
	}
	var ret smcp.GetSkillRet
	if err := c.request(ctx, smcp.EventGetSkill, req, &ret); err != nil {
		return nil, err
	}
	return &ret, nil
}

// AuthProviderError is a failure of [Options.AuthFunc]. Its message does
// not include the provider's error, which may hold a credential and would
// otherwise reach logs (the SDK logs failed reconnects); errors.As and
// Unwrap reach it.
type AuthProviderError struct{ Err error }

func (e *AuthProviderError) Error() string { return "a2c: the auth provider failed" }

// Unwrap returns the provider's error.
func (e *AuthProviderError) Unwrap() error { return e.Err }

// callAuth calls the user's auth provider, turning a panic into an error so
// that a faulty provider ends one connection attempt, not the program.
func callAuth(ctx context.Context, f func(context.Context) (map[string]any, error)) (a map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, &AuthProviderError{Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	a, err = f(ctx)
	if err != nil {
		return nil, &AuthProviderError{Err: err}
	}
	return a, nil
}
