package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2c-smcp/a2c-go/aiod/pool"
)

// A sandbox's life from Go: create one, run a command through its own
// aiod API, delete it.
func Example() {
	// base is the pool's URL (aiod pool --listen; http://127.0.0.1:18100
	// by default) and token its --token. Here a stand-in answers.
	base, stop := examplePool("s3cret")
	defer stop()
	const token = "s3cret"

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pool.NewClient(base, token)
	lifetime := 120 // seconds; then the pool kills it (on_timeout "kill")
	sb, err := c.Create(ctx, pool.CreateRequest{TimeoutS: &lifetime, Metadata: map[string]string{"job": "example"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sb.State, sb.Metadata["job"])

	// The sandbox's own API is aiod's, at sb.APIURL, with the pool's
	// credential: POST /v2/commands runs a command and answers aiod's
	// envelope around its result.
	body, _ := json.Marshal(map[string]string{"command": "echo hi"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sb.APIURL+"/v2/commands", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var ran struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
		Data    struct {
			Status   string `json:"status"`
			Stdout   string `json:"stdout"`
			ExitCode *int   `json:"exit_code"`
		} `json:"data"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ran)
	resp.Body.Close()
	if err != nil || !ran.Success {
		fmt.Println("run failed:", resp.Status, ran.Message, err)
		return
	}
	fmt.Printf("%s, exit code %d: %s", ran.Data.Status, *ran.Data.ExitCode, ran.Data.Stdout)

	if err := c.Delete(ctx, sb.ID, false); err != nil {
		fmt.Println(err)
		return
	}
	// A refusal of the pool is a *pool.Error with the HTTP status.
	var perr *pool.Error
	if _, err = c.Get(ctx, sb.ID); errors.As(err, &perr) {
		fmt.Println("after delete:", perr.Status)
	}
	// Output:
	// running example
	// completed, exit code 0: hi
	// after delete: 404
}

// examplePool stands in for a pool for [Example]: one sandbox's
// lifecycle and its /v2/commands route answering echo, behind token.
func examplePool(token string) (base string, stop func()) {
	var (
		ts    *httptest.Server
		alive atomic.Bool
	)
	fail := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(pool.ErrorBody{Error: pool.ErrorDetail{Code: status, Message: msg}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var req pool.CreateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, http.StatusBadRequest, "bad body")
			return
		}
		alive.Store(true)
		now := time.Now().UTC()
		exp := now.Add(time.Duration(*req.TimeoutS) * time.Second)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(pool.Sandbox{ID: "sb1", State: pool.Running, Template: "base", CreatedAt: now,
			ExpiresAt: &exp, OnTimeout: pool.OnTimeoutKill, Network: pool.NetworkNone, Metadata: req.Metadata,
			APIURL: ts.URL + "/sandboxes/sb1", MCPURL: ts.URL + "/sandboxes/sb1/mcp"})
	})
	mux.HandleFunc("GET /v2/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, fmt.Sprintf("no sandbox %q", r.PathValue("id")))
	})
	mux.HandleFunc("DELETE /v2/sandboxes/sb1", func(w http.ResponseWriter, r *http.Request) {
		alive.Store(false)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /sandboxes/sb1/v2/commands", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Command string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		exit := 0
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"success": alive.Load(), "message": "Operation successful", "data": map[string]any{
			"status": "completed", "stdout": strings.TrimPrefix(req.Command, "echo ") + "\n", "exit_code": exit}})
	})
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != token {
			fail(w, http.StatusUnauthorized, "missing or wrong token")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	return ts.URL, ts.Close
}
