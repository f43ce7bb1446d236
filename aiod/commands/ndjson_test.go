package commands

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestNDJSONNotHTMLEscaped(t *testing.T) {
	h := newHarness(t, Config{}, nil)
	h.OK("POST", "/v2/commands/sessions", map[string]any{"id": "a<b>&c"}, nil)
	body, _ := json.Marshal(map[string]any{"command": "true", "session": "a<b>&c"})
	req, _ := http.NewRequest("POST", h.srv.URL+"/v2/commands", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"session_id":"a<b>&c"`) {
		t.Fatalf("%d %q", resp.StatusCode, sc.Text())
	}
}
