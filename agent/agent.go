package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

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
	// repeat the role, office or name.
	Auth map[string]any
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
	// OnNotify, if set, receives every notify:* event, one at a time in the
	// order the server sent them. It must not block.
	OnNotify func(Notification)
	// OnDisconnect, if set, is called once when the connection ends.
	OnDisconnect func(reason string)
	Logger       *slog.Logger
	// ProtocolVersion is the A2C-SMCP version the Agent speaks, one of
	// [smcp.SupportedVersions]. Default [smcp.ProtocolVersion].
	ProtocolVersion string
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
type Client struct {
	opts    Options
	profile smcp.Profile
	sock    *sio.Socket
	done    chan struct{}

	doneOnce sync.Once

	mu     sync.Mutex
	office string
	reason string
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

// ErrClosed is returned by requests on a closed client.
var ErrClosed = errors.New("a2c: connection closed")

// JoinError is a join or leave the server refused, with its reason.
type JoinError struct{ Message string }

func (e *JoinError) Error() string { return "a2c: " + e.Message }

// Dial connects to the server at serverURL (http or https) as an Agent.
// The protocol version is [smcp.ProtocolVersion], added to the URL by the
// SDK. A version refusal is a *[ProtocolVersionError], a refused
// handshake with a flat body a *[smcp.Error], an authentication refusal a
// *[ConnectError]; none is retried.
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
	profile, err := smcp.NewProfile(o.ProtocolVersion)
	if err != nil {
		return nil, fmt.Errorf("a2c: %w", err)
	}
	o.ProtocolVersion = profile.Version
	c := &Client{opts: o, profile: profile, done: make(chan struct{})}
	so := sio.ClientOptions{
		Path:      o.Path,
		Namespace: smcp.Namespace,
		Query:     url.Values{smcp.QueryVersion: {o.ProtocolVersion}},
		Header:    o.Header,
		Handler:   (*clientHandler)(c),
	}
	if o.Auth != nil {
		so.Auth = o.Auth
	}
	if o.WebSocketOnly {
		so.Transport = sio.WebSocketOnly
	}
	sock, err := sio.Dial(ctx, serverURL, so)
	var ce *sio.CloseError
	if errors.As(err, &ce) && ce.Code == smcp.CloseVersionMismatch {
		// Read the reason once over polling; never loop.
		so.Transport = sio.PollingOnly
		_, err2 := sio.Dial(ctx, serverURL, so)
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
	c.sock = sock
	return c, nil
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

func (h *clientHandler) Disconnect(_ *sio.Socket, reason string) {
	c := (*Client)(h)
	c.mu.Lock()
	c.reason = reason
	c.mu.Unlock()
	c.doneOnce.Do(func() { close(c.done) })
	if c.opts.OnDisconnect != nil {
		c.opts.OnDisconnect(reason)
	}
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Reason says why the connection ended ("transport close", "io server
// disconnect", ...), or "" while it is up.
func (c *Client) Reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// Name is the Agent's name.
func (c *Client) Name() string { return c.opts.Name }

// Office is the office joined, or "".
func (c *Client) Office() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.office
}

// Close leaves the server.
func (c *Client) Close() error {
	c.sock.Disconnect()
	return nil
}

// NewReqID returns a fresh request id: 128 random bits, hex.
func NewReqID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call sends one request and waits for the first ack argument(s).
func (c *Client) call(ctx context.Context, event string, req any, timeout time.Duration) ([]json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("a2c: encode %s: %w", event, err)
	}
	type answer struct {
		m   sio.Message
		err error
	}
	ch := make(chan answer, 1)
	c.sock.Request(event, sio.Message{Args: []json.RawMessage{b}}, timeout, func(m sio.Message, err error) {
		ch <- answer{m, err}
	})
	select {
	case a := <-ch:
		switch {
		case a.err == nil:
			return a.m.Args, nil
		case errors.Is(a.err, sio.ErrAckTimeout):
			return nil, fmt.Errorf("a2c: %s: %w", event, context.DeadlineExceeded)
		default:
			return nil, ErrClosed
		}
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
