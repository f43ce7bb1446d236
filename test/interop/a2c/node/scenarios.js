#!/usr/bin/env node
// Black-box interop scenarios for the a2c signalling server, driven by the
// official JavaScript client (socket.io-client 4.8.4) and Node's http.
//
// Run: node test/interop/a2c/node/scenarios.js [--only NAME[,NAME...]] [--list]
//
// Environment:
//   A2C_VERSION            protocol version of every server (default 0.4.0);
//                          clients speak it and every version-dependent
//                          expectation derives from it
//   A2C_URL                server without auth (required)
//   A2C_AUTH_URL           server that requires A2C_TOKEN_VALUE (x-api-key)
//   A2C_TOKEN_VALUE        the token A2C_AUTH_URL expects
//   A2C_RELAY_TIMEOUT_URL  server started with --relay-timeout 1s (optional)
//   A2C_TRANSPORTS         transports of every client that does not name its
//                          own, comma-separated: "polling,websocket" (the
//                          default: open on polling, then upgrade), "polling"
//                          or "websocket"
//   A2C_COMPUTER_OFFICE, A2C_COMPUTER  optional: a real a2c Computer alone
//                          in that office, with --landing-root A2C_LANDING_ROOT,
//                          --skills A2C_SKILLS_DIR and the toolsrv MCP server
//                          as bundle "fx" (test/interop/a2c/scenario_computer_test.go)
//   A2C_NOROOT_OFFICE, A2C_NOROOT_COMPUTER  optional: a Computer without a
//                          landing root
//   A2C_PLACEMENT          optional (a cluster of servers): where each socket
//                          connects, as JSON {"<a server URL above>": {"agent":
//                          [SLOT...], "computer": [SLOT...]}}, SLOT = {"url": U,
//                          "source": "127.0.0.x" (optional: the local address
//                          the socket's connections come from, which a load
//                          balancer hashing on the client address routes by)}.
//                          A scenario's Agents take the agent slots, its
//                          Computers the computer slots, each in turn; a socket
//                          connected before its join counts as an Agent. Unset:
//                          every socket connects to the server URL itself.
//   A2C_VERBOSE=1          per-scenario durations on stderr
//   A2C_TRACE=1            per-request latencies on stderr
//
// Output: one "PASS <name>" or "FAIL <name>: <reason>" line per scenario
// ("SKIP <name>: <reason>" when a server it needs is not configured), then
// "N passed, M failed". The exit code is 0 iff no scenario failed.
"use strict";

const assert = require("assert");
const crypto = require("crypto");
const fs = require("fs");
const http = require("http");
const path = require("path");
const { io } = require(path.join(__dirname, "node_modules", "socket.io-client"));

const PROTOCOL = process.env.A2C_VERSION || "0.4.0";
const [MAJOR, MINOR] = PROTOCOL.split(".").map(Number);
// A patch of the server's MAJOR.MINOR (admitted) and the other supported
// minor (refused both ways: 0.3.x at a 0.4 server, 0.4.x at a 0.3 one).
const PATCH_VERSION = `${MAJOR}.${MINOR}.7`;
const OTHER_VERSION = MAJOR === 0 && MINOR >= 4 ? "0.3.0" : "0.4.0";
const V04 = MAJOR > 0 || MINOR >= 4; // client:put_blob, A2CSkillRef.tags, server tool tags
const NS = "/smcp";
const EIO_PATH = "/socket.io/";
const SCENARIO_TIMEOUT_MS = 15000;
const QUIET_MS = 500; // how long "receives nothing" is watched

const URL_PLAIN = trimSlash(process.env.A2C_URL || "");
const URL_AUTH = trimSlash(process.env.A2C_AUTH_URL || "");
const TOKEN = process.env.A2C_TOKEN_VALUE || "";
const URL_RELAY = trimSlash(process.env.A2C_RELAY_TIMEOUT_URL || "");
// Scenarios about one transport name theirs; all others use these, so that
// the same scenarios run over polling only, WebSocket only and the upgrade.
const TRANSPORTS = (process.env.A2C_TRANSPORTS || "polling,websocket")
  .split(",")
  .map((t) => t.trim())
  .filter((t) => t !== "");

function trimSlash(u) {
  return u.replace(/\/+$/, "");
}

// PLACEMENT spreads the sockets over the nodes of a cluster (A2C_PLACEMENT).
// A source address is bound with an http.Agent whose connections come from
// it: engine.io-client hands its "agent" option to both transports (the
// XMLHttpRequest of long-polling and the ws WebSocket).
const PLACEMENT = Object.fromEntries(
  Object.entries(JSON.parse(process.env.A2C_PLACEMENT || "{}")).map(([k, v]) => [trimSlash(k), v]),
);

// ---------------------------------------------------------------- helpers

class Skip extends Error {}

function short(v) {
  let s;
  try {
    s = typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v, bufferReplacer);
  } catch (_) {
    s = String(v);
  }
  if (s === undefined) s = String(v);
  return s.length > 160 ? s.slice(0, 157) + "..." : s;
}

function bufferReplacer(_k, v) {
  if (v && v.type === "Buffer" && Array.isArray(v.data)) return `<Buffer ${v.data.length} bytes>`;
  return v;
}

function fail(msg) {
  throw new Error(msg);
}

// eq asserts deep strict equality with a one-line message.
function eq(actual, expected, what) {
  try {
    assert.deepStrictEqual(actual, expected);
  } catch (_) {
    fail(`${what}: got ${short(actual)}, want ${short(expected)}`);
  }
}

function ok(cond, what) {
  if (!cond) fail(what);
}

function isObj(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !Buffer.isBuffer(v);
}

function assertError(v, code, what) {
  ok(isObj(v), `${what}: want ErrorPayload {code:${code}}, got ${short(v)}`);
  eq(v.code, code, `${what}: code (payload ${short(v)})`);
  ok(typeof v.message === "string" && v.message.length > 0, `${what}: message must be a non-empty string, got ${short(v)}`);
  ok(!("error" in v), `${what}: ErrorPayload must be flat, got ${short(v)}`);
}

function trace(msg) {
  if (process.env.A2C_TRACE) console.error(`    [trace] ${msg}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const uuid = () => crypto.randomUUID();

// withTimeout races p against a timer that rejects with what.
function withTimeout(p, ms, what) {
  let t;
  const timer = new Promise((_, rej) => {
    t = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([p, timer]).finally(() => clearTimeout(t));
}

// Ctx is one scenario's resources; every socket it opens is closed after.
class Ctx {
  constructor() {
    this.sockets = [];
    this.requests = [];
    this.placed = new Map(); // "role url" -> sockets placed so far
  }

  // place is where a socket of role connects for the server at url: the
  // server itself unless A2C_PLACEMENT says otherwise.
  place(url, role) {
    const slots = (PLACEMENT[trimSlash(url)] || {})[role];
    if (!slots || slots.length === 0) return { url };
    const key = `${role} ${url}`;
    const i = this.placed.get(key) || 0;
    this.placed.set(key, i + 1);
    const slot = slots[i % slots.length];
    return { url: trimSlash(slot.url), source: slot.source };
  }

  // client creates a socket and starts recording every event it gets.
  client(url, opts = {}) {
    const o = {
      reconnection: false,
      forceNew: true,
      timeout: 5000,
      transports: opts.transports || TRANSPORTS,
    };
    const placed = this.place(url, opts.role || "agent");
    url = placed.url;
    if (placed.source) o.agent = new http.Agent({ localAddress: placed.source });
    if (opts.version !== null) o.query = { a2c_version: opts.version || PROTOCOL };
    if (opts.auth !== undefined) o.auth = opts.auth;
    if (opts.extraHeaders !== undefined) o.extraHeaders = opts.extraHeaders;
    const s = io(url + NS, o);
    this.sockets.push(s);
    s.events = [];
    s.waiters = [];
    s.onAny((name, ...args) => {
      const ev = { name, args };
      const i = s.waiters.findIndex((w) => w.name === name);
      if (i >= 0) {
        const [w] = s.waiters.splice(i, 1);
        w.resolve(args[0]);
      } else {
        s.events.push(ev);
      }
    });
    return s;
  }

  // connect resolves with a connected socket or rejects with the
  // connect_error error (err.connectError = true).
  async connect(url, opts = {}) {
    const s = this.client(url, opts);
    const t0 = Date.now();
    await waitConnect(s, opts.ms || 5000);
    trace(`connect ${Date.now() - t0} ms`);
    return s;
  }

  // member connects and joins an office; it fails the scenario unless the
  // join is acknowledged (true, null).
  async member(url, role, name, office, opts = {}) {
    const s = await this.connect(url, { ...opts, role });
    const [okv, msg] = await join(s, role, name, office);
    eq([okv, msg], [true, null], `join ${role} ${name}`);
    s.memberName = name;
    return s;
  }

  close() {
    for (const s of this.sockets) {
      try {
        s.offAny();
        s.close();
      } catch (_) {
        /* ignore */
      }
    }
    for (const r of this.requests) {
      try {
        r.destroy();
      } catch (_) {
        /* ignore */
      }
    }
  }
}

function waitConnect(s, ms) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      cleanup();
      reject(new Error(`connect timed out after ${ms} ms`));
    }, ms);
    const onConnect = () => {
      cleanup();
      resolve(s);
    };
    const onError = (err) => {
      cleanup();
      // engine.io-client aborts the XHR right after this event, which
      // empties responseText: keep a copy now.
      if (err && err.context && typeof err.context.responseText === "string") {
        err.responseText = err.context.responseText;
      }
      const e = err instanceof Error ? err : new Error(String(err));
      e.connectError = true;
      e.original = err;
      reject(e);
    };
    function cleanup() {
      clearTimeout(t);
      s.off("connect", onConnect);
      s.off("connect_error", onError);
    }
    if (s.connected) return onConnect();
    s.on("connect", onConnect);
    s.on("connect_error", onError);
  });
}

// connectFails resolves with the connect_error error; a connect is a failure.
async function connectFails(ctx, url, opts, what) {
  try {
    const s = await ctx.connect(url, opts);
    s.close();
  } catch (err) {
    if (err.connectError) return err.original;
    throw err;
  }
  fail(`${what}: connected, want connect_error`);
}

// join sends server:join_office and resolves with both ack values.
function join(s, role, name, office, ms = 3000) {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ack to server:join_office (${role} ${name}) within ${ms} ms`)), ms);
    s.emit("server:join_office", { role, name, office_id: office }, (...args) => {
      clearTimeout(t);
      trace(`join ${role} ${name} ${Date.now() - t0} ms (${s.io.engine.transport.name})`);
      resolve(args);
    });
  });
}

function leave(s, office, ms = 3000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ack to server:leave_office within ${ms} ms`)), ms);
    s.emit("server:leave_office", { office_id: office }, (...args) => {
      clearTimeout(t);
      resolve(args);
    });
  });
}

// request emits an event and resolves with the first ack value.
async function request(s, event, payload, ms = 5000) {
  const t0 = Date.now();
  try {
    return await s.timeout(ms).emitWithAck(event, payload);
  } catch (err) {
    throw new Error(`no ack to ${event} within ${ms} ms (${err.message})`);
  } finally {
    trace(`${event} ${Date.now() - t0} ms`);
  }
}

// next resolves with the payload of the next event called name on s
// (already received or still to come).
function next(s, name, ms = 3000) {
  const i = s.events.findIndex((e) => e.name === name);
  if (i >= 0) {
    const [e] = s.events.splice(i, 1);
    return Promise.resolve(e.args[0]);
  }
  return new Promise((resolve, reject) => {
    const w = { name, resolve };
    const t = setTimeout(() => {
      const j = s.waiters.indexOf(w);
      if (j >= 0) s.waiters.splice(j, 1);
      reject(new Error(`${s.memberName || "socket"} did not receive ${name} within ${ms} ms`));
    }, ms);
    w.resolve = (v) => {
      clearTimeout(t);
      resolve(v);
    };
    s.waiters.push(w);
  });
}

// quiet fails if any of the sockets has received (or receives within ms)
// an event whose name matches.
async function quiet(sockets, match, ms = QUIET_MS) {
  await sleep(ms);
  for (const s of sockets) {
    const got = s.events.filter((e) => (typeof match === "string" ? e.name === match : match(e.name)));
    if (got.length) fail(`${s.memberName || "socket"} unexpectedly received ${got[0].name} ${short(got[0].args[0])}`);
  }
}

// rawHTTP does one HTTP GET and resolves with status, headers and body;
// an 'upgrade' answer rejects.
function rawHTTP(ctx, url, headers = {}, ms = 5000) {
  return withTimeout(
    new Promise((resolve, reject) => {
      const req = http.request(url, { method: "GET", headers, agent: false });
      ctx.requests.push(req);
      req.on("response", (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("upgrade", (res, sock) => {
        sock.destroy();
        reject(new Error(`server upgraded the connection (HTTP ${res.statusCode}), want HTTP 400`));
      });
      req.on("error", reject);
      req.end();
    }),
    ms,
    `HTTP GET ${url}`,
  );
}

function eioURL(base, transport, version) {
  let u = `${base}${EIO_PATH}?EIO=4&transport=${transport}`;
  if (version !== undefined) u += `&a2c_version=${encodeURIComponent(version)}`;
  return u;
}

const mismatchBody = (client) =>
  `{"code":4008,"message":"Protocol version mismatch","server_version":"${PROTOCOL}","client_version":"${client}",` +
  `"min_supported":"${MAJOR}.${MINOR}.0","max_supported":"${MAJOR}.${MINOR}.999"}`;

// responseText is the body of the HTTP answer that refused a polling
// handshake, as socket.io-client exposes it (err.context is the XHR).
function responseText(err) {
  return err && typeof err.responseText === "string" ? err.responseText : undefined;
}

// A plain office: an Agent "A" and the given Computers, each answering
// client:* events with handlers[event] if given.
async function office(ctx, url, computers = ["C1"], opts = {}) {
  const id = uuid();
  const comps = {};
  for (const name of computers) comps[name] = await ctx.member(url, "computer", name, id, opts);
  const agent = await ctx.member(url, "agent", opts.agentName || "A", id, opts);
  // drop the enter notifications of the setup
  for (const c of Object.values(comps)) c.events = c.events.filter((e) => e.name !== "notify:enter_office");
  return { id, agent, comps };
}

function toolCall(computer, extra = {}) {
  return {
    agent: "A",
    req_id: uuid(),
    computer,
    tool_name: "b__echo",
    params: { text: "hi" },
    timeout: 10,
    ...extra,
  };
}

function requireURL(u, name) {
  if (!u) throw new Skip(`${name} not set`);
  return u;
}

// ---------------------------------------------------------------- scenarios

const scenarios = [];
function scenario(name, fn) {
  scenarios.push({ name, fn });
}

// 1. Version gate

scenario("version_missing", async (ctx) => {
  const want = '{"code":400,"message":"Missing a2c_version query parameter"}';
  const err = await connectFails(ctx, URL_PLAIN, { version: null, transports: ["polling"] }, "no a2c_version");
  const text = responseText(err);
  if (text !== undefined) {
    eq(text, want, "connect_error responseText");
    eq(err.description, 400, "connect_error status");
  }
  const r = await rawHTTP(ctx, eioURL(URL_PLAIN, "polling"));
  eq(r.status, 400, "raw GET status");
  eq(r.body.toString("utf8"), want, "raw GET body");
  eq(JSON.parse(r.body.toString("utf8")), { code: 400, message: "Missing a2c_version query parameter" }, "body JSON");
});

scenario("version_invalid", async (ctx) => {
  const err = await connectFails(ctx, URL_PLAIN, { version: "abc", transports: ["polling"] }, "a2c_version=abc");
  const text = responseText(err);
  ok(text !== undefined, `connect_error exposes no responseText (${short(err && err.message)})`);
  let body;
  try {
    body = JSON.parse(text);
  } catch (_) {
    fail(`400 body is not JSON: ${short(text)}`);
  }
  eq(Object.keys(body).sort(), ["code", "message"], "body fields");
  eq(body.code, 400, "body code");
  ok(typeof body.message === "string" && body.message.startsWith("Invalid a2c_version:"), `message ${short(body.message)} must start with "Invalid a2c_version:"`);
  eq(err.description, 400, "connect_error status");
});

// An old minor, and the other supported minor (0.3 at a 0.4 server, 0.4 at
// a 0.3 server): each refused with the 4008 body naming this server's range.
const MISMATCHES = ["0.2.0", OTHER_VERSION];

scenario("version_mismatch_polling", async (ctx) => {
  for (const client of MISMATCHES) {
    const want = mismatchBody(client);
    const err = await connectFails(ctx, URL_PLAIN, { version: client, transports: ["polling"] }, `a2c_version=${client}`);
    const text = responseText(err);
    ok(text !== undefined, `connect_error exposes no responseText (${short(err && err.message)})`);
    eq(text, want, `connect_error responseText (${client})`);
    eq(err.description, 400, `connect_error status (${client})`);
    const r = await rawHTTP(ctx, eioURL(URL_PLAIN, "polling", client));
    eq(r.status, 400, `raw GET status (${client})`);
    eq(r.headers["x-a2c-error-code"], "4008", `X-A2C-Error-Code header (${client})`);
    ok(/^application\/json\b/.test(r.headers["content-type"] || ""), `Content-Type ${short(r.headers["content-type"])}, want application/json`);
    eq(r.body.toString("utf8"), want, `raw GET body (${client})`);
  }
});

scenario("version_mismatch_websocket_only", async (ctx) => {
  for (const client of MISMATCHES) {
    const err = await connectFails(ctx, URL_PLAIN, { version: client, transports: ["websocket"] }, `websocket-only a2c_version=${client}`);
    ok(err instanceof Error, `connect_error argument is not an Error: ${short(err)}`);
    // ws reports the refused upgrade as "Unexpected server response: 400"
    const inner = err.description && err.description.error;
    if (inner && typeof inner.message === "string") {
      ok(/\b400\b/.test(inner.message), `websocket error ${short(inner.message)}, want an HTTP 400 refusal`);
    }
  }
});

scenario("version_mismatch_ws_upgrade_raw", async (ctx) => {
  for (const client of MISMATCHES) {
    const polling = await rawHTTP(ctx, eioURL(URL_PLAIN, "polling", client));
    const r = await rawHTTP(ctx, eioURL(URL_PLAIN, "websocket", client), {
      Connection: "Upgrade",
      Upgrade: "websocket",
      "Sec-WebSocket-Version": "13",
      "Sec-WebSocket-Key": crypto.randomBytes(16).toString("base64"),
    });
    eq(r.status, 400, `upgrade GET status (${client})`);
    eq(r.headers["x-a2c-error-code"], "4008", `X-A2C-Error-Code header (${client})`);
    eq(r.body.toString("utf8"), mismatchBody(client), `upgrade GET body (${client})`);
    ok(r.body.equals(polling.body), `upgrade body differs from the polling body: ${short(r.body.toString())} vs ${short(polling.body.toString())}`);
  }
});

scenario("version_patch_upgrade", async (ctx) => {
  const s = await ctx.connect(URL_PLAIN, { version: PATCH_VERSION, transports: ["polling", "websocket"] });
  if (s.io.engine.transport.name !== "websocket") {
    await withTimeout(new Promise((r) => s.io.engine.once("upgrade", r)), 5000, "transport upgrade to websocket");
  }
  eq(s.io.engine.transport.name, "websocket", "transport after upgrade");
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join after upgrade");
});

scenario("version_patch_websocket_only", async (ctx) => {
  const s = await ctx.connect(URL_PLAIN, { version: PATCH_VERSION, transports: ["websocket"] });
  eq(s.io.engine.transport.name, "websocket", "transport");
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join");
});

scenario("version_patch_polling_only", async (ctx) => {
  const s = await ctx.connect(URL_PLAIN, { version: PATCH_VERSION, transports: ["polling"] });
  eq(s.io.engine.transport.name, "polling", "transport");
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join");
});

// 2. Auth

scenario("auth_no_token", async (ctx) => {
  const url = requireURL(URL_AUTH, "A2C_AUTH_URL");
  await connectFails(ctx, url, { transports: ["polling", "websocket"] }, "no token");
  await connectFails(ctx, url, { transports: ["websocket"] }, "no token, websocket-only");
});

scenario("auth_wrong_token", async (ctx) => {
  const url = requireURL(URL_AUTH, "A2C_AUTH_URL");
  await connectFails(ctx, url, { auth: { "x-api-key": TOKEN + "-wrong" } }, "wrong token in auth");
  await connectFails(ctx, url, { auth: { "x-api-key": "" } }, "empty token in auth");
  await connectFails(ctx, url, { transports: ["polling"], extraHeaders: { "x-api-key": TOKEN + "-wrong" } }, "wrong token in header");
});

scenario("auth_token_in_auth", async (ctx) => {
  const url = requireURL(URL_AUTH, "A2C_AUTH_URL");
  ok(TOKEN, "A2C_TOKEN_VALUE not set");
  const s = await ctx.connect(url, { auth: { "x-api-key": TOKEN } });
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join");
});

scenario("auth_token_in_header", async (ctx) => {
  const url = requireURL(URL_AUTH, "A2C_AUTH_URL");
  ok(TOKEN, "A2C_TOKEN_VALUE not set");
  const s = await ctx.connect(url, { transports: ["polling"], extraHeaders: { "x-api-key": TOKEN } });
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join");
});

scenario("auth_bearer_header", async (ctx) => {
  const url = requireURL(URL_AUTH, "A2C_AUTH_URL");
  ok(TOKEN, "A2C_TOKEN_VALUE not set");
  await ctx.connect(url, { transports: ["polling"], extraHeaders: { Authorization: "Bearer " + TOKEN } });
});

// 3. Join rules

scenario("join_enter_notification", async (ctx) => {
  const o = uuid();
  const c1 = await ctx.member(URL_PLAIN, "computer", "C1", o);
  const a = ctx.client(URL_PLAIN);
  a.memberName = "A";
  await waitConnect(a, 5000);
  const got = await join(a, "agent", "A", o);
  eq(got, [true, null], "agent join ack");
  eq(await next(c1, "notify:enter_office"), { office_id: o, agent: "A" }, "C1's notify:enter_office");
  await quiet([a], "notify:enter_office");
});

scenario("join_second_agent_refused", async (ctx) => {
  const o = uuid();
  await ctx.member(URL_PLAIN, "agent", "A", o);
  const b = await ctx.connect(URL_PLAIN);
  eq(await join(b, "agent", "B", o), [false, "Room already has an agent"], "second agent join ack");
  const b2 = await ctx.connect(URL_PLAIN);
  eq(await join(b2, "agent", "A", o), [false, "Room already has an agent"], "second agent with the same name");
});

scenario("join_duplicate_computer_name", async (ctx) => {
  const o = uuid();
  const o2 = uuid();
  await ctx.member(URL_PLAIN, "computer", "C1", o);
  const dup = await ctx.connect(URL_PLAIN);
  const [okv, msg] = await join(dup, "computer", "C1", o);
  eq(okv, false, `same name in the same office: ack (${short(okv)}, ${short(msg)})`);
  ok(typeof msg === "string" && msg.length > 0, `refusal message must be a string, got ${short(msg)}`);
  eq(await join(dup, "computer", "C1", o2), [true, null], "same name in another office");
});

scenario("join_agent_cannot_switch", async (ctx) => {
  const o = uuid();
  const a = await ctx.member(URL_PLAIN, "agent", "A", o);
  const [okv, msg] = await join(a, "agent", "A", uuid());
  eq(okv, false, `agent joining a second office: ack (${short(okv)}, ${short(msg)})`);
  ok(typeof msg === "string" && msg.length > 0, `refusal message must be a string, got ${short(msg)}`);
  // still in its first office
  await ctx.member(URL_PLAIN, "computer", "C1", o);
  eq(await next(a, "notify:enter_office"), { office_id: o, computer: "C1" }, "agent still in its office");
});

scenario("join_computer_switch", async (ctx) => {
  const o1 = uuid();
  const o2 = uuid();
  const c1 = await ctx.member(URL_PLAIN, "computer", "C1", o1);
  c1.on("client:tool_call", (p, cb) => cb({ content: [{ type: "text", text: "from C1" }], isError: false }));
  const a1 = await ctx.member(URL_PLAIN, "agent", "A", o1);
  const a2 = await ctx.member(URL_PLAIN, "agent", "A", o2);
  eq(await join(c1, "computer", "C1", o2), [true, null], "C1 joins O2");
  eq(await next(a1, "notify:leave_office"), { office_id: o1, computer: "C1" }, "O1 agent's notify:leave_office");
  eq(await next(a2, "notify:enter_office"), { office_id: o2, computer: "C1" }, "O2 agent's notify:enter_office");
  assertError(await request(a1, "client:tool_call", toolCall("C1")), 4104, "tool_call from O1's agent");
  eq(await request(a2, "client:tool_call", toolCall("C1")), { content: [{ type: "text", text: "from C1" }], isError: false }, "tool_call from O2's agent");
});

scenario("leave_office", async (ctx) => {
  const { id, agent, comps } = await office(ctx, URL_PLAIN, ["C1", "C2"]);
  eq(await leave(comps.C1, id), [true, null], "C1 leave ack");
  eq(await next(agent, "notify:leave_office"), { office_id: id, computer: "C1" }, "agent's notify:leave_office");
  eq(await next(comps.C2, "notify:leave_office"), { office_id: id, computer: "C1" }, "C2's notify:leave_office");
  eq(await leave(agent, id), [true, null], "agent leave ack");
  eq(await next(comps.C2, "notify:leave_office"), { office_id: id, agent: "A" }, "C2's notify:leave_office for the agent");
  await quiet([comps.C1, agent], "notify:leave_office");
  // after leaving, the agent is in no office
  assertError(await request(agent, "client:tool_call", toolCall("C2")), 4103, "tool_call after leaving");
});

scenario("disconnect_leaves_office", async (ctx) => {
  const { id, agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  comps.C1.close();
  eq(await next(agent, "notify:leave_office"), { office_id: id, computer: "C1" }, "agent's notify:leave_office");
});

// 4. Relay

scenario("relay_tool_call", async (ctx) => {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  const req = {
    agent: "A",
    req_id: uuid(),
    computer: "C1",
    tool_name: "b__echo",
    params: { text: "hi", n: [1, 2.5, null, true] },
    timeout: 10,
  };
  const answer = {
    content: [{ type: "text", text: "hi" }],
    isError: false,
    meta: { x: 1 },
    structuredContent: { k: "é ✓ \u2028" },
  };
  let seen;
  comps.C1.on("client:tool_call", (p, cb) => {
    seen = p;
    cb(answer);
  });
  const got = await request(agent, "client:tool_call", req);
  eq(seen, req, "payload the computer received");
  eq(got, answer, "result the agent received");
});

scenario("relay_get_tools", async (ctx) => {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  const req = { agent: "A", req_id: uuid(), computer: "C1" };
  const answer = {
    tools: [
      {
        name: "b__echo",
        bundle_id: "b",
        description: "Echo ✓",
        params_schema: { type: "object", properties: { text: { type: "string" } } },
        return_schema: null,
        meta: { auto_apply: false, tags: '["x"]' },
      },
    ],
    req_id: req.req_id,
  };
  let seen;
  comps.C1.on("client:get_tools", (p, cb) => {
    seen = p;
    cb(answer);
  });
  const got = await request(agent, "client:get_tools", req);
  eq(seen, req, "payload the computer received");
  eq(got, answer, "result the agent received");
});

scenario("relay_get_desktop", async (ctx) => {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  const req = { agent: "A", req_id: uuid(), computer: "C1", desktop_size: 2, window: "window://b/main" };
  const answer = { desktops: ["window://b/main\n\nhello", "window://b/other"], req_id: req.req_id };
  let seen;
  comps.C1.on("client:get_desktop", (p, cb) => {
    seen = p;
    cb(answer);
  });
  const got = await request(agent, "client:get_desktop", req);
  eq(seen, req, "payload the computer received");
  eq(got, answer, "result the agent received");
});

scenario("relay_error_payload", async (ctx) => {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  const req = { agent: "A", req_id: uuid(), computer: "C1", name: "a:b:c:d" };
  const answer = { code: 4016, message: "Invalid skill name format", details: { name: "a:b:c:d" } };
  let seen;
  comps.C1.on("client:get_skill", (p, cb) => {
    seen = p;
    cb(answer);
  });
  const got = await request(agent, "client:get_skill", req);
  eq(seen, req, "payload the computer received");
  eq(got, answer, "error the agent received");
});

async function binaryRelay(ctx, transports) {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"], { transports });
  const bytes = Buffer.from([0, 1, 2, 127, 128, 254, 255, ...crypto.randomBytes(1000)]);
  const req = { agent: "A", req_id: uuid(), computer: "C1", blob_handle: "h1" };
  comps.C1.on("client:get_blob", (p, cb) => {
    cb({ req_id: p.req_id, blob: bytes, total_size: bytes.length, eof: true });
  });
  const got = await request(agent, "client:get_blob", req);
  ok(isObj(got), `answer is not an object: ${short(got)}`);
  ok(Buffer.isBuffer(got.blob), `blob is not a Buffer (${transports.join("+")}): ${short(got.blob)}`);
  ok(got.blob.equals(bytes), `blob bytes differ (${transports.join("+")}): ${got.blob.length} vs ${bytes.length} bytes`);
  eq({ ...got, blob: null }, { req_id: req.req_id, blob: null, total_size: bytes.length, eof: true }, "other fields");
}

scenario("relay_binary_websocket", (ctx) => binaryRelay(ctx, ["websocket"]));
scenario("relay_binary_polling", (ctx) => binaryRelay(ctx, ["polling"]));

// 5. Errors

scenario("error_not_in_office", async (ctx) => {
  const a = await ctx.connect(URL_PLAIN);
  assertError(await request(a, "client:tool_call", toolCall("C1")), 4103, "tool_call before joining");
  assertError(await request(a, "client:get_tools", { agent: "A", req_id: uuid(), computer: "C1" }), 4103, "get_tools before joining");
});

scenario("error_cross_office", async (ctx) => {
  const name = "Cx-" + uuid().slice(0, 8);
  const other = await office(ctx, URL_PLAIN, [name]);
  let reached = false;
  other.comps[name].on("client:tool_call", (p, cb) => {
    reached = true;
    cb({ content: [], isError: false });
  });
  const mine = await office(ctx, URL_PLAIN, []);
  assertError(await request(mine.agent, "client:tool_call", toolCall(name)), 4104, "tool_call to another office's computer");
  assertError(await request(mine.agent, "client:get_tools", { agent: "A", req_id: uuid(), computer: name }), 4104, "get_tools to another office's computer");
  await sleep(100);
  ok(!reached, "the request reached the computer in the other office");
});

scenario("error_unknown_computer", async (ctx) => {
  const { agent } = await office(ctx, URL_PLAIN, ["C1"]);
  const ghost = "ghost-" + uuid();
  assertError(await request(agent, "client:tool_call", toolCall(ghost)), 404, "tool_call to an unknown computer");
  assertError(await request(agent, "client:get_desktop", { agent: "A", req_id: uuid(), computer: ghost }), 404, "get_desktop to an unknown computer");
});

scenario("error_malformed_payload", async (ctx) => {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  let calls = 0;
  comps.C1.on("client:tool_call", (p, cb) => {
    calls++;
    cb({ content: [{ type: "text", text: "ok" }], isError: false });
  });
  assertError(await request(agent, "client:tool_call", toolCall("C1", { timeout: "x" })), 400, 'timeout "x"');
  const noReq = toolCall("C1");
  delete noReq.req_id;
  assertError(await request(agent, "client:tool_call", noReq), 400, "missing req_id");
  assertError(await request(agent, "client:tool_call", "not an object"), 400, "string payload");
  eq(calls, 0, "malformed requests forwarded to the computer");
  eq(await request(agent, "client:tool_call", toolCall("C1")), { content: [{ type: "text", text: "ok" }], isError: false }, "valid call afterwards");
  ok(agent.connected, "agent socket disconnected");
});

// 6. Cancel

scenario("cancel_broadcast", async (ctx) => {
  const mine = await office(ctx, URL_PLAIN, ["C1"]);
  const other = await office(ctx, URL_PLAIN, ["C2"]);
  const R = uuid();
  const args = await new Promise((resolve, reject) => {
    mine.agent.timeout(3000).emit("server:tool_call_cancel", { agent: "A", req_id: R }, (err, ...rest) => {
      if (err) reject(new Error(`no ack to server:tool_call_cancel within 3000 ms (${err.message})`));
      else resolve(rest);
    });
  });
  const first = args[0];
  ok(first === undefined || first === null, `cancel ack carries a value: ${short(args)}`);
  eq(await next(mine.comps.C1, "notify:tool_call_cancel"), { agent: "A", req_id: R }, "C1's notify:tool_call_cancel");
  await quiet([other.comps.C2, other.agent, mine.agent], "notify:tool_call_cancel");
});

// 7. Deadline

scenario("tool_call_deadline", async (ctx) => {
  const { agent, comps } = await office(ctx, URL_PLAIN, ["C1"]);
  let got = false;
  comps.C1.on("client:tool_call", () => {
    got = true; // never answers
  });
  const t0 = Date.now();
  const res = await request(agent, "client:tool_call", toolCall("C1", { timeout: 1 }), 9000);
  const took = (Date.now() - t0) / 1000;
  ok(got, "the computer never received the call");
  ok(isObj(res), `answer is not an object: ${short(res)}`);
  eq(res.isError, true, "isError");
  ok(Array.isArray(res.content) && res.content.length > 0, `content must be a non-empty array: ${short(res.content)}`);
  ok(isObj(res.meta) && res.meta.a2c_timeout === true, `meta.a2c_timeout must be true: ${short(res.meta)}`);
  ok(took >= 1 && took <= 8.5, `answer after ${took.toFixed(1)} s, want within ~6-8 s`);
});

scenario("relay_timeout_408", async (ctx) => {
  const url = requireURL(URL_RELAY, "A2C_RELAY_TIMEOUT_URL");
  const { agent, comps } = await office(ctx, url, ["C1"]);
  comps.C1.on("client:get_tools", () => {
    /* never answers */
  });
  const t0 = Date.now();
  const res = await request(agent, "client:get_tools", { agent: "A", req_id: uuid(), computer: "C1" }, 5000);
  const took = (Date.now() - t0) / 1000;
  assertError(res, 408, "get_tools to a silent computer");
  ok(took <= 3, `answer after ${took.toFixed(1)} s, want within ~3 s`);
});

// 8. Agent disconnects mid-call

scenario("agent_disconnect_mid_call", async (ctx) => {
  const first = await office(ctx, URL_PLAIN, ["C1"]);
  const received = new Promise((resolve) => {
    first.comps.C1.on("client:tool_call", (p, cb) => {
      resolve();
      setTimeout(() => cb({ content: [{ type: "text", text: "late" }], isError: false }), 1000);
    });
  });
  first.agent.emit("client:tool_call", toolCall("C1"), () => {});
  await withTimeout(received, 3000, "computer receiving the call");
  first.agent.close();
  await sleep(1300); // the late answer arrives meanwhile
  ok(first.comps.C1.connected, "computer was disconnected");
  const fresh = await office(ctx, URL_PLAIN, ["C9"]);
  fresh.comps.C9.on("client:tool_call", (p, cb) => cb({ content: [{ type: "text", text: p.params.text }], isError: false }));
  eq(await request(fresh.agent, "client:tool_call", toolCall("C9")), { content: [{ type: "text", text: "hi" }], isError: false }, "fresh relayed call");
  const h = await rawHTTP(ctx, URL_PLAIN + "/healthz");
  eq(h.status, 200, "GET /healthz status");
});

// 9. list_room

scenario("list_room", async (ctx) => {
  const o = uuid();
  const c2 = await ctx.member(URL_PLAIN, "computer", "C2", o, { version: PATCH_VERSION });
  const c1 = await ctx.member(URL_PLAIN, "computer", "C1", o);
  const a = await ctx.member(URL_PLAIN, "agent", "A", o);
  const R = uuid();
  const res = await request(a, "server:list_room", { agent: "A", req_id: R, office_id: o });
  ok(isObj(res) && Array.isArray(res.sessions), `answer has no sessions array: ${short(res)}`);
  eq(res.req_id, R, "req_id");
  eq(res.sessions.length, 3, `session count (${short(res.sessions)})`);
  const want = {
    A: { sid: a.id, name: "A", role: "agent", office_id: o, a2c_version: PROTOCOL },
    C1: { sid: c1.id, name: "C1", role: "computer", office_id: o, a2c_version: PROTOCOL },
    C2: { sid: c2.id, name: "C2", role: "computer", office_id: o, a2c_version: PATCH_VERSION },
  };
  eq(res.sessions[0].role, "agent", "first session's role");
  const seen = new Set();
  for (const s of res.sessions) {
    ok(isObj(s) && want[s.name], `unexpected session ${short(s)}`);
    ok(typeof s.sid === "string" && s.sid.length > 0, `sid must be a non-empty string: ${short(s)}`);
    ok(!seen.has(s.name), `duplicate session ${short(s)}`);
    seen.add(s.name);
    eq(s, want[s.name], `session ${s.name}`);
  }
});

scenario("list_room_errors", async (ctx) => {
  const a = await ctx.connect(URL_PLAIN);
  const o = uuid();
  assertError(await request(a, "server:list_room", { agent: "A", req_id: uuid(), office_id: o }), 4103, "list_room before joining");
  eq(await join(a, "agent", "A", o), [true, null], "join");
  const other = await office(ctx, URL_PLAIN, ["C1"]);
  assertError(await request(a, "server:list_room", { agent: "A", req_id: uuid(), office_id: other.id }), 4104, "list_room of another office");
});

// 10. update notifications

scenario("update_notifications", async (ctx) => {
  const mine = await office(ctx, URL_PLAIN, ["C1"]);
  const other = await office(ctx, URL_PLAIN, ["C2"]);
  const kinds = ["update_tool_list", "update_config", "update_desktop", "update_skills"];
  for (const k of kinds) {
    mine.comps.C1.emit("server:" + k, { computer: "C1" });
    eq(await next(mine.agent, "notify:" + k), { computer: "C1" }, `agent's notify:${k}`);
  }
  await quiet([other.agent, other.comps.C2, mine.comps.C1], (n) => n.startsWith("notify:update_"));
});

scenario("update_names_sender", async (ctx) => {
  const mine = await office(ctx, URL_PLAIN, ["C1"]);
  mine.comps.C1.emit("server:update_tool_list", { computer: "someone-else" });
  eq(await next(mine.agent, "notify:update_tool_list"), { computer: "C1" }, "agent's notify:update_tool_list");
});

// 11. A real Computer (A2C_COMPUTER_*): put_blob, skills, tool tags. The
// Computer is alone in its office; each scenario's Agent joins it and
// leaves (acked) before the next one comes: an office holds one Agent.

const COMPUTER_OFFICE = process.env.A2C_COMPUTER_OFFICE || "";
const COMPUTER = process.env.A2C_COMPUTER || "";
const LANDING_ROOT = process.env.A2C_LANDING_ROOT || "";
const SKILLS_DIR = process.env.A2C_SKILLS_DIR || "";
const NOROOT_OFFICE = process.env.A2C_NOROOT_OFFICE || "";
const NOROOT_COMPUTER = process.env.A2C_NOROOT_COMPUTER || "";
const BLOB_FAILED = "Blob write failed";
const COMPUTER_SCENARIO_MS = 60000;

function requireComputer() {
  if (!COMPUTER_OFFICE || !COMPUTER) throw new Skip("A2C_COMPUTER_OFFICE / A2C_COMPUTER not set");
}

function requirePutBlob() {
  if (!V04) throw new Skip(`client:put_blob is 0.4.0 (server speaks ${PROTOCOL})`);
}

// officeAgent joins a Computer's office once the Computer answers (and
// lists tool, if given); the Agent leaves the office when the scenario ends.
async function officeAgent(ctx, office, computer, name = "JA", tool = null) {
  const s = await ctx.connect(URL_PLAIN);
  s.memberName = name;
  for (const deadline = Date.now() + 10000; ; ) {
    const got = await join(s, "agent", name, office);
    if (got[0] === true) break;
    // the previous scenario's Agent may still be leaving
    ok(Date.now() < deadline, `agent ${name} cannot join the Computer's office: ${short(got)}`);
    await sleep(100);
  }
  s.leaveOffice = office;
  for (const deadline = Date.now() + 30000; ; ) {
    const res = await request(s, "client:get_tools", { agent: name, req_id: uuid(), computer }, 10000);
    if (isObj(res) && Array.isArray(res.tools) && (tool === null || res.tools.some((t) => t.name === tool))) return s;
    ok(Date.now() < deadline, `Computer ${computer} never listed ${tool || "its tools"}: ${short(res)}`);
    await sleep(200);
  }
}

async function leaveNow(s) {
  if (s.leaveOffice && s.connected) {
    try {
      await leave(s, s.leaveOffice, 3000);
    } catch (_) {
      /* ignore */
    }
  }
  s.leaveOffice = null;
  s.close();
}

const sha = (b) => crypto.createHash("sha256").update(b).digest("hex");
const b64 = (b) => Buffer.from(b).toString("base64");

async function put(s, computer, fields) {
  const req = { agent: s.memberName, req_id: uuid(), computer, ...fields };
  return [await request(s, "client:put_blob", req, 15000), req];
}

// putFirst sends the first chunk (data) of an upload; by default the whole
// file is data and the chunk is the last.
function putFirst(s, data, o = {}) {
  const fields = {
    chunk_offset: 0,
    eof: o.eof !== undefined ? o.eof : o.total === undefined,
    total_size: o.total !== undefined ? o.total : data.length,
    sha256: o.digest !== undefined ? o.digest : sha(data),
    blob: b64(data),
    ...(o.extra || {}),
  };
  return put(s, o.computer || COMPUTER, fields);
}

function expect4019(ack, reason, what) {
  ok(isObj(ack), `${what}: want a 4019 ErrorPayload, got ${short(ack)}`);
  eq(Object.keys(ack).sort(), ["code", "details", "message"], `${what}: ErrorPayload keys in ${short(ack)}`);
  eq(ack.code, 4019, `${what}: code`);
  eq(ack.message, BLOB_FAILED, `${what}: message`);
  ok(isObj(ack.details), `${what}: details not an object: ${short(ack)}`);
  eq(ack.details.reason, reason, `${what}: details.reason in ${short(ack)}`);
  return ack.details;
}

function expectOpen(ack, req, what) {
  ok(isObj(ack) && !("code" in ack), `${what}: want a PutBlobRet, got ${short(ack)}`);
  eq(Object.keys(ack).sort(), ["chunk_offset", "req_id", "upload_id"], `${what}: ack keys`);
  eq(ack.req_id, req.req_id, `${what}: req_id`);
  eq(ack.chunk_offset, req.chunk_offset, `${what}: chunk_offset echo`);
  ok(typeof ack.upload_id === "string" && ack.upload_id !== "", `${what}: upload_id ${short(ack)}`);
  return ack.upload_id;
}

function inside(p, root) {
  return fs.realpathSync(p).startsWith(fs.realpathSync(root) + path.sep);
}

function expectLanded(ack, req, uid, data, what) {
  ok(isObj(ack) && !("code" in ack), `${what}: want the final PutBlobRet, got ${short(ack)}`);
  eq(Object.keys(ack).sort(), ["chunk_offset", "landing_path", "req_id", "sha256", "total_size", "upload_id"], `${what}: final ack keys`);
  eq(ack.req_id, req.req_id, `${what}: req_id`);
  eq(ack.upload_id, uid, `${what}: upload_id echo`);
  eq(ack.chunk_offset, req.chunk_offset, `${what}: chunk_offset echo`);
  eq(ack.total_size, data.length, `${what}: total_size`);
  eq(ack.sha256, sha(data), `${what}: sha256`);
  const lp = ack.landing_path;
  ok(typeof lp === "string" && path.isAbsolute(lp), `${what}: landing_path not absolute: ${short(lp)}`);
  if (LANDING_ROOT) {
    ok(inside(lp, LANDING_ROOT), `${what}: landing_path ${lp} outside the landing root ${LANDING_ROOT}`);
    ok(fs.readFileSync(lp).equals(data), `${what}: the landed file's bytes differ from the upload`);
  }
  return lp;
}

// upload sends data in chunks of chunk bytes and returns the landing_path.
async function upload(s, data, chunk, extra = {}) {
  const first = data.subarray(0, chunk);
  const single = first.length === data.length;
  let [ack, req] = await putFirst(s, first, { total: data.length, digest: sha(data), eof: single, extra });
  if (single) {
    ok(isObj(ack) && typeof ack.upload_id === "string", `single chunk: ${short(ack)}`);
    return expectLanded(ack, req, ack.upload_id, data, "single-chunk upload");
  }
  const uid = expectOpen(ack, req, "first chunk");
  for (let off = first.length; ; ) {
    const part = data.subarray(off, off + chunk);
    const eof = off + part.length === data.length;
    [ack, req] = await put(s, COMPUTER, { upload_id: uid, chunk_offset: off, eof, blob: b64(part) });
    if (eof) return expectLanded(ack, req, uid, data, `final chunk at ${off}`);
    eq(expectOpen(ack, req, `chunk at ${off}`), uid, `upload_id echo at ${off}`);
    off += part.length;
  }
}

// finish sends the last chunk of an open upload (cleanup) and returns the ack.
async function finish(s, uid, offset, rest) {
  return (await put(s, COMPUTER, { upload_id: uid, chunk_offset: offset, eof: true, blob: b64(rest) }))[0];
}

function tree(root) {
  const out = new Set();
  const walk = (d) => {
    let names;
    try {
      names = fs.readdirSync(d, { withFileTypes: true });
    } catch (_) {
      return;
    }
    for (const e of names) {
      const p = path.join(d, e.name);
      out.add(path.relative(root, p));
      if (e.isDirectory()) walk(p);
    }
  };
  walk(root);
  return out;
}

function computerScenario(name, fn) {
  scenarios.push({ name, fn, ms: COMPUTER_SCENARIO_MS });
}

computerScenario("put_blob_chunks", async (ctx) => {
  requireComputer();
  requirePutBlob();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const data = crypto.randomBytes(150000);
  const hint = { name_hint: "../../evil dir/report v1.txt" };
  const lp = await upload(a, data, 65536, hint);
  // the same hint again lands beside it, never over it
  const lp2 = await upload(a, crypto.randomBytes(1000), 65536, hint);
  ok(lp2 !== lp, `two uploads with the same name_hint landed on one path ${lp}`);
  if (LANDING_ROOT) ok(fs.readFileSync(lp).equals(data), "the first upload was overwritten");
  await upload(a, Buffer.from("x"), 65536);
});

computerScenario("put_blob_unknown_before_0_4", async (ctx) => {
  requireComputer();
  if (V04) throw new Skip(`client:put_blob exists at ${PROTOCOL}`);
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const [ack] = await putFirst(a, Buffer.from("hello"));
  eq(ack, { code: 400, message: "unknown event" }, `put_blob at a ${PROTOCOL} server`);
});

computerScenario("put_blob_invalid_upload", async (ctx) => {
  requireComputer();
  requirePutBlob();
  let a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  for (const [what, uid] of [
    ["unknown upload_id", crypto.randomBytes(16).toString("hex")],
    ["malformed upload_id", "../../etc/passwd"],
  ]) {
    const [ack] = await put(a, COMPUTER, { upload_id: uid, chunk_offset: 0, eof: true, blob: b64("hi") });
    expect4019(ack, "invalid_upload", what);
  }
  // another Agent's upload: JA opens it and leaves, JB may not continue it
  const data = Buffer.from("0123456789");
  const [ack0, req0] = await putFirst(a, data.subarray(0, 4), { total: data.length, digest: sha(data), eof: false });
  const uid = expectOpen(ack0, req0, "JA's first chunk");
  await leaveNow(a);
  const b = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER, "JB");
  const [ack1] = await put(b, COMPUTER, { upload_id: uid, chunk_offset: 4, eof: true, blob: b64(data.subarray(4)) });
  expect4019(ack1, "invalid_upload", "another Agent's upload_id");
  await leaveNow(b);
  // JA may finish it (or find it ended with its leave); either frees the slot
  a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  await finish(a, uid, 4, data.subarray(4));
});

computerScenario("put_blob_invalid_declaration", async (ctx) => {
  requireComputer();
  requirePutBlob();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const data = Buffer.from("declared data");
  const base = { chunk_offset: 0, eof: true, total_size: data.length, sha256: sha(data), blob: b64(data) };
  const without = (k) => Object.fromEntries(Object.entries(base).filter(([key]) => key !== k));
  const before = LANDING_ROOT ? tree(LANDING_ROOT) : new Set();
  for (const [what, fields] of [
    ["no total_size", without("total_size")],
    ["no sha256", without("sha256")],
    ["total_size 0", { ...base, total_size: 0 }],
    ["sha256 not a digest", { ...base, sha256: "not-a-digest" }],
    ["blob not base64", { ...base, blob: "!!! not base64 !!!" }],
  ]) {
    const [ack] = await put(a, COMPUTER, fields);
    expect4019(ack, "invalid_declaration", what);
  }
  if (LANDING_ROOT) eq([...tree(LANDING_ROOT)].filter((p) => !before.has(p)).sort(), [], "files written for refused first chunks");
  // a declaration repeated on a later chunk
  for (const [key, val] of [
    ["total_size", data.length],
    ["sha256", sha(data)],
    ["name_hint", "x.txt"],
  ]) {
    const [ack0, req0] = await putFirst(a, data.subarray(0, 4), { total: data.length, digest: sha(data), eof: false });
    const uid = expectOpen(ack0, req0, `first chunk (then ${key} again)`);
    const [ack] = await put(a, COMPUTER, { upload_id: uid, chunk_offset: 4, eof: true, blob: b64(data.subarray(4)), [key]: val });
    expect4019(ack, "invalid_declaration", `${key} on a later chunk`);
    await finish(a, uid, 4, data.subarray(4));
  }
});

computerScenario("put_blob_range", async (ctx) => {
  requireComputer();
  requirePutBlob();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const data = Buffer.from("0123456789");
  const open = async () => {
    const [ack, req] = await putFirst(a, data.subarray(0, 4), { total: data.length, digest: sha(data), eof: false });
    return expectOpen(ack, req, "first chunk");
  };
  // each fault on its own session (whether range ends one is the SDK's choice)
  let uid;
  for (const off of [5, 0, 3]) {
    uid = await open();
    const [ack] = await put(a, COMPUTER, { upload_id: uid, chunk_offset: off, eof: false, blob: b64(data.subarray(off, off + 2)) });
    const d = expect4019(ack, "range", `chunk_offset ${off} after 4 bytes`);
    ok(Number.isInteger(d.chunk_offset), `range without an integer details.chunk_offset: ${short(ack)}`);
    await finish(a, uid, 4, data.subarray(4));
  }
  // the final size differs from the declared one: in the first chunk, and later
  const [ack1] = await putFirst(a, data.subarray(0, 4), { total: data.length, digest: sha(data), eof: true });
  expect4019(ack1, "range", "eof after 4 of 10 declared bytes");
  uid = await open();
  const [ack2] = await put(a, COMPUTER, { upload_id: uid, chunk_offset: 4, eof: true, blob: b64(data.subarray(4, 7)) });
  expect4019(ack2, "range", "eof at 7 of 10 declared bytes");
});

computerScenario("put_blob_too_large", async (ctx) => {
  requireComputer();
  requirePutBlob();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const [ack] = await putFirst(a, Buffer.from("x"), { total: 2 ** 40, digest: sha("x"), eof: false });
  const d = expect4019(ack, "too_large", "1 TiB declared");
  ok(Number.isInteger(d.total_size) && d.total_size > 0, `too_large without details.total_size: ${short(ack)}`);
});

computerScenario("put_blob_busy", async (ctx) => {
  requireComputer();
  requirePutBlob();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const data = Buffer.from("ab");
  const opened = [];
  let busy = null;
  try {
    for (let i = 0; i < 64; i++) {
      const [ack, req] = await putFirst(a, data.subarray(0, 1), { total: 2, digest: sha(data), eof: false });
      if (isObj(ack) && ack.code !== undefined) {
        busy = ack;
        break;
      }
      opened.push(expectOpen(ack, req, `session ${opened.length + 1}`));
    }
    ok(busy !== null, `${opened.length} open uploads and never busy`);
    ok(opened.length > 0, "busy before any upload was open");
    expect4019(busy, "busy", `upload ${opened.length + 1} while ${opened.length} are open`);
  } finally {
    const acks = [];
    for (const uid of opened) acks.push(await finish(a, uid, 1, data.subarray(1)));
    if (busy !== null) {
      acks.forEach((ack, i) =>
        ok(isObj(ack) && typeof ack.landing_path === "string", `open upload ${i + 1} did not finish after the busy refusal: ${short(ack)}`),
      );
    }
  }
  await upload(a, Buffer.from("after busy"), 65536);
});

computerScenario("put_blob_forbidden", async (ctx) => {
  if (!NOROOT_OFFICE || !NOROOT_COMPUTER) throw new Skip("A2C_NOROOT_OFFICE / A2C_NOROOT_COMPUTER not set");
  requirePutBlob();
  const a = await officeAgent(ctx, NOROOT_OFFICE, NOROOT_COMPUTER);
  const [ack] = await putFirst(a, Buffer.from("no root"), { computer: NOROOT_COMPUTER });
  expect4019(ack, "forbidden", "upload to a Computer without a landing root");
});

computerScenario("put_blob_integrity", async (ctx) => {
  requireComputer();
  requirePutBlob();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const before = LANDING_ROOT ? tree(LANDING_ROOT) : new Set();
  const data = Buffer.from("integrity check");
  const [ack1] = await putFirst(a, data, { digest: sha("other bytes") });
  expect4019(ack1, "integrity", "single chunk, wrong sha256");
  const [ack2, req2] = await putFirst(a, data.subarray(0, 5), { total: data.length, digest: sha("other bytes"), eof: false });
  const uid = expectOpen(ack2, req2, "first chunk");
  const [ack3] = await put(a, COMPUTER, { upload_id: uid, chunk_offset: 5, eof: true, blob: b64(data.subarray(5)) });
  expect4019(ack3, "integrity", "two chunks, wrong sha256");
  if (LANDING_ROOT) eq([...tree(LANDING_ROOT)].filter((p) => !before.has(p)).sort(), [], "files left in the landing root after integrity failures");
});

// put_blob's io_error is not provoked: the reliable way (a landing root
// made read-only after the Computer started) does not stop root, which
// these suites run as in CI.

const SKILL_DESC = { "hello-world": "Says hello to the user", tagless: "A skill without tags", "bad-tags": "Tags that are not a list" };

// skillBody is a skill's SKILL.md with its frontmatter block (both
// delimiter lines included) stripped.
function skillBody(dir) {
  const raw = fs.readFileSync(path.join(SKILLS_DIR, dir, "SKILL.md"));
  const end = raw.indexOf("\n---\n", 3) + "\n---\n".length;
  return raw.subarray(end);
}

function requireSkills() {
  requireComputer();
  if (!SKILLS_DIR) throw new Skip("A2C_SKILLS_DIR not set");
}

computerScenario("skills_list", async (ctx) => {
  requireSkills();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  const R = uuid();
  const res = await request(a, "client:get_skills", { agent: "JA", req_id: R, computer: COMPUTER }, 10000);
  ok(isObj(res) && Array.isArray(res.skills), `want GetSkillsRet, got ${short(res)}`);
  eq(Object.keys(res).sort(), ["req_id", "skills"], "GetSkillsRet keys");
  eq(res.req_id, R, "req_id");
  const got = Object.fromEntries(res.skills.map((s) => [s.name, s]));
  eq(Object.keys(got).length, res.skills.length, `duplicate names in ${short(res)}`);
  eq(Object.keys(got).sort(), ["bad-tags", "hello-world", "tagless"], "skill names (BadName is left out)");
  for (const [name, ref] of Object.entries(got)) {
    for (const k of ["name", "source", "path", "description"]) ok(typeof ref[k] === "string", `${name}: ${k} missing in ${short(ref)}`);
    eq(ref.source, "user", `${name}: source`);
    eq(ref.description, SKILL_DESC[name], `${name}: description`);
    ok(path.isAbsolute(ref.path), `${name}: path not absolute: ${ref.path}`);
    ok(
      fs.readFileSync(path.join(ref.path, "SKILL.md")).equals(fs.readFileSync(path.join(SKILLS_DIR, name, "SKILL.md"))),
      `${name}: path ${ref.path} does not hold its SKILL.md`,
    );
    ok(!("version" in ref) && !("uri" in ref), `${name}: a user skill with version or uri: ${short(ref)}`);
  }
  eq(got["hello-world"].license, "MIT", "hello-world: license");
  if (V04) eq(got["hello-world"].tags, ["greet", "demo"], "hello-world: tags");
  else ok(!("tags" in got["hello-world"]), `tags in a ${PROTOCOL} A2CSkillRef: ${short(got["hello-world"])}`);
  for (const name of ["tagless", "bad-tags"]) ok(!("tags" in got[name]), `${name}: tags present: ${short(got[name])}`);
});

async function getSkill(a, name, relPath) {
  const req = { agent: a.memberName, req_id: uuid(), computer: COMPUTER, name };
  if (relPath !== undefined) req.rel_path = relPath;
  return [await request(a, "client:get_skill", req, 15000), req];
}

async function readBlob(a, handle) {
  const parts = [];
  let first = null;
  for (let off = 0; ; ) {
    const res = await request(a, "client:get_blob", { agent: a.memberName, req_id: uuid(), computer: COMPUTER, blob_handle: handle, chunk_offset: off }, 15000);
    ok(isObj(res) && !("code" in res), `get_blob at ${off}: ${short(res)}`);
    first = first || res;
    eq(res.chunk_offset, off, "get_blob chunk_offset");
    const chunk = Buffer.isBuffer(res.blob) ? res.blob : Buffer.from(res.blob, "base64");
    parts.push(chunk);
    off += chunk.length;
    if (res.eof) return [Buffer.concat(parts), first];
    ok(chunk.length > 0, `get_blob: empty chunk without eof at ${off}`);
  }
}

computerScenario("skill_read", async (ctx) => {
  requireSkills();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  for (const name of ["hello-world", "tagless", "bad-tags"]) {
    const body = skillBody(name);
    for (const rel of [undefined, "SKILL.md"]) {
      const [res, req] = await getSkill(a, name, rel);
      ok(isObj(res) && !("code" in res), `get_skill ${name} ${rel}: ${short(res)}`);
      eq(Object.keys(res).sort(), ["body", "mime_type", "name", "rel_path", "req_id", "sha256", "total_size"], `${name}: GetSkillRet keys`);
      eq([res.name, res.rel_path, res.req_id], [name, "SKILL.md", req.req_id], `${name}: echoes`);
      eq(res.mime_type, "text/markdown", `${name}: mime_type`);
      eq(res.body, body.toString("utf8"), `${name}: body (frontmatter stripped)`);
      eq(res.total_size, body.length, `${name}: total_size`);
      eq(res.sha256, sha(body), `${name}: sha256`);
    }
  }
  const [notes] = await getSkill(a, "hello-world", "notes.txt");
  eq([notes.mime_type, notes.body, notes.sha256], ["text/plain", "plain notes\n", sha("plain notes\n")], "notes.txt");
  const [ref] = await getSkill(a, "hello-world", "docs/ref.md");
  eq(ref.body, "# Reference\n", "docs/ref.md body");
  // binary, and text over any inline budget: a handle, read with get_blob
  for (const rel of ["data.bin", "big.md"]) {
    const raw = fs.readFileSync(path.join(SKILLS_DIR, "hello-world", rel));
    const [res] = await getSkill(a, "hello-world", rel);
    ok(isObj(res) && !("code" in res), `get_skill ${rel}: ${short(res)}`);
    eq(Object.keys(res).sort(), ["blob_handle", "mime_type", "name", "rel_path", "req_id", "sha256", "total_size"], `${rel}: GetSkillRet keys`);
    eq([res.total_size, res.sha256], [raw.length, sha(raw)], `${rel}: size and digest`);
    const [got, first] = await readBlob(a, res.blob_handle);
    eq([first.total_size, first.sha256], [raw.length, sha(raw)], `${rel}: get_blob size and digest`);
    ok(got.equals(raw), `${rel}: bytes read through the handle differ (${got.length} vs ${raw.length})`);
  }
});

function expectSkillError(res, code, what, reason) {
  ok(isObj(res), `${what}: want ErrorPayload {code:${code}}, got ${short(res)}`);
  eq(res.code, code, `${what}: code (payload ${short(res)})`);
  ok(typeof res.message === "string" && res.message.length > 0, `${what}: message must be a non-empty string, got ${short(res)}`);
  if (reason !== undefined) {
    ok(isObj(res.details) && res.details.reason === reason, `${what}: want details.reason ${reason}, got ${short(res)}`);
    return res.details;
  }
}

computerScenario("skill_errors", async (ctx) => {
  requireSkills();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER);
  for (const name of ["Bad_Name", "BadName", "a:b:c:d", "x:y:z", "mcp:a.b:y", "mcp:a__b:y", "-lead", "a--b", "a:"]) {
    expectSkillError((await getSkill(a, name))[0], 4016, `name ${JSON.stringify(name)}`);
  }
  for (const name of ["no-such-skill", "plug:no-such", "mcp:fx", "mcp:fx:no-such"]) {
    expectSkillError((await getSkill(a, name))[0], 4014, `unknown skill ${JSON.stringify(name)}`);
  }
  const cases = [
    ["traversal", ["../tagless/SKILL.md", "/etc/passwd", "docs/../../tagless/SKILL.md", "escape.txt"]],
    ["forbidden", [".skillenv", "docs/.skillenv"]],
    ["not_found", ["missing.txt", "docs/none.md"]],
  ];
  for (const [reason, rels] of cases) {
    for (const rel of rels) expectSkillError((await getSkill(a, "hello-world", rel))[0], 4017, `rel_path ${JSON.stringify(rel)}`, reason);
  }
  const d = expectSkillError((await getSkill(a, "hello-world", "huge.txt"))[0], 4017, "huge.txt", "too_large");
  eq(d.total_size, 101 * 1024 * 1024, "too_large details.total_size");
});

function toolMetaOf(tools, name) {
  const t = tools[name];
  ok(t !== undefined, `${name} not listed (have ${Object.keys(tools).sort().join(", ")})`);
  const meta = t.meta || {};
  ok(isObj(meta), `${name}: meta not an object: ${short(t)}`);
  if (!("a2c_tool_meta" in meta)) return [meta, null];
  ok(typeof meta.a2c_tool_meta === "string", `${name}: meta.a2c_tool_meta is not a JSON string: ${short(meta.a2c_tool_meta)}`);
  return [meta, JSON.parse(meta.a2c_tool_meta)];
}

computerScenario("tools_tags", async (ctx) => {
  requireComputer();
  const a = await officeAgent(ctx, COMPUTER_OFFICE, COMPUTER, "JA", "fx__plain");
  const res = await request(a, "client:get_tools", { agent: "JA", req_id: uuid(), computer: COMPUTER }, 10000);
  const tools = Object.fromEntries(res.tools.filter((t) => t.bundle_id === "fx").map((t) => [t.name, t]));
  eq(Object.keys(tools).sort(), ["fx__cleared", "fx__malformed", "fx__overridden", "fx__plain", "fx__tagged"], "fx tools (a server-declared alias is not honoured)");
  const none4 = { auto_apply: null, alias: null, tags: null, ret_object_mapper: null };
  const [meta, tm] = toolMetaOf(tools, "fx__tagged");
  eq(meta["vendor.example/x"], 1, "fx__tagged: the server's other _meta key");
  if (V04) {
    eq(tm, { ...none4, tags: ["alpha", "beta"] }, "fx__tagged: a2c_tool_meta (server tags only)");
    eq(toolMetaOf(tools, "fx__overridden")[1], { ...none4, tags: ["cfg"], auto_apply: true }, "fx__overridden: a2c_tool_meta (config over server)");
    eq(toolMetaOf(tools, "fx__cleared")[1], { ...none4, tags: [] }, "fx__cleared: a2c_tool_meta (tags [] clears)");
    eq(toolMetaOf(tools, "fx__malformed")[1], null, "fx__malformed: a2c_tool_meta (malformed, no config)");
  } else {
    ok(tm === null || (tm.tags == null && tm.auto_apply !== true), `fx__tagged: server tags or auto_apply at ${PROTOCOL}: ${short(tm)}`);
    const ov = toolMetaOf(tools, "fx__overridden")[1];
    ok(ov !== null && JSON.stringify(ov.tags) === '["cfg"]' && ov.auto_apply === true, `fx__overridden: want config tags [cfg] and auto_apply, got ${short(ov)}`);
    const cl = toolMetaOf(tools, "fx__cleared")[1];
    ok(cl === null || cl.tags == null || (Array.isArray(cl.tags) && cl.tags.length === 0), `fx__cleared: ${short(cl)}`);
    const ma = toolMetaOf(tools, "fx__malformed")[1];
    ok(ma === null || ma.tags == null, `fx__malformed: ${short(ma)}`);
  }
  const call = await request(a, "client:tool_call", { agent: "JA", req_id: uuid(), computer: COMPUTER, tool_name: "fx__tagged", params: { text: "tagged" }, timeout: 10 }, 20000);
  ok(isObj(call) && call.isError === false && call.content[0].text === "tagged", `call fx__tagged: ${short(call)}`);
});

// ---------------------------------------------------------------- runner

async function runOne(sc) {
  const ctx = new Ctx();
  try {
    await withTimeout(Promise.resolve().then(() => sc.fn(ctx)), sc.ms || SCENARIO_TIMEOUT_MS, "scenario");
    return { status: "PASS" };
  } catch (err) {
    if (err instanceof Skip) return { status: "SKIP", reason: err.message };
    return { status: "FAIL", reason: (err && err.message) || String(err) };
  } finally {
    // a Computer's office holds one Agent: leave it (acked) for the next
    for (const s of ctx.sockets) if (s.leaveOffice) await leaveNow(s);
    ctx.close();
  }
}

function oneLine(s) {
  s = String(s).replace(/\s+/g, " ").trim();
  return s.length > 300 ? s.slice(0, 297) + "..." : s;
}

async function main() {
  const argv = process.argv.slice(2);
  let only = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--only" && i + 1 < argv.length) only = new Set(argv[++i].split(","));
    else if (argv[i].startsWith("--only=")) only = new Set(argv[i].slice(7).split(","));
    else if (argv[i] === "--list") {
      for (const sc of scenarios) console.log(sc.name);
      return 0;
    } else {
      console.error(`unknown argument ${argv[i]}`);
      return 2;
    }
  }
  if (!URL_PLAIN) {
    console.error("A2C_URL is not set");
    console.log("FAIL setup: A2C_URL is not set");
    console.log("0 passed, 1 failed");
    return 1;
  }
  if (!["polling,websocket", "polling", "websocket"].includes(TRANSPORTS.join(","))) {
    console.error(`A2C_TRANSPORTS=${JSON.stringify(TRANSPORTS.join(","))}: want polling,websocket, polling or websocket`);
    return 2;
  }
  let list = scenarios;
  if (only) {
    const unknown = [...only].filter((n) => !scenarios.some((s) => s.name === n));
    if (unknown.length) {
      console.error(`unknown scenario(s): ${unknown.join(", ")}`);
      return 2;
    }
    list = scenarios.filter((s) => only.has(s.name));
  }
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  const t0 = Date.now();
  for (const sc of list) {
    const s0 = Date.now();
    const r = await runOne(sc);
    const ms = Date.now() - s0;
    if (r.status === "PASS") {
      passed++;
      console.log(`PASS ${sc.name}`);
    } else if (r.status === "SKIP") {
      skipped++;
      console.log(`SKIP ${sc.name}: ${oneLine(r.reason)}`);
    } else {
      failed++;
      console.log(`FAIL ${sc.name}: ${oneLine(r.reason)}`);
    }
    if (process.env.A2C_VERBOSE) console.error(`  ${sc.name}: ${ms} ms`);
  }
  if (process.env.A2C_VERBOSE) console.error(`total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  console.log(`${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.log(`FAIL runner: ${oneLine(err && err.stack ? err.message : err)}`);
    console.log("0 passed, 1 failed");
    process.exit(1);
  },
);
