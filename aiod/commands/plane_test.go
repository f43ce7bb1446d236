package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestSyncClientGoneKills(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	for i, path := range []string{"/v2/commands", "/v1/bash/exec"} {
		session := "dc" + strconv.Itoa(i)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		field := map[bool]string{true: "session", false: "session_id"}[i == 0]
		body, _ := json.Marshal(map[string]any{"command": "sleep 30", field: session})
		h.OK("POST", "/v2/commands/sessions", map[string]any{"id": session}, nil)
		req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := h.srv.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("%s: answered %d before the command ended", path, resp.StatusCode)
		}
		cancel()
		var c *Command
		eventually(t, 5*time.Second, "the command to be killed", func() bool {
			c, _ = h.p.e.Latest(session, false)
			if c == nil {
				return false
			}
			st, ec := c.State()
			return st == StatusCompleted && ec != nil && *ec == -1
		})
	}
	// Returned as running by timeout, or async: the client may go. By
	// the time a later disconnect has been acted on, theirs have been.
	d := h.run(map[string]any{"command": "sleep 30", "timeout": 0.1})
	a := h.run(map[string]any{"command": "sleep 30", "mode": "async"})
	h.disconnectedAfter()
	for _, id := range []string{d.CommandID, a.CommandID} {
		var o outputData
		h.OK("GET", "/v2/commands/"+id, nil, &o)
		if o.Command.Status != StatusRunning {
			t.Fatalf("%+v", o.Command)
		}
	}
}
