package desktop

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// win builds a window of server with one text, named after its URI path.
func win(server, uri string, priority float64, fullscreen bool) Window {
	return Window{URI: uri, Server: server, Texts: []string{"T " + uri}, Priority: priority, Fullscreen: fullscreen}
}

// uris returns the URI part of each entry (up to the first "\n\n").
func uris(entries []string) []string {
	out := []string{}
	for _, e := range entries {
		u := e
		for i := 0; i+1 < len(e); i++ {
			if e[i] == '\n' && e[i+1] == '\n' {
				u = e[:i]
				break
			}
		}
		out = append(out, u)
	}
	return out
}

func TestOrganize(t *testing.T) {
	tests := []struct {
		name string
		ws   []Window
		opts Options
		want []string // URIs of the entries, in order
	}{
		{
			name: "no windows",
			want: []string{},
		},
		{
			name: "servers without history in bundle_id order",
			ws: []Window{
				win("zeta", "window://z/1", 0, false),
				win("alpha", "window://a/1", 0, false),
				win("Beta", "window://b/1", 0, false),
			},
			want: []string{"window://b/1", "window://a/1", "window://z/1"}, // byte order: "B" < "a"
		},
		{
			name: "history newest first, deduplicated, unseen servers after",
			ws: []Window{
				win("a", "window://a/1", 0, false),
				win("b", "window://b/1", 0, false),
				win("c", "window://c/1", 0, false),
				win("d", "window://d/1", 0, false),
			},
			opts: Options{History: []string{"c", "b", "c", "gone", "b"}},
			want: []string{"window://b/1", "window://c/1", "window://a/1", "window://d/1"},
		},
		{
			name: "history naming only servers without windows",
			ws: []Window{
				win("b", "window://b/1", 0, false),
				win("a", "window://a/1", 0, false),
			},
			opts: Options{History: []string{"x", "y"}},
			want: []string{"window://a/1", "window://b/1"},
		},
		{
			name: "history of a server whose windows are all filtered out",
			ws: []Window{
				win("a", "window://a/1", 0, false),
				{URI: "window://b/1", Server: "b"},
			},
			opts: Options{History: []string{"b"}},
			want: []string{"window://a/1"},
		},
		{
			name: "priority descending within a server",
			ws: []Window{
				win("s", "window://s/p1", 0.01, false),
				win("s", "window://s/p3", 0.03, false),
				win("s", "window://s/p2", 0.02, false),
			},
			want: []string{"window://s/p3", "window://s/p2", "window://s/p1"},
		},
		{
			name: "equal priorities keep input order",
			ws: []Window{
				win("s", "window://s/x", 0.5, false),
				win("s", "window://s/low", 0.1, false),
				win("s", "window://s/y", 0.5, false),
				win("s", "window://s/z", 0.5, false),
			},
			want: []string{"window://s/x", "window://s/y", "window://s/z", "window://s/low"},
		},
		{
			name: "priority compared only within a server",
			ws: []Window{
				win("a", "window://a/low", 0.1, false),
				win("b", "window://b/high", 1, false),
				win("a", "window://a/mid", 0.5, false),
			},
			want: []string{"window://a/mid", "window://a/low", "window://b/high"},
		},
		{
			name: "priority bounds are inclusive",
			ws: []Window{
				win("s", "window://s/zero", 0, false),
				win("s", "window://s/one", 1, false),
			},
			want: []string{"window://s/one", "window://s/zero"},
		},
		{
			name: "out-of-range and NaN priorities count as 0",
			ws: []Window{
				win("s", "window://s/big", 80, false),
				win("s", "window://s/neg", -1, false),
				win("s", "window://s/small", 0.2, false),
				win("s", "window://s/nan", math.NaN(), false),
				win("s", "window://s/inf", math.Inf(1), false),
				win("s", "window://s/zero", 0, false),
			},
			want: []string{"window://s/small", "window://s/big", "window://s/neg", "window://s/nan", "window://s/inf", "window://s/zero"},
		},
		{
			name: "fullscreen keeps only that window of its server",
			ws: []Window{
				win("s", "window://s/1", 0, false),
				win("s", "window://s/2", 0, true),
				win("s", "window://s/3", 0, false),
			},
			want: []string{"window://s/2"},
		},
		{
			name: "first fullscreen by list position, not by priority",
			ws: []Window{
				win("s", "window://s/top", 1, false),
				win("s", "window://s/fs-low", 0.1, true),
				win("s", "window://s/fs-high", 0.9, true),
			},
			want: []string{"window://s/fs-low"},
		},
		{
			name: "fullscreen is per server",
			ws: []Window{
				win("a", "window://a/1", 0, false),
				win("a", "window://a/fs", 0, true),
				win("b", "window://b/1", 0.3, false),
				win("b", "window://b/2", 0.7, false),
				win("c", "window://c/fs1", 0, true),
				win("c", "window://c/fs2", 0, true),
			},
			want: []string{"window://a/fs", "window://b/2", "window://b/1", "window://c/fs1"},
		},
		{
			name: "first fullscreen among interleaved servers",
			ws: []Window{
				win("b", "window://b/fs1", 0, true),
				win("a", "window://a/fs1", 0, true),
				win("a", "window://a/plain", 1, false),
				win("b", "window://b/fs2", 1, true),
				win("a", "window://a/fs2", 1, true),
			},
			want: []string{"window://a/fs1", "window://b/fs1"},
		},
		{
			name: "a filtered-out fullscreen window does not hide its server",
			ws: []Window{
				{URI: "window://s/fs", Server: "s", Fullscreen: true},
				{URI: "http://s/fs", Server: "s", Texts: []string{"x"}, Fullscreen: true},
				win("s", "window://s/1", 0, false),
			},
			want: []string{"window://s/1"},
		},
		{
			name: "grouped by bundle_id",
			ws: []Window{
				win("weather-1a2b", "window://com.example.w/main", 0, true),
				win("weather-9f8e", "window://com.example.w/main", 0, true),
			},
			want: []string{"window://com.example.w/main", "window://com.example.w/main"},
		},
		{
			name: "skip invalid URIs, empty and blob-only windows",
			ws: []Window{
				win("s", "http://example.com/x", 1, false),
				win("s", "window://", 1, false),
				win("s", "window:///nohost", 1, false),
				win("s", "window://user@h/x", 1, false),
				win("s", "file:///tmp/x", 1, false),
				{URI: "window://s/empty", Server: "s", Priority: 1},
				{URI: "window://s/emptyslice", Server: "s", Texts: []string{}, Priority: 1},
				win("s", "window://s/ok", 0, false),
			},
			want: []string{"window://s/ok"},
		},
		{
			name: "a URI with a query is valid and kept verbatim",
			ws: []Window{
				win("s", "window://s/a", 0.5, false),
				win("s", "window://s/b?priority=100&fullscreen=true", 0, false),
			},
			want: []string{"window://s/a", "window://s/b?priority=100&fullscreen=true"},
		},
		{
			name: "size nil means no cap",
			ws: []Window{
				win("a", "window://a/1", 0, false),
				win("b", "window://b/1", 0, false),
				win("b", "window://b/2", 0, false),
			},
			want: []string{"window://a/1", "window://b/1", "window://b/2"},
		},
		{
			name: "size 0 yields empty",
			ws:   []Window{win("a", "window://a/1", 0, false)},
			opts: Options{Size: ptr(0)},
			want: []string{},
		},
		{
			name: "negative size yields empty",
			ws:   []Window{win("a", "window://a/1", 0, false)},
			opts: Options{Size: ptr(-3)},
			want: []string{},
		},
		{
			name: "size caps across servers in server order",
			ws: []Window{
				win("a", "window://a/1", 0.2, false),
				win("a", "window://a/2", 0.9, false),
				win("b", "window://b/1", 0, false),
				win("c", "window://c/1", 0, false),
			},
			opts: Options{Size: ptr(3), History: []string{"b"}},
			want: []string{"window://b/1", "window://a/2", "window://a/1"},
		},
		{
			name: "size cap counts a fullscreen window once",
			ws: []Window{
				win("a", "window://a/fs", 0, true),
				win("a", "window://a/2", 0, false),
				win("b", "window://b/1", 0.1, false),
				win("b", "window://b/2", 0.2, false),
			},
			opts: Options{Size: ptr(2)},
			want: []string{"window://a/fs", "window://b/2"},
		},
		{
			name: "size above the window count",
			ws:   []Window{win("a", "window://a/1", 0, false)},
			opts: Options{Size: ptr(10)},
			want: []string{"window://a/1"},
		},
		{
			name: "size 1",
			ws: []Window{
				win("a", "window://a/1", 0, false),
				win("b", "window://b/1", 0, true),
			},
			opts: Options{Size: ptr(1), History: []string{"b"}},
			want: []string{"window://b/1"},
		},
		{
			name: "window filter picks the exact URI",
			ws: []Window{
				win("a", "window://a/main", 0, false),
				win("a", "window://a/main/sub", 1, false),
				win("b", "window://b/main", 0, false),
			},
			opts: Options{Window: ptr("window://a/main")},
			want: []string{"window://a/main"},
		},
		{
			name: "window filter is not a prefix match",
			ws:   []Window{win("a", "window://a/main/sub", 0, false)},
			opts: Options{Window: ptr("window://a/main")},
			want: []string{},
		},
		{
			name: "window filter is case- and encoding-sensitive",
			ws: []Window{
				win("a", "window://a/file%20name", 0, false),
				win("a", "window://A/x", 0, false),
			},
			opts: Options{Window: ptr("window://a/file name")},
			want: []string{},
		},
		{
			name: "window filter ignores other windows' query-stripped identity",
			ws:   []Window{win("a", "window://a/x?q=1", 0, false)},
			opts: Options{Window: ptr("window://a/x")},
			want: []string{},
		},
		{
			name: "window filter matches a URI with its query",
			ws:   []Window{win("a", "window://a/x?q=1", 0, false)},
			opts: Options{Window: ptr("window://a/x?q=1")},
			want: []string{"window://a/x?q=1"},
		},
		{
			name: "window filter keeps every duplicate across servers",
			ws: []Window{
				win("b", "window://dup/w", 0, false),
				win("a", "window://dup/w", 0, false),
				win("a", "window://dup/other", 1, false),
			},
			opts: Options{Window: ptr("window://dup/w"), History: []string{"b"}},
			want: []string{"window://dup/w", "window://dup/w"},
		},
		{
			name: "window filter without a match yields empty",
			ws:   []Window{win("a", "window://a/1", 0, false)},
			opts: Options{Window: ptr("window://nope")},
			want: []string{},
		},
		{
			name: "empty window filter matches nothing",
			ws:   []Window{win("a", "window://a/1", 0, false)},
			opts: Options{Window: ptr("")},
			want: []string{},
		},
		{
			name: "window filter applies before fullscreen",
			ws: []Window{
				win("a", "window://a/fs", 0, true),
				win("a", "window://a/plain", 0, false),
			},
			opts: Options{Window: ptr("window://a/plain")},
			want: []string{"window://a/plain"},
		},
		{
			name: "window filter hit on an empty window yields empty",
			ws:   []Window{{URI: "window://a/empty", Server: "a"}},
			opts: Options{Window: ptr("window://a/empty")},
			want: []string{},
		},
		{
			name: "window filter hit on an invalid URI yields empty",
			ws:   []Window{win("a", "window://", 0, false)},
			opts: Options{Window: ptr("window://")},
			want: []string{},
		},
		{
			name: "window filter hit with size 0 yields empty",
			ws:   []Window{win("a", "window://a/1", 0, false)},
			opts: Options{Window: ptr("window://a/1"), Size: ptr(0)},
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.ws)
			got := Organize(tt.ws, tt.opts)
			if got == nil {
				t.Fatal("Organize returned nil")
			}
			if g := uris(got); !slices.Equal(g, tt.want) {
				t.Errorf("Organize = %q, want %q", g, tt.want)
			}
			for i, e := range got {
				// Each entry is the Entry of some input window.
				found := false
				for _, w := range tt.ws {
					if Entry(w) == e {
						found = true
					}
				}
				if !found {
					t.Errorf("entry %d %q is no window's Entry", i, e)
				}
			}
			for i := range before {
				if before[i].URI != tt.ws[i].URI || before[i].Server != tt.ws[i].Server {
					t.Errorf("Organize reordered its input at %d", i)
				}
			}
		})
	}
}

// TestOrganizeSpecExample reproduces the specification's two-window answer.
func TestOrganizeSpecExample(t *testing.T) {
	ws := []Window{
		{URI: "window://com.example.logger", Server: "logger", Texts: []string{"[2026-02-14 10:30:01] INFO: 操作完成"}},
		{URI: "window://com.example.browser/main", Server: "browser", Texts: []string{"<html>当前页面内容...</html>"}, Priority: 0.8, Fullscreen: true},
		{URI: "window://com.example.browser/side", Server: "browser", Texts: []string{"side"}, Priority: 1},
	}
	got := Organize(ws, Options{History: []string{"logger", "browser"}})
	want := []string{
		"window://com.example.browser/main\n\n<html>当前页面内容...</html>",
		"window://com.example.logger\n\n[2026-02-14 10:30:01] INFO: 操作完成",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Organize = %q, want %q", got, want)
	}
}

func TestOrganizeEmptyEncodesAsArray(t *testing.T) {
	for _, opts := range []Options{{}, {Size: ptr(0)}, {Window: ptr("window://none")}} {
		b, err := json.Marshal(Organize(nil, opts))
		if err != nil || string(b) != "[]" {
			t.Errorf("Organize(nil, %+v) encodes as %s, %v; want []", opts, b, err)
		}
	}
}

func TestEntry(t *testing.T) {
	tests := []struct {
		name string
		w    Window
		want string
	}{
		{"one text", Window{URI: "window://h/a", Texts: []string{"hello"}}, "window://h/a\n\nhello"},
		{"texts joined", Window{URI: "window://h/a", Texts: []string{"one", "two", "three"}}, "window://h/a\n\none\n\ntwo\n\nthree"},
		{"no texts", Window{URI: "window://h/a"}, "window://h/a"},
		{"only empty texts", Window{URI: "window://h/a", Texts: []string{"", ""}}, "window://h/a"},
		{"empty texts skipped", Window{URI: "window://h/a", Texts: []string{"", "x", "", "y"}}, "window://h/a\n\nx\n\ny"},
		{"text kept verbatim", Window{URI: "window://h/a", Texts: []string{"  line\n\n", "\n"}}, "window://h/a\n\n  line\n\n\n\n\n"},
		{"URI verbatim", Window{URI: "WINDOW://h/a%2fb?q=1", Texts: []string{"t"}}, "WINDOW://h/a%2fb?q=1\n\nt"},
	}
	for _, tt := range tests {
		if got := Entry(tt.w); got != tt.want {
			t.Errorf("%s: Entry = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestOrganizeWindowWithOnlyEmptyText covers the one way to an entry that
// is the URI alone: the window has text contents, all empty.
func TestOrganizeWindowWithOnlyEmptyText(t *testing.T) {
	ws := []Window{{URI: "window://h/blank", Server: "s", Texts: []string{""}}}
	got := Organize(ws, Options{})
	if want := []string{"window://h/blank"}; !slices.Equal(got, want) {
		t.Errorf("Organize = %q, want %q", got, want)
	}
}
