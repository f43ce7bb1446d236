package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2c-smcp/a2c-go/aiod/internal/api"
)

func TestStatusTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{api.NewError(api.ErrInvalid, "x"), 400},
		{api.NewError(api.ErrForbidden, "x"), 403},
		{api.NewError(api.ErrNotFound, "x"), 404},
		{api.NewError(api.ErrConflict, "x"), 409},
		{api.NewError(api.ErrTooLarge, "x"), 413},
		{api.NewError(api.ErrUnprocessable, "x"), 422},
		{api.NewError(api.ErrLimit, "x"), 429},
		{api.NewError(api.ErrBusy, "x"), 429},
		{api.NewError(api.ErrInternal, "x"), 500},
		{api.NewError(api.ErrNotImplemented, "x"), 501},
		{api.NewError(api.ErrUnavailable, "x"), 503},
		{api.NewError(api.ErrNoSpace, "x"), 507},
		{errors.New("no kind"), 500},
		{api.NewError(api.NewKind("command not running", api.ErrInvalid), "x"), 400},
		{fmt.Errorf("wrapped: %w", api.NewError(api.ErrNotFound, "x")), 404},
	} {
		if got := api.Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestOverride(t *testing.T) {
	busy := api.NewError(api.ErrBusy, "all sessions busy")
	if got := api.StatusFor(busy, api.AsStatus(api.ErrBusy, 400)); got != 400 {
		t.Errorf("overridden busy = %d, want 400", got)
	}
	if got := api.StatusFor(api.NewError(api.ErrNotFound, "x"), api.AsStatus(api.ErrBusy, 400)); got != 404 {
		t.Errorf("an override covers only its kind: got %d", got)
	}
	if got := api.StatusFor(api.NewError(api.ErrNotFound, "x"), api.Failed200); got != 200 {
		t.Errorf("Failed200 = %d", got)
	}
	if got := api.StatusFor(api.NewError(api.ErrTooLarge, "x"), api.Failed200); got != 413 {
		t.Errorf("Failed200 keeps 413, got %d", got)
	}
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) api.Reply {
	t.Helper()
	var r api.Reply
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return r
}

func TestWriteErrorNeverLeaksGoText(t *testing.T) {
	rec := httptest.NewRecorder()
	api.WriteError(rec, fmt.Errorf("open /secret: %w", errors.New("permission denied")))
	r := decode(t, rec)
	if rec.Code != 500 || r.Success || r.Message != "Internal error" || strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	api.WriteError(rec, api.NewError(api.ErrUnavailable, "No node").WithHint("install nodejs").WithData(map[string]int{"n": 1}))
	r = decode(t, rec)
	if rec.Code != 503 || r.Message != "No node" || r.Hint == nil || *r.Hint != "install nodejs" || string(r.Data) != `{"n":1}` {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}

type in struct {
	N int64 `json:"n" serde:"required"`
}

func TestRoute(t *testing.T) {
	notFound := api.Route[in, int]{
		Op: func(_ *http.Request, v in) (int, error) {
			return 0, api.NewError(api.ErrNotFound, fmt.Sprint("no ", v.N))
		},
		// every refusal of the operation answers 200
		Override: []api.Override{func(error) (int, bool) { return http.StatusOK, true }},
	}
	serve := func(h http.Handler, target, body string) (*httptest.ResponseRecorder, api.Reply) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec, decode(t, rec)
	}
	// a decoding failure is the 422 body, whatever the overrides
	rec, r := serve(notFound, "/", `{}`)
	if rec.Code != 422 || len(r.Errors) != 1 || r.Errors[0].Message != "missing field `n` at line 1 column 2" {
		t.Errorf("decode failure: %d %s", rec.Code, rec.Body)
	}
	// the operation's refusal takes the override
	rec, r = serve(notFound, "/", `{"n":7}`)
	if rec.Code != 200 || r.Success || r.Message != "no 7" {
		t.Errorf("refusal: %d %s", rec.Code, rec.Body)
	}
	// a body past the limit is 413 even on a route answering every refusal 200
	rec, _ = serve(notFound, "/", `{"n":1,"pad":"`+strings.Repeat("x", api.MaxJSONBody)+`"}`)
	if rec.Code != 413 {
		t.Errorf("oversized body: %d", rec.Code)
	}
	// a query route and a custom reply
	double := api.Route[in, int]{From: api.FromQuery,
		Op:    func(_ *http.Request, v in) (int, error) { return 2 * int(v.N), nil },
		Reply: func(w http.ResponseWriter, _ *http.Request, out int) { api.OKMessage(w, "doubled", out) }}
	rec, r = serve(double, "/?n=4", `not json`)
	if rec.Code != 200 || !r.Success || r.Message != "doubled" || string(r.Data) != "8" {
		t.Errorf("query route: %d %s", rec.Code, rec.Body)
	}
	// FromNothing does not read the body
	none := api.Route[in, int]{From: api.FromNothing, Op: func(_ *http.Request, v in) (int, error) { return int(v.N), nil }}
	rec, r = serve(none, "/", `not json`)
	if rec.Code != 200 || string(r.Data) != "0" {
		t.Errorf("no input: %d %s", rec.Code, rec.Body)
	}
}

// TestJSONBodyType: a JSON route takes a body only when it is declared
// JSON, as axum's Json extractor does (a "simple" cross-site POST is
// text/plain or a form); no body at all is "{}" whatever the type.
func TestJSONBodyType(t *testing.T) {
	echo := api.Route[in, int64]{Op: func(_ *http.Request, v in) (int64, error) { return v.N, nil }}
	const refused = `{"success":false,"message":"Expected request with ` + "`Content-Type: application/json`" + `","data":null,"hint":null}`
	for _, c := range []struct {
		name, ctype, body string
		chunked           bool
		status            int
		want              string
	}{
		{"json", "application/json", `{"n":1}`, false, 200, ""},
		{"json charset", "application/json; charset=utf-8", `{"n":2}`, false, 200, ""},
		{"JSON upper", "Application/JSON", `{"n":3}`, false, 200, ""},
		{"+json", "application/vnd.api+json", `{"n":4}`, false, 200, ""},
		{"text/plain", "text/plain", `{"n":5}`, false, 415, refused},
		{"text/plain chunked", "text/plain", `{"n":5}`, true, 415, refused},
		{"form", "application/x-www-form-urlencoded", `{"n":6}`, false, 415, refused},
		{"multipart", "multipart/form-data; boundary=x", `{"n":7}`, false, 415, refused},
		{"none", "", `{"n":8}`, false, 415, refused},
		{"bad type", "application/", `{"n":9}`, false, 415, refused},
		{"jsonp", "application/jsonp", `{"n":10}`, false, 415, refused},
		{"no body, no type", "", "", false, 422, ""},
		{"blank body, text", "text/plain", " \n", true, 422, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rd io.Reader = strings.NewReader(c.body)
			if c.chunked {
				rd = io.MultiReader(rd) // no length: chunked
			}
			req := httptest.NewRequest(http.MethodPost, "/", rd)
			if c.chunked {
				req.ContentLength = -1
			}
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			rec := httptest.NewRecorder()
			echo.ServeHTTP(rec, req)
			if rec.Code != c.status || (c.want != "" && strings.TrimSpace(rec.Body.String()) != c.want) {
				t.Fatalf("%d %s, want %d %s", rec.Code, rec.Body, c.status, c.want)
			}
		})
	}
}
