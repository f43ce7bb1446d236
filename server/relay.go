package server

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/a2c-smcp/a2c-go/internal/sio"
	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// relay forwards a client:* request from an Agent to the Computer it
// names, in the Agent's own office, and relays the Computer's answer back
// unchanged. The payload is forwarded as received: it is decoded only to
// be validated and routed.
//
// Protocol errors of the server itself are flat ErrorPayloads: 400 for a
// payload that fails validation, 4103 when the sender is in no office, 403
// when it is not an Agent, 4104 when the Computer is in another office,
// 404 when there is no such Computer. When the deadline passes (the tool
// call's timeout plus ToolCallSlack, or RelayTimeout) a tool call gets a
// CallToolResult marked a2c_timeout and any other request a 408; when the
// Computer leaves first, a tool call gets an isError result and any other
// request a 404. If the Agent has gone by then, the answer is dropped.
func (s *Server) relay(m *member, e *sio.Event) {
	start := time.Now()
	req := smcp.NewClientRequest(e.Name)
	if err := smcp.DecodeRequest(payload(e), req); err != nil {
		s.refuse(e, err)
		return
	}
	obs := s.observe(m, req, start) // nil unless tracing or the console's call log is on
	if msg := checkNames(payload(e), req.Target()); msg != "" {
		s.refuseObserved(e, obs, smcp.NewError(smcp.CodeBadRequest, msg))
		return
	}
	timeout := s.cfg.RelayTimeout
	if tc, ok := req.(*smcp.ToolCallReq); ok {
		timeout = time.Duration(tc.Timeout)*time.Second + s.cfg.ToolCallSlack
	}
	s.mu.RLock()
	target, perr := s.routeLocked(m, req.Target())
	var remote cluster.Member
	var office string
	if s.hub != nil && perr != nil && (perr.Code == smcp.CodeNotFound || perr.Code == smcp.CodeCrossRoom) {
		// Not held here: on another node of the cluster, or nowhere.
		office = m.office.id
		var ok bool
		if remote, ok = s.hub.node.Lookup(office, smcp.RoleComputer, req.Target()); !ok {
			s.routeLater(m, e, office, req.Target(), timeout, start, obs)
			s.mu.RUnlock()
			return
		}
		perr = nil
	}
	draining := s.draining
	s.mu.RUnlock()
	if perr == nil && draining {
		perr = smcp.NewError(smcp.CodeInternal, "Server is shutting down")
	}
	if perr != nil {
		if perr.Code == smcp.CodeCrossRoom {
			s.log.Warn("cross-office request refused", "sid", m.sid(), "event", e.Name)
		}
		s.refuseObserved(e, obs, perr)
		return
	}
	if target == nil {
		s.relayRemote(e, office, remote, timeout, start, obs)
		return
	}
	s.inFlight.Add(1)
	s.metrics.inFlight.Inc()
	obs.sent()
	target.sock.RequestDirect(e.Name, e.Message, timeout, func(ans sio.Message, err error) {
		outcome := outcomeOK
		switch {
		case err == nil:
		case errors.Is(err, sio.ErrAckTimeout):
			outcome = outcomeTimeout
		default:
			outcome = outcomeGone
		}
		s.endRelay(e, ans, outcome, start, true, obs)
	})
}

// endRelay answers the Agent at the end of a relayed request, with the
// Computer's answer, or the server's own for a timeout or a departure,
// and counts the outcome. direct answers on the calling goroutine (see
// sio.Event.AckDirect); a caller that must not block passes false.
func (s *Server) endRelay(e *sio.Event, ans sio.Message, outcome string, start time.Time, direct bool, obs *callObs) {
	defer func() {
		s.inFlight.Add(-1)
		s.metrics.inFlight.Dec()
	}()
	switch outcome {
	case outcomeTimeout:
		ans = timeoutAnswer(e.Name)
	case outcomeGone:
		ans = goneAnswer(e.Name)
	}
	obs.end(ans, outcome) // before the answer leaves: its span is on record when the Agent reads it
	ack := e.Ack
	if direct {
		ack = e.AckDirect
	}
	if e.WantsAck() && ack(ans) != nil {
		outcome = outcomeDropped
	}
	s.metrics.relayDone(e.Name, outcome, start)
}

// routeLocked finds the Computer an Agent's request goes to.
func (s *Server) routeLocked(m *member, computer string) (*member, *smcp.Error) {
	switch {
	case m.office == nil:
		return nil, smcp.NewError(smcp.CodeNotInRoom, "Not in an office; join one first")
	case m.role != smcp.RoleAgent:
		return nil, smcp.NewError(smcp.CodeForbidden, "Only an Agent may send client:* requests")
	}
	if t := m.office.computers[computer]; t != nil {
		return t, nil
	}
	if s.names[computer] > 0 {
		return nil, smcp.NewError(smcp.CodeCrossRoom, "Computer is not in your office")
	}
	return nil, smcp.NewError(smcp.CodeNotFound, "Computer not found")
}

// refuseObserved is refuse for a request that observe may have seen.
func (s *Server) refuseObserved(e *sio.Event, obs *callObs, err error) {
	if obs != nil {
		var pe *smcp.Error
		if !errors.As(err, &pe) {
			pe = smcp.NewError(smcp.CodeBadRequest, "invalid payload")
		}
		obs.refused(pe)
	}
	s.refuse(e, err)
}

func (s *Server) refuse(e *sio.Event, err error) {
	s.metrics.relayDone(e.Name, outcomeRefused, time.Time{})
	var pe *smcp.Error
	if !errors.As(err, &pe) {
		pe = smcp.NewError(smcp.CodeBadRequest, "invalid payload")
	}
	ackJSON(e, pe)
}

func jsonMessage(v any) sio.Message {
	return sio.Message{Args: []json.RawMessage{smcp.Encode(v)}}
}
