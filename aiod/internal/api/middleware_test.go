package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEnvelopeErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /known", func(w http.ResponseWriter, _ *http.Request) { OK(w, "hi") })
	mux.HandleFunc("GET /gone", func(w http.ResponseWriter, _ *http.Request) {
		Fail(w, http.StatusNotFound, "no such thing", nil) // a handler's own 404 stays
	})
	h := EnvelopeErrors(mux)
	tests := []struct {
		method, path string
		status       int
		body, allow  string
	}{
		{"GET", "/known", 200, `{"success":true,"message":"Operation successful","data":"hi","hint":null}`, ""},
		{"GET", "/nope", 404, `{"success":false,"message":"Not Found","data":null,"hint":null}`, ""},
		{"POST", "/known", 405, `{"success":false,"message":"Method Not Allowed","data":null,"hint":null}`, "GET, HEAD"},
		{"GET", "/gone", 404, `{"success":false,"message":"no such thing","data":null,"hint":null}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status || strings.TrimSpace(rec.Body.String()) != tc.body || rec.Header().Get("Allow") != tc.allow {
				t.Errorf("%d %s (Allow %q), want %d %s (Allow %q)", rec.Code, rec.Body, rec.Header().Get("Allow"), tc.status, tc.body, tc.allow)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func TestStatusWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want int
	}{
		{"implicit", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }, 200},
		{"explicit", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(418) }, 418},
		{"through ResponseController", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(201)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush through the writer: %v", err)
			}
		}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := NewStatusWriter(httptest.NewRecorder())
			tc.h(sw, httptest.NewRequest("GET", "/", nil))
			if sw.Status != tc.want {
				t.Errorf("Status = %d, want %d", sw.Status, tc.want)
			}
		})
	}
}
