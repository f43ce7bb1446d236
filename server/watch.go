package server

// Office watches: what a socketless Agent of an office (the MCP gateway)
// needs to hear of the office's changes. Every notify:* event the server
// delivers to an office's members (a member entering or leaving, a
// Computer's update_tool_list, update_desktop, update_skills,
// update_config, a cancel), this node's own and those another node of a
// cluster relays here, is also reported to the office's watchers. In a
// cluster a node hears of another node's members only for the offices it
// follows (where it holds a member); a watcher there must also look for
// itself (the gateway re-reads the office while it has clients).

// officeWatch is one [Server.WatchOffice] registration.
type officeWatch struct{ f func(event string) }

// WatchOffice calls f with the name of every notify:* event delivered to
// office (see above) until stop is called. f runs while the server holds
// its locks: it must return at once (signal a channel, set a flag) and
// never call the server.
func (s *Server) WatchOffice(office string, f func(event string)) (stop func()) {
	w := &officeWatch{f: f}
	s.wmu.Lock()
	if s.watchers[office] == nil {
		s.watchers[office] = make(map[*officeWatch]struct{})
	}
	s.watchers[office][w] = struct{}{}
	s.wmu.Unlock()
	return func() {
		s.wmu.Lock()
		delete(s.watchers[office], w)
		if len(s.watchers[office]) == 0 {
			delete(s.watchers, office)
		}
		s.wmu.Unlock()
	}
}

// officeEvent reports event to the watchers of office.
func (s *Server) officeEvent(office, event string) {
	s.wmu.Lock()
	for w := range s.watchers[office] {
		w.f(event)
	}
	s.wmu.Unlock()
}
