#!/usr/bin/env node
// Black-box interop scenarios for the a2c signalling server, driven by the
// official JavaScript client (socket.io-client 4.8.4) and Node's http.
//
// Run: node test/interop/a2c/node/scenarios.js [--only NAME[,NAME...]] [--list]
//
// Environment:
//   A2C_URL                server without auth, protocol 0.3.0 (required)
//   A2C_AUTH_URL           server that requires A2C_TOKEN_VALUE (x-api-key)
//   A2C_TOKEN_VALUE        the token A2C_AUTH_URL expects
//   A2C_RELAY_TIMEOUT_URL  server started with --relay-timeout 1s (optional)
//   A2C_TRANSPORTS         transports of every client that does not name its
//                          own, comma-separated: "polling,websocket" (the
//                          default: open on polling, then upgrade), "polling"
//                          or "websocket"
//   A2C_VERBOSE=1          per-scenario durations on stderr
//   A2C_TRACE=1            per-request latencies on stderr
//
// Output: one "PASS <name>" or "FAIL <name>: <reason>" line per scenario
// ("SKIP <name>: <reason>" when a server it needs is not configured), then
// "N passed, M failed". The exit code is 0 iff no scenario failed.
"use strict";

const assert = require("assert");
const crypto = require("crypto");
const http = require("http");
const path = require("path");
const { io } = require(path.join(__dirname, "node_modules", "socket.io-client"));

const PROTOCOL = "0.3.0";
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
  }

  // client creates a socket and starts recording every event it gets.
  client(url, opts = {}) {
    const o = {
      reconnection: false,
      forceNew: true,
      timeout: 5000,
      transports: opts.transports || TRANSPORTS,
    };
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
    const s = await this.connect(url, opts);
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
  `{"code":4008,"message":"Protocol version mismatch","server_version":"0.3.0","client_version":"${client}","min_supported":"0.3.0","max_supported":"0.3.999"}`;

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

scenario("version_mismatch_polling", async (ctx) => {
  const want = mismatchBody("0.2.0");
  const err = await connectFails(ctx, URL_PLAIN, { version: "0.2.0", transports: ["polling"] }, "a2c_version=0.2.0");
  const text = responseText(err);
  ok(text !== undefined, `connect_error exposes no responseText (${short(err && err.message)})`);
  eq(text, want, "connect_error responseText");
  eq(err.description, 400, "connect_error status");
  const r = await rawHTTP(ctx, eioURL(URL_PLAIN, "polling", "0.2.0"));
  eq(r.status, 400, "raw GET status");
  eq(r.headers["x-a2c-error-code"], "4008", "X-A2C-Error-Code header");
  ok(/^application\/json\b/.test(r.headers["content-type"] || ""), `Content-Type ${short(r.headers["content-type"])}, want application/json`);
  eq(r.body.toString("utf8"), want, "raw GET body");
});

scenario("version_mismatch_websocket_only", async (ctx) => {
  const err = await connectFails(ctx, URL_PLAIN, { version: "0.2.0", transports: ["websocket"] }, "websocket-only a2c_version=0.2.0");
  ok(err instanceof Error, `connect_error argument is not an Error: ${short(err)}`);
  // ws reports the refused upgrade as "Unexpected server response: 400"
  const inner = err.description && err.description.error;
  if (inner && typeof inner.message === "string") {
    ok(/\b400\b/.test(inner.message), `websocket error ${short(inner.message)}, want an HTTP 400 refusal`);
  }
});

scenario("version_mismatch_ws_upgrade_raw", async (ctx) => {
  const polling = await rawHTTP(ctx, eioURL(URL_PLAIN, "polling", "0.2.0"));
  const r = await rawHTTP(ctx, eioURL(URL_PLAIN, "websocket", "0.2.0"), {
    Connection: "Upgrade",
    Upgrade: "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": crypto.randomBytes(16).toString("base64"),
  });
  eq(r.status, 400, "upgrade GET status");
  eq(r.headers["x-a2c-error-code"], "4008", "X-A2C-Error-Code header");
  eq(r.body.toString("utf8"), mismatchBody("0.2.0"), "upgrade GET body");
  ok(r.body.equals(polling.body), `upgrade body differs from the polling body: ${short(r.body.toString())} vs ${short(polling.body.toString())}`);
});

scenario("version_patch_upgrade", async (ctx) => {
  const s = await ctx.connect(URL_PLAIN, { version: "0.3.7", transports: ["polling", "websocket"] });
  if (s.io.engine.transport.name !== "websocket") {
    await withTimeout(new Promise((r) => s.io.engine.once("upgrade", r)), 5000, "transport upgrade to websocket");
  }
  eq(s.io.engine.transport.name, "websocket", "transport after upgrade");
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join after upgrade");
});

scenario("version_patch_websocket_only", async (ctx) => {
  const s = await ctx.connect(URL_PLAIN, { version: "0.3.7", transports: ["websocket"] });
  eq(s.io.engine.transport.name, "websocket", "transport");
  const [okv, msg] = await join(s, "agent", "A", uuid());
  eq([okv, msg], [true, null], "join");
});

scenario("version_patch_polling_only", async (ctx) => {
  const s = await ctx.connect(URL_PLAIN, { version: "0.3.7", transports: ["polling"] });
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
  const c2 = await ctx.member(URL_PLAIN, "computer", "C2", o, { version: "0.3.7" });
  const c1 = await ctx.member(URL_PLAIN, "computer", "C1", o);
  const a = await ctx.member(URL_PLAIN, "agent", "A", o);
  const R = uuid();
  const res = await request(a, "server:list_room", { agent: "A", req_id: R, office_id: o });
  ok(isObj(res) && Array.isArray(res.sessions), `answer has no sessions array: ${short(res)}`);
  eq(res.req_id, R, "req_id");
  eq(res.sessions.length, 3, `session count (${short(res.sessions)})`);
  const want = {
    A: { sid: a.id, name: "A", role: "agent", office_id: o, a2c_version: "0.3.0" },
    C1: { sid: c1.id, name: "C1", role: "computer", office_id: o, a2c_version: "0.3.0" },
    C2: { sid: c2.id, name: "C2", role: "computer", office_id: o, a2c_version: "0.3.7" },
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

// ---------------------------------------------------------------- runner

async function runOne(sc) {
  const ctx = new Ctx();
  try {
    await withTimeout(Promise.resolve().then(() => sc.fn(ctx)), SCENARIO_TIMEOUT_MS, "scenario");
    return { status: "PASS" };
  } catch (err) {
    if (err instanceof Skip) return { status: "SKIP", reason: err.message };
    return { status: "FAIL", reason: (err && err.message) || String(err) };
  } finally {
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
