// The terminal page: xterm.js (vendor/, the pinned npm build) on the v1
// shell WebSocket, GET /v1/shell/ws, with its JSON frames.
//
// The session is ?session_id= (as GET /v1/shell/terminal-url builds the
// address): it is attached durably, with a snapshot of its screen, so a
// reload finds the same shell. Without one, the socket opens a new
// session and announces its id, which the page writes into its address.
//
// The API key: a browser WebSocket cannot send a header, so the key
// travels as ?api_key= on the socket's URL, the channel the daemon
// documents for browser WebSockets (aiod never logs a query). The page
// takes it from the address's fragment (#api_key=..., which a browser
// never sends to a server) and removes it from the address at once, or
// asks for it when the socket is refused. It is kept in memory only.
(function () {
  "use strict";

  const query = new URLSearchParams(location.search);
  const fragment = new URLSearchParams(location.hash.slice(1));
  let sessionID = query.get("session_id") || "";
  let key = fragment.get("api_key") || "";
  if (fragment.has("api_key")) {
    fragment.delete("api_key");
    const rest = fragment.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }

  const statusLine = document.getElementById("status");
  const keyForm = document.getElementById("key");
  const keyInput = document.getElementById("key-input");
  const term = new Terminal({ cursorBlink: true, scrollback: 5000, fontFamily: "monospace" });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("terminal"));
  fit.fit();
  // The emulator, for a test or a console to read its buffer.
  window.aiodTerminal = term;

  let ws = null;
  let ready = false; // the current socket reached its ready frame
  let refused = false; // the server answered with an error frame

  function status(text) { statusLine.textContent = text; }

  function socketURL() {
    // relative to the page, so a gateway's path prefix is kept
    const u = new URL("v1/shell/ws", location.href);
    u.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    u.search = "";
    if (sessionID) {
      u.searchParams.set("session_id", sessionID);
      u.searchParams.set("durable", "true");
      u.searchParams.set("restore", "true");
    }
    if (key) u.searchParams.set("api_key", key);
    return u.href;
  }

  function send(frame) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
  }

  function resize() { send({ type: "resize", cols: term.cols, rows: term.rows }); }

  function onFrame(ev) {
    let f;
    try {
      f = JSON.parse(ev.data);
    } catch {
      term.write(ev.data);
      return;
    }
    switch (f.type) {
      case "session_id":
        sessionID = f.data;
        query.set("session_id", sessionID);
        history.replaceState(null, "", location.pathname + "?" + query.toString() + location.hash);
        break;
      case "ready":
        ready = true;
        status("");
        resize();
        term.focus();
        break;
      case "output":
      case "restore_output":
        term.write(f.data);
        break;
      case "ping":
        send({ type: "pong", timestamp: f.timestamp });
        break;
      case "error":
        refused = true;
        status("The terminal refused: " + f.data);
        break;
    }
  }

  function connect() {
    ready = false;
    refused = false;
    status("Connecting…");
    ws = new WebSocket(socketURL());
    ws.onmessage = onFrame;
    ws.onclose = function () {
      ws = null;
      if (ready) {
        status("Disconnected: type to connect again.");
      } else if (!refused) {
        // refused before the upgrade: with no key, or a wrong one
        status("");
        keyForm.hidden = false;
        keyInput.focus();
      }
    };
  }

  keyForm.addEventListener("submit", function (ev) {
    ev.preventDefault();
    key = keyInput.value;
    keyInput.value = "";
    keyForm.hidden = true;
    connect();
  });
  term.onData(function (data) {
    if (!ws && ready) {
      connect();
      return;
    }
    send({ type: "input", data: data });
  });
  term.onResize(resize);
  window.addEventListener("resize", function () { fit.fit(); });
  connect();
})();
