package pty

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// web is the terminal page (GET /terminal) and its files: index.html,
// terminal.js and terminal.css are ours; vendor/ holds the terminal
// emulator, copied from the pinned npm packages @xterm/xterm and
// @xterm/addon-fit by scripts/xterm.sh with their LICENSE files and
// SHA256SUMS (TestVendoredXterm checks the embedded copies against it).
//
//go:embed web
var web embed.FS

// webFiles is web rooted at the page's folder.
var webFiles, _ = fs.Sub(web, "web")

// pageHeaders are the terminal page's answer headers: its scripts and
// styles come from the daemon only (xterm.js adds <style> elements of its
// own, so inline styles are allowed), it opens no connection but its own
// origin's, and it sends no Referer (the page's address names the
// session).
var pageHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
		"connect-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'",
	"Referrer-Policy":        "no-referrer",
	"X-Content-Type-Options": "nosniff",
	"Cache-Control":          "no-cache",
}

// mountPage registers GET /terminal (the page GET /v1/shell/terminal-url
// points at) and GET /terminal/{file}. They hold no secret and start
// nothing: the page reaches a shell only through the v1 shell
// WebSocket, which asks for the key as every route does.
func (p *Plane) mountPage(mux *http.ServeMux) {
	mux.HandleFunc("GET /terminal", func(w http.ResponseWriter, r *http.Request) { serveWeb(w, r, "index.html") })
	mux.HandleFunc("GET /terminal/{file...}", func(w http.ResponseWriter, r *http.Request) {
		serveWeb(w, r, r.PathValue("file"))
	})
}

// serveWeb answers one file of the page, or 404 for anything that is
// not a file of it (a folder, a path that is not clean).
func serveWeb(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" || !fs.ValidPath(name) || path.Clean(name) != name || strings.HasSuffix(name, "/") {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(webFiles, name)
	if err != nil { // absent, or a folder
		http.NotFound(w, r)
		return
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "text/plain; charset=utf-8"
	}
	h := w.Header()
	for k, v := range pageHeaders {
		h.Set(k, v)
	}
	h.Set("Content-Type", ctype)
	_, _ = w.Write(b)
}
