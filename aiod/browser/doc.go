// Package browser is aiod's browser plane: /v1/browser/* and
// /v2/browser/* (the same handlers), served by attaching to a Chromium
// over its DevTools protocol (CDP) at BROWSER_REMOTE_DEBUGGING_HOST:PORT.
// The plane never starts a browser (package launch does, for
// aiod --browser); it lists tabs, drives pages (navigate, evaluate,
// snapshot with stable refs, click, fill, upload), takes screenshots,
// manages cookies, keeps a bounded ring of network requests and relays
// raw CDP calls. Below a ready browser only info and network/requests
// answer; every other route is the documented 503.
package browser
