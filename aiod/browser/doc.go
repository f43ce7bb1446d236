// Package browser is aiod's browser plane: /v1/browser/* and
// /v2/browser/* (the same handlers), served by attaching to a Chromium
// over its DevTools protocol (CDP) at BROWSER_REMOTE_DEBUGGING_HOST:PORT.
// The plane never starts a browser (package launch does, for
// aiod --browser); it lists tabs, drives pages (navigate, evaluate,
// snapshot with stable refs, click, fill, upload), takes screenshots,
// manages cookies, keeps a bounded ring of network requests and relays
// raw CDP calls. Below a ready browser only info and network/requests
// answer; every other route is the documented 503.
//
// # Connection
//
// Every connection to the DevTools endpoint, HTTP (/json/*) and
// WebSocket, goes through Config.Dial: under aiod --browser the
// in-process connection of the launcher's CDP multiplexer (Chromium has
// no port, only its DevTools pipe); for a browser the user runs, the
// daemon's dialer. The plane keeps
// one WebSocket to the browser target, opened on first use, with one
// flattened session per tab it has driven (Target.attachToTarget
// flatten:true), cached until the tab closes. When the browser dies the
// connection ends and the next request connects again (a restarted
// browser on the same port is picked up). Close detaches the sessions;
// tabs are never closed by the plane except by DELETE tabs/{id}.
//
// The default tab is the first page of /json/list (Chrome lists new and
// activated tabs first); tab lists keep type "page" only. A page
// controls its own URL and title, so /json/list is read as a stream
// keeping id, title, type and url, with title and url cut at 64 KiB and
// at most 64 MiB read; when it still cannot be read, Target.getTargets
// on the WebSocket answers (Chrome's creation order then). A tab named
// by id (tab_id, tabs/{id}) is checked with Target.getTargetInfo alone,
// and DELETE tabs/{id} is Target.closeTarget, so neither reads the list. A screenshot
// is base64-decoded from the CDP message straight into the answer.
//
// # Choices where the published daemon is silent
//
//   - info with the DevTools endpoint down: 200, success false, the
//     failure in message ("browser: read version: connection refused"),
//     data null, the usual hint. v1 info has vnc_url "" (no VNC); v2 has
//     no vnc_url key; cdp_ui_url is null. viewport is the window of the
//     first tab (Browser.getWindowForTarget), page_viewport the largest
//     innerWidth x innerHeight of the first 8 tabs.
//   - Body not JSON: 400. Missing required field or a wrong type: the
//     422 validation body. Unsupported enum value (format, history,
//     wait_until), quality over 100, an unsupported resolution, relative
//     upload paths: 422 validation body naming the field.
//   - navigate: url wins over history; neither is 400; an empty url is
//     422; timeout is
//     (0, 300] s; a navigation that fails at the network level (refused
//     connection) is a success and the tab shows chrome-error://. history
//     with no entry in that direction is 400. data is {url, frame_id}
//     with url the requested (or history entry's) URL.
//   - evaluate: await_promise false by default; a throw is 200 with
//     value null and exception the error's description ("Error: x\n at
//     ..."), or "Uncaught <value>" for a thrown non-error. Values JSON
//     cannot hold (NaN, Infinity, -0, BigInt) come as their text.
//   - JavaScript dialogs: every page session the plane attaches has Page
//     enabled, and a dialog that opens in it is answered at once, as
//     browser automation usually does (Playwright dismisses dialogs by
//     default): alert, confirm and prompt are dismissed (confirm is
//     false, prompt null) and beforeunload is accepted, so the
//     navigation that raised it proceeds. Each is logged at debug. A
//     dialog left open would hold the page's script: the evaluate that
//     raised it, and every later call on the tab, would time out.
//   - A crashed tab (Inspector.targetCrashed, enabled on every page
//     session): its pending calls and every later one fail at once with
//     503 "browser: the tab crashed" and a hint to close it or navigate
//     it again. Only navigate (Page.navigate, Page.reload) is still sent
//     to it: Chrome loads the page in a new renderer on the same session,
//     and once it accepts the navigation the tab works again. Page
//     lifecycle events are enabled when a session is attached, since a
//     crashed tab answers no enable until it loads again.
//   - Answer size: a CDP answer is bounded by its call, 32 MiB for every
//     call but a screenshot (256 MiB; a full-page PNG of a 12000 px
//     noisy page is 46 MB). Past it the call alone fails with 413
//     "browser: the result is larger than 32 MiB" (evaluate
//     "'x'.repeat(5e7)", a raw cdp call); the message is read to its
//     end and thrown away, so the connection and other calls carry on.
//     Events past 32 MiB are dropped.
//   - snapshot: at most 2000 nodes and 48 levels; the root says
//     truncated:true when cut. Ignored nodes, unnamed generic nodes and
//     inline text boxes give their place to their children. Refs
//     ("e<backendDOMNodeId>") are on interactive roles (button, link,
//     textbox, searchbox, checkbox, radio, combobox, listbox, option,
//     menuitem*, slider, spinbutton, switch, tab, treeitem).
//     interactive_only answers the root with the interactive nodes as
//     its flat list of children, in document order.
//   - click: ref wins over selector. ref-click scrolls the node into view
//     and sends a real mouse move, press and release at the centre of
//     its content box; selector-click scrolls the first match into view
//     and calls its DOM click() (no pointer events). An invalid selector
//     is 400, no match 404, a stale ref 503 (CDP's "No node with given
//     id found").
//   - fill: the element's native value setter, then input and change
//     (bubbling); contenteditable gets textContent; anything else is 422.
//   - upload: DOM.setFileInputFiles; data {files}.
//   - config: {} or resolution null answers {resolution:null}, no change.
//   - cookies: POST answers {count} (cookies set); a domain without a
//     path gets path "/". Fields CDP types are checked first (422 on
//     body.cookies): url an absolute http(s) URL, expires a number,
//     secure and httpOnly booleans, sameSite Strict, Lax or None. GET answers a list of CDP Network.Cookie
//     (?url= asks Chrome which cookies that URL would get; ?domain= is a
//     substring match on the cookie's domain). DELETE answers {count}
//     (cookies removed); name plus url or domain, or all=true; neither
//     is 400.
//   - network/requests: data is a list, newest first, at most 300
//     entries, each {id, tab_id, url, method, resource_type, status,
//     mime_type, failed, error_text, timestamp (s since the epoch)}.
//     A redirect is one entry per hop: the hop redirected from has the
//     redirect's status (302), the next hop's id is the request id plus
//     "#" and its URL. Capture starts at the first call, for every open tab and every tab
//     the plane drives afterwards. With no browser it answers what was
//     captured (an empty list).
package browser
