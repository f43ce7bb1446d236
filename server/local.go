package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// The console's requests to Computers (local calls): they go through the
// same relay as an Agent's, from a member of the office that has no
// socket (member.console), and are marked as the console's in the call
// log and in their spans.
//
// The console's member is made for one request and seated nowhere: it
// points at the office's own object when this node holds members there
// (so routing reads the same table an Agent's request reads), else at a
// detached empty office of that id that nothing else sees. In a cluster,
// a Computer on another node is found in this node's copy of the office
// when it follows the office, else in the office's record in Redis; the
// request then travels as an Agent's does (relayRemote). The console is
// no member of any office: no one is told of it, and it takes no seat
// (an office with an Agent still accepts its requests).

// ErrLocalRequest is wrapped by the errors of [Server.LocalRequest] and
// [Server.Request] that are not the relay's own answers (a bad argument, a
// payload that does not encode).
var ErrLocalRequest = errors.New("server: local request")

// Caller is who makes a request through [Server.Request]: an Agent of
// the office that has no Socket.IO connection (the console, the MCP
// gateway). It takes no seat, so an office with an Agent still accepts
// its requests, and no member is told of it.
type Caller struct {
	// Agent is the Agent name the request carries (its agent field) and
	// the call log and spans show.
	Agent string
	// Console marks the console's own requests in the call log and in
	// their spans.
	Console bool
}

// consoleCaller is the console's [Caller].
var consoleCaller = Caller{Agent: ConsoleAgent, Console: true}

// LocalRequest is [Server.Request] made by the console: agent is always
// [ConsoleAgent], and the call is marked as the console's.
func (s *Server) LocalRequest(ctx context.Context, officeID, event string, payload any) (json.RawMessage, error) {
	return s.Request(ctx, officeID, consoleCaller, event, payload)
}

// Request sends a client:* request (event, with payload: the request's
// JSON object; agent is set to who.Agent and req_id filled in when
// missing) to a Computer of office through the relay, as an Agent of that
// office would, and returns the answer. A flat ErrorPayload answer (the
// relay's refusal, or a Computer's error) is returned as a *smcp.Error as
// well as the raw answer. It waits for the answer, the relay's deadline,
// or ctx; when ctx ends first the request still runs to its end in the
// relay (a tool call is stopped with [Server.Cancel]). A tool call's root
// span is a child of the span ctx carries, if any.
func (s *Server) Request(ctx context.Context, officeID string, who Caller, event string, payload any) (json.RawMessage, error) {
	office := officeID
	if office == "" || len(office) > MaxOfficeID {
		return nil, fmt.Errorf("%w: invalid office id", ErrLocalRequest)
	}
	if who.Agent == "" {
		return nil, fmt.Errorf("%w: no Agent name", ErrLocalRequest)
	}
	if !s.profile.IsClientEvent(event) {
		return nil, fmt.Errorf("%w: %q is not a client request", ErrLocalRequest, event)
	}
	raw, err := localPayload(payload, who.Agent)
	if err != nil {
		return nil, err
	}
	if len(raw) > s.requestLimit(event) {
		return nil, smcp.NewError(smcp.CodeBadRequest, fmt.Sprintf("payload too large: %d bytes, the limit is %d", len(raw), s.requestLimit(event)))
	}
	req := smcp.NewClientRequest(event)
	if err := smcp.DecodeRequest(raw, req); err != nil {
		var pe *smcp.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, smcp.NewError(smcp.CodeBadRequest, "invalid payload")
	}
	// The caller is the Agent of its own tool calls: their trace starts
	// with its root span, as one made with the Agent SDK does.
	span := s.callerSpan(ctx, req, office, who)
	answer := make(chan sio.Message, 1)
	e := sio.NewLocalEvent(event, sio.Message{Args: []json.RawMessage{raw}}, func(m sio.Message) {
		select { // once; never blocks whoever answers
		case answer <- m:
		default:
		}
	})
	m := &member{console: who.Console, role: smcp.RoleAgent, name: who.Agent}
	s.mu.RLock()
	o := s.offices[office]
	held := o != nil && o.computers[req.Target()] != nil
	s.mu.RUnlock()
	if o == nil {
		o = newDetachedOffice(office)
	}
	m.office = o
	if !held && s.hub != nil {
		if _, ok := s.hub.node.Lookup(office, smcp.RoleComputer, req.Target()); !ok {
			target, found, err := s.findRemote(ctx, office, req.Target())
			if err != nil {
				return nil, span.fail(err)
			}
			if found {
				s.relayRemoteLocal(m, e, req, office, target)
				return span.wait(ctx, answer)
			}
		}
	}
	s.relay(m, e)
	return span.wait(ctx, answer)
}

// Cancel asks the Computer of office to stop the tool call reqID that who
// made with [Server.Request], as an Agent's server:tool_call_cancel
// does: the Computer gets notify:tool_call_cancel (on whichever node of
// a cluster holds it). A cancel that names no running call is ignored
// by the Computer.
func (s *Server) Cancel(ctx context.Context, officeID string, who Caller, computer, reqID string) {
	if officeID == "" || len(officeID) > MaxOfficeID || who.Agent == "" || reqID == "" {
		return
	}
	n := smcp.AgentCallData{Agent: who.Agent, ReqID: reqID}
	s.mu.RLock()
	var c *member
	if o := s.offices[officeID]; o != nil {
		c = o.computers[computer]
	}
	if c != nil {
		_ = c.sock.Emit(smcp.NotifyCancelToolCall, jsonMessage(n))
	}
	s.mu.RUnlock()
	if c != nil || s.hub == nil {
		return
	}
	target, ok := s.hub.node.Lookup(officeID, smcp.RoleComputer, computer)
	if !ok {
		var err error
		if target, ok, err = s.findRemote(ctx, officeID, computer); err != nil || !ok {
			return
		}
	}
	f := &cluster.Frame{Kind: cluster.KindBroadcast, From: s.hub.node.ID(), To: localSID, Office: officeID, Event: smcp.NotifyCancelToolCall,
		Payload: appendMessage(nil, jsonMessage(n))}
	s.send(target.Node, f, time.Now().Add(broadcastRetry), nil)
}

// localSID is the sid a socketless member (the console's, the gateway's)
// goes by in logs and in the frames it sends.
const localSID = "console"

// localPayload encodes payload as a request object with the Agent name
// agent and a req_id.
func localPayload(payload any, agent string) (json.RawMessage, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the payload: %w", ErrLocalRequest, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: the payload is not a JSON object", ErrLocalRequest)
	}
	obj["agent"], _ = json.Marshal(agent)
	var id string
	if json.Unmarshal(obj["req_id"], &id) != nil || id == "" {
		obj["req_id"], _ = json.Marshal(NewReqID())
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the payload: %w", ErrLocalRequest, err)
	}
	return out, nil
}

// NewReqID returns a fresh random req_id for a console request.
func NewReqID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "console-" + hex.EncodeToString(b[:])
}

// findRemote looks for the Computer in the office's record in Redis, for
// an office this node does not follow.
func (s *Server) findRemote(ctx context.Context, office, computer string) (cluster.Member, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := s.hub.node.Office(ctx, office)
	if err != nil {
		return cluster.Member{}, false, smcp.NewError(smcp.CodeInternal, cluster.RefuseUnavailable)
	}
	for _, m := range ms {
		if m.Role == smcp.RoleComputer && m.Name == computer {
			return m, true, nil
		}
	}
	return cluster.Member{}, false, nil
}

// relayRemoteLocal is relay for a console request to a Computer another
// node holds in an office this node does not follow: observed, refused
// while draining, then sent as relay sends it.
func (s *Server) relayRemoteLocal(m *member, e *sio.Event, req smcp.ClientRequest, office string, target cluster.Member) {
	start := time.Now()
	obs := s.observe(m, req, start)
	timeout := s.cfg.RelayTimeout
	if tc, ok := req.(*smcp.ToolCallReq); ok {
		timeout = time.Duration(tc.Timeout)*time.Second + s.cfg.ToolCallSlack
	}
	s.mu.RLock()
	draining := s.draining
	s.mu.RUnlock()
	if draining {
		s.refuseObserved(e, obs, smcp.NewError(smcp.CodeInternal, "Server is shutting down"))
		return
	}
	s.relayRemote(e, office, target, timeout, start, obs)
}

// waitLocal waits for a local request's answer.
func waitLocal(ctx context.Context, answer <-chan sio.Message) (json.RawMessage, error) {
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrLocalRequest, ctx.Err())
	case m := <-answer:
		if len(m.Args) == 0 {
			return nil, smcp.NewError(smcp.CodeInternal, "empty answer")
		}
		raw := m.Args[0]
		// The Agent SDK's reading of an answer: an ErrorPayload is an
		// error, anything else the result.
		if pe, ok := smcp.DecodeError(raw); ok {
			return raw, pe
		}
		return raw, nil
	}
}

// newDetachedOffice is an office object of that id that no table holds:
// the console member's office when this node holds no member there.
func newDetachedOffice(id string) *office {
	return &office{id: id, computers: map[string]*member{}}
}
