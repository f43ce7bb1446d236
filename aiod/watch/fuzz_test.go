package watch

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
)

// FuzzParseEventID: any Last-Event-ID parses or is ignored, never panics,
// and what parses round-trips.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"w:1", "1", "", ":", "w:", "w::3", "w:18446744073709551615", "\x00", "w:+1", " 9 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seq, ok := parseEventID(s, "w")
		if ok {
			if again, ok2 := parseEventID("w:"+strconv.FormatUint(seq, 10), "w"); !ok2 || again != seq {
				t.Fatalf("%q → %d does not round-trip", s, seq)
			}
		}
	})
}

// FuzzCursorQuery: any poll or stream query string on an unknown
// watcher answers a JSON refusal (422, 400 or 404), never a panic or a
// stream.
func FuzzCursorQuery(f *testing.F) {
	for _, s := range []string{"cursor=1", "cursor=-1", "limit=0&timeout=99", "cursor=%zz", "cursor=1e3", "cursor=18446744073709551616"} {
		f.Add(s)
	}
	p := New(Config{})
	mux := http.NewServeMux()
	p.Mount(mux)
	f.Fuzz(func(t *testing.T, q string) {
		for _, route := range []string{"/v2/watch/none/poll", "/v2/watch/none/events"} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL = &url.URL{Path: route, RawQuery: q}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s?%s: %d %s", route, q, rec.Code, rec.Header().Get("Content-Type"))
			}
		}
	})
}
