package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRPC holds the plain path's request parser to its contract on any
// body: it never panics; a body it accepts yields at least one message;
// every message is a request, a notification, a client's response or an
// invalid one with its error; every answer it leads to is valid JSON
// whose id is a string, a number or null.
func FuzzRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_execute_bash","arguments":{"cmd":"ls"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"x","result":{}}]`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `[]`, `{`, ``, `"x"`, `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte("[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, MaxBatch+1), ",") + "]"))
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, batch, perr := parseBody(body)
		if perr != nil {
			if msgs != nil || perr.Code == 0 {
				t.Fatalf("error %v with messages %v", perr, msgs)
			}
			return
		}
		if len(msgs) == 0 || (!batch && len(msgs) != 1) {
			t.Fatalf("%d messages, batch %v", len(msgs), batch)
		}
		for _, m := range msgs {
			switch {
			case m.Invalid != nil:
				if m.ID == nil {
					t.Fatalf("invalid message without an id to answer: %+v", m)
				}
			case m.Response:
			case m.Method == "" && m.ID == nil:
			}
			if m.ID != nil {
				out := marshal(response{JSONRPC: "2.0", ID: m.ID, Error: m.Invalid})
				var back struct {
					ID any `json:"id"`
				}
				dec := json.NewDecoder(bytes.NewReader(out))
				dec.UseNumber()
				if err := dec.Decode(&back); err != nil {
					t.Fatalf("answer is not JSON: %s", out)
				}
				switch back.ID.(type) {
				case string, json.Number, nil:
				default:
					t.Fatalf("id %T in %s", back.ID, out)
				}
			}
		}
	})
}
