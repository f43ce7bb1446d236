#!/usr/bin/env python3
"""Black-box interop scenarios for the a2c signalling server, driven by
python-socketio (sync Client), requests and websocket-client.

Run by the Go harness (test/interop) as

    /usr/bin/python3 test/interop/a2c/python/scenarios.py [--only NAME[,NAME...]] [--list]

with the environment:

    A2C_VERSION             the protocol version of every server (default 0.4.0);
                            clients speak it, and every version-dependent
                            expectation derives from it
    A2C_URL                 server without auth (path /socket.io/)
    A2C_AUTH_URL            server that wants the token A2C_TOKEN_VALUE
                            (auth field / header x-api-key, or Authorization: Bearer)
    A2C_TOKEN_VALUE         that token
    A2C_RELAY_TIMEOUT_URL   optional: server started with --relay-timeout 1s
    A2C_TRANSPORTS          optional: the transports of every client that does not
                            name its own, comma-separated: "polling,websocket"
                            (the default: open on polling, then upgrade), "polling"
                            or "websocket"
    A2C_COMPUTER_OFFICE, A2C_COMPUTER    optional: a real a2c Computer alone in
                            that office, with --landing-root A2C_LANDING_ROOT,
                            --skills A2C_SKILLS_DIR and the toolsrv MCP server
                            as bundle "fx" (test/interop/a2c/scenario_computer_test.go)
    A2C_NOROOT_OFFICE, A2C_NOROOT_COMPUTER  optional: a Computer without a
                            landing root
    A2C_PLACEMENT           optional (a cluster of servers): where each peer
                            connects, as JSON {"<a server URL above>": {"agent":
                            [SLOT...], "computer": [SLOT...]}}, SLOT = {"url": U,
                            "source": "127.0.0.x" (optional: the local address the
                            peer's connections come from, which a load balancer
                            hashing on the client address routes by)}. A
                            scenario's Agents take the agent slots, its Computers
                            the computer slots, each in turn. Unset: every peer
                            connects to the server URL itself.

Output: one line "PASS <name>" or "FAIL <name>: <reason>" per scenario, then
"N passed, M failed". Exit status 0 iff nothing failed. Scenarios whose
server is not configured are skipped (noted on stderr, not counted).
"""

import argparse
import base64
import hashlib
import json
import os
import socket
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

import engineio
import requests
import socketio
import websocket

NS = "/smcp"
VERSION = os.environ.get("A2C_VERSION", "0.4.0")
_MAJOR, _MINOR, _ = (int(x) for x in VERSION.split("."))
# A patch of the server's MAJOR.MINOR (admitted) and the other supported
# minor (refused both ways: 0.3.x at a 0.4 server and 0.4.x at a 0.3 one).
PATCH_VERSION = f"{_MAJOR}.{_MINOR}.7"
OTHER_VERSION = "0.3.0" if (_MAJOR, _MINOR) >= (0, 4) else "0.4.0"
HAS_PUT_BLOB = (_MAJOR, _MINOR) >= (0, 4)
EIO_PATH = "/socket.io/"

URL = os.environ.get("A2C_URL", "").rstrip("/")
AUTH_URL = os.environ.get("A2C_AUTH_URL", "").rstrip("/")
TOKEN = os.environ.get("A2C_TOKEN_VALUE", "")
RELAY_TIMEOUT_URL = os.environ.get("A2C_RELAY_TIMEOUT_URL", "").rstrip("/")
# Scenarios about one transport name theirs; all others use these, so that
# the same scenarios run over polling only, WebSocket only and the upgrade.
TRANSPORTS = tuple(t.strip() for t in os.environ.get("A2C_TRANSPORTS", "polling,websocket").split(",") if t.strip())

NOTIFY_EVENTS = [
    "notify:enter_office",
    "notify:leave_office",
    "notify:update_config",
    "notify:update_tool_list",
    "notify:update_desktop",
    "notify:update_skills",
    "notify:tool_call_cancel",
]
CLIENT_EVENTS = [
    "client:tool_call",
    "client:get_tools",
    "client:get_config",
    "client:get_desktop",
    "client:get_resources",
    "client:get_skills",
    "client:get_skill",
    "client:get_blob",
]

CALL_TIMEOUT = 5  # seconds, for acks the server answers itself
QUIET = 0.5  # seconds to wait when asserting that nothing arrives

MISSING_BODY = b'{"code":400,"message":"Missing a2c_version query parameter"}'


def mismatch_body(client):
    """The exact 4008 body a server of VERSION answers a client of client."""
    return ('{"code":4008,"message":"Protocol version mismatch","server_version":"%s",'
            '"client_version":"%s","min_supported":"%d.%d.0","max_supported":"%d.%d.999"}'
            % (VERSION, client, _MAJOR, _MINOR, _MAJOR, _MINOR)).encode()




# ---------------------------------------------------------------- helpers

class Fail(Exception):
    """A failed assertion; its text is the scenario's short reason."""


class NoAck(Exception):
    """Raised by a Computer handler so that python-socketio sends no ack."""


_orig_excepthook = threading.excepthook


def _excepthook(args):
    # python-socketio runs each handler in its own thread and acks with the
    # handler's return value (even None). A handler that raises sends no
    # ack: that is how a never-answering Computer is modelled.
    if args.exc_type is NoAck:
        return
    _orig_excepthook(args)


threading.excepthook = _excepthook


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def short(v, n=300):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def eq(got, want, what):
    if got != want:
        raise Fail(f"{what}: got {short(got)}, want {short(want)}")


def is_error_payload(v, code=None):
    return (isinstance(v, dict) and isinstance(v.get("code"), int) and not isinstance(v.get("code"), bool)
            and isinstance(v.get("message"), str) and (code is None or v["code"] == code))


def expect_error(v, code, what):
    if not is_error_payload(v, code):
        raise Fail(f"{what}: want a flat ErrorPayload with code {code}, got {short(v)}")
    check(v["message"] != "", f"{what}: empty message in {short(v)}")


def rid():
    return str(uuid.uuid4())


def office():
    return str(uuid.uuid4())


def http():
    s = requests.Session()
    s.trust_env = False
    return s


def eio_url(base, transport="polling", version=VERSION, extra=""):
    q = f"EIO=4&transport={transport}"
    if version is not None:
        q += f"&a2c_version={version}"
    return f"{base}{EIO_PATH}?{q}{extra}"


def ws_url(http_url):
    return "ws" + http_url[len("http"):] if http_url.startswith("http") else http_url


def header_map(resp):
    """Response headers minus Date, names lower-cased."""
    return {k.lower(): v for k, v in resp.headers.items() if k.lower() != "date"}


def ok_tuple(ack, what):
    if ack != (True, None):
        raise Fail(f"{what}: want ack (True, None), got {short(ack)}")


def refused_tuple(ack, what):
    if not (isinstance(ack, tuple) and len(ack) == 2 and ack[0] is False
            and isinstance(ack[1], str) and ack[1] != ""):
        raise Fail(f"{what}: want ack (False, '<message>'), got {short(ack)}")
    return ack[1]


def wait_until(pred, timeout, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


# ---------------------------------------------------------------- placement
#
# A2C_PLACEMENT (see the module doc) spreads the peers over the nodes of a
# cluster. A source address is bound on both transports: long-polling
# through the peer's requests session (an adapter that hands urllib3 a
# source_address), WebSocket through a socket connected from that address
# and handed to websocket-client (its "socket" option), since
# python-engineio forwards no socket options of its own.

PLACEMENT = {k.rstrip("/"): v for k, v in json.loads(os.environ.get("A2C_PLACEMENT") or "{}").items()}


class _SourceAdapter(requests.adapters.HTTPAdapter):
    """Every connection of the session comes from the local address source."""

    def __init__(self, source):
        self._source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self._source, 0)
        super().init_poolmanager(*args, **kwargs)


_ws_source = threading.local()  # the source of the WebSocket being opened on this thread


def _install_ws_source():
    """Makes engineio's WebSocket connections honour an engineio client's
    a2c_source attribute (only done when A2C_PLACEMENT is set)."""
    create, connect_ws = websocket.create_connection, engineio.Client._connect_websocket

    def create_connection(url, timeout=None, **options):
        source = getattr(_ws_source, "source", None)
        if source and options.get("socket") is None:
            u = urllib.parse.urlsplit(url)
            options["socket"] = socket.create_connection((u.hostname, u.port or 80), timeout=timeout,
                                                         source_address=(source, 0))
        return create(url, timeout=timeout, **options)

    def _connect_websocket(self, *args, **kwargs):
        _ws_source.source = getattr(self, "a2c_source", None)
        try:
            return connect_ws(self, *args, **kwargs)
        finally:
            _ws_source.source = None

    websocket.create_connection = create_connection
    engineio.Client._connect_websocket = _connect_websocket


if PLACEMENT:
    _install_ws_source()


class Peer:
    """One python-socketio client: records every notify:* and client:* it
    receives; Computers answer client:* through self.responders."""

    def __init__(self, ctx, name, role):
        self.ctx = ctx
        self.name = name
        self.role = role
        self.session = http()
        self.sio = socketio.Client(reconnection=False, http_session=self.session)
        self.cond = threading.Condition()
        self.events = []  # (event, payload) in arrival order, notify:* and others
        self.requests = []  # (event, payload) of client:* received
        self.responders = {}  # event -> fn(payload) -> ack value
        self.stop = threading.Event()  # set at cleanup: releases blocked handlers
        self.connect_errors = []
        self.left_office = None  # an office to leave (acked) before disconnecting
        for ev in NOTIFY_EVENTS:
            self.sio.on(ev, self._notify_handler(ev), namespace=NS)
        for ev in CLIENT_EVENTS:
            self.sio.on(ev, self._client_handler(ev), namespace=NS)
        self.sio.on("*", self._other_handler, namespace=NS)
        self.sio.on("connect_error", self._connect_error("/"))
        self.sio.on("connect_error", self._connect_error(NS), namespace=NS)
        ctx.peers.append(self)

    # -- handlers
    def _record(self, lst, ev, args):
        payload = args[0] if len(args) == 1 else (list(args) if args else None)
        with self.cond:
            lst.append((ev, payload))
            self.cond.notify_all()
        return payload

    def _notify_handler(self, ev):
        def h(*args):
            self._record(self.events, ev, args)
        return h

    def _other_handler(self, ev, *args):
        self._record(self.events, ev, args)

    def _client_handler(self, ev):
        def h(*args):
            payload = self._record(self.requests, ev, args)
            fn = self.responders.get(ev)
            if fn is None:
                return {"code": 500, "message": "test computer has no responder for " + ev}
            return fn(payload)
        return h

    def _connect_error(self, ns):
        def h(*args):
            with self.cond:
                self.connect_errors.append((ns, args[0] if len(args) == 1 else list(args)))
                self.cond.notify_all()
        return h

    # -- connection
    def connect(self, url=None, transports=TRANSPORTS, version=VERSION,
                auth=None, headers=None, wait_timeout=5):
        url, source = self.ctx.place(url or URL, self.role)
        if source:
            self.session.mount("http://", _SourceAdapter(source))
            self.sio.eio.a2c_source = source
        full = f"{url}?a2c_version={version}" if version is not None else url
        kw = {}
        if auth is not None:
            kw["auth"] = auth
        self.sio.connect(full, namespaces=[NS], transports=list(transports),
                         headers=headers or {}, wait_timeout=wait_timeout, **kw)
        return self

    def close(self):
        self.stop.set()
        if self.left_office:
            # a Computer's office holds one Agent: make room for the next
            try:
                if self.sio.connected:
                    self.leave(self.left_office)
            except Exception:
                pass
            self.left_office = None
        try:
            if self.sio.connected or self.sio.eio.state == "connected":
                self.sio.disconnect()
        except Exception:
            pass
        try:
            self.session.close()
        except Exception:
            pass

    # -- calls
    def call(self, event, data=None, timeout=CALL_TIMEOUT):
        return self.sio.call(event, data, namespace=NS, timeout=timeout)

    def call_noargs(self, event, timeout=CALL_TIMEOUT):
        return self.sio.call(event, namespace=NS, timeout=timeout)

    def emit(self, event, data=None, callback=None):
        self.sio.emit(event, data, namespace=NS, callback=callback)

    def join(self, office_id, name=None, role=None):
        return self.call("server:join_office", {"role": role or self.role, "name": name or self.name,
                                                "office_id": office_id})

    def leave(self, office_id):
        return self.call("server:leave_office", {"office_id": office_id})

    # -- observation
    def received(self, ev):
        with self.cond:
            return [p for (e, p) in self.events if e == ev]

    def all_events(self):
        with self.cond:
            return list(self.events)

    def got_requests(self, ev=None):
        with self.cond:
            return [p for (e, p) in self.requests if ev is None or e == ev]

    def _wait(self, lst_name, ev, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for (e, p) in getattr(self, lst_name):
                    if e == ev and (pred is None or pred(p)):
                        return p
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [x for x in getattr(self, lst_name) if x[0] == ev]
                    raise Fail(f"{self.name}: no {ev}{' ' + what if what else ''} within {timeout}s"
                               f" (got {short(seen, 200)})")
                self.cond.wait(left)

    # Waits are generous: the suites run five at a time beside real
    # Computers on two cores, where a polling client's thread can be
    # starved for seconds; a lost event still fails.
    def wait_event(self, ev, pred=None, timeout=10, what=""):
        return self._wait("events", ev, pred, timeout, what)

    def wait_request(self, ev, timeout=10):
        return self._wait("requests", ev, None, timeout, "")


class Ctx:
    """Per-scenario resources; close() disconnects every client made."""

    def __init__(self):
        self.peers = []
        self.placed = {}  # (server url, role) -> peers placed so far

    def place(self, url, role):
        """Where a peer of role connects for the server at url: (url, source
        address or None); the server itself unless A2C_PLACEMENT says."""
        slots = PLACEMENT.get(url.rstrip("/"), {}).get(role)
        if not slots:
            return url, None
        i = self.placed.get((url, role), 0)
        self.placed[(url, role)] = i + 1
        slot = slots[i % len(slots)]
        return slot["url"].rstrip("/"), slot.get("source")

    def peer(self, name, role="agent"):
        return Peer(self, name, role)

    def agent(self, name="A", office_id=None, url=None):
        p = self.peer(name, "agent").connect(url=url)
        if office_id is not None:
            ok_tuple(p.join(office_id), f"agent {name} joins")
        return p

    def computer(self, name="C1", office_id=None, url=None):
        p = self.peer(name, "computer").connect(url=url)
        if office_id is not None:
            ok_tuple(p.join(office_id), f"computer {name} joins")
        return p

    def close(self):
        for p in self.peers:
            p.stop.set()
        for p in self.peers:
            p.close()


def tool_call_payload(agent, computer, req_id=None, text="hi", timeout=10):
    return {"agent": agent, "req_id": req_id or rid(), "computer": computer,
            "tool_name": "bundle__echo", "params": {"text": text}, "timeout": timeout}


ECHO_RESULT = {"content": [{"type": "text", "text": "hi"}], "isError": False,
               "meta": {"x": 1}, "structuredContent": {"k": [1, 2]}}


def echo_responder(payload):
    text = (payload or {}).get("params", {}).get("text", "")
    return {"content": [{"type": "text", "text": text}], "isError": False,
            "meta": {"x": 1}, "structuredContent": {"k": [1, 2]}}


# ---------------------------------------------------------------- scenarios

SCENARIOS = []


def scenario(needs=("A2C_URL",)):
    def deco(fn):
        SCENARIOS.append((fn.__name__, fn, needs))
        return fn
    return deco


# -- 1. version gate

@scenario()
def version_missing_polling(ctx):
    r = http().get(eio_url(URL, version=None), timeout=5)
    eq(r.status_code, 400, "status")
    eq(r.headers.get("Content-Type", "").split(";")[0].strip(), "application/json", "Content-Type")
    eq(r.content, MISSING_BODY, "body")


@scenario()
def version_invalid_polling(ctx):
    r = http().get(eio_url(URL, version="abc"), timeout=5)
    eq(r.status_code, 400, "status")
    eq(r.headers.get("Content-Type", "").split(";")[0].strip(), "application/json", "Content-Type")
    body = r.json()
    check(isinstance(body, dict), f"body not an object: {short(r.text)}")
    eq(body.get("code"), 400, "body code")
    check(isinstance(body.get("message"), str) and body["message"].startswith("Invalid a2c_version:"),
          f"message should start 'Invalid a2c_version:', got {short(body.get('message'))}")


@scenario()
def version_mismatch_polling(ctx):
    # an old minor, and the other supported minor (0.3 at a 0.4 server, 0.4
    # at a 0.3 server): the same 4008 body naming this server's range
    for client in ("0.2.0", OTHER_VERSION):
        r = http().get(eio_url(URL, version=client), timeout=5)
        eq(r.status_code, 400, f"status ({client})")
        eq(r.headers.get("Content-Type", "").split(";")[0].strip(), "application/json", f"Content-Type ({client})")
        eq(r.headers.get("X-A2C-Error-Code"), "4008", f"X-A2C-Error-Code header ({client})")
        eq(r.content, mismatch_body(client), f"body ({client})")


@scenario()
def version_patch_compatible_polling(ctx):
    r = http().get(eio_url(URL, version=PATCH_VERSION), timeout=5)
    eq(r.status_code, 200, "status")
    check(r.text.startswith('0{"sid":'), f"want an Engine.IO open packet, got {short(r.text)}")
    open_pkt = json.loads(r.text[1:])
    check(isinstance(open_pkt.get("sid"), str) and open_pkt["sid"], f"open packet without sid: {short(r.text)}")


@scenario()
def version_refused_websocket_client(ctx):
    for version in (None, "abc", "0.2.0", OTHER_VERSION):
        url = ws_url(eio_url(URL, transport="websocket", version=version))
        try:
            ws = websocket.create_connection(url, timeout=5)
        except websocket.WebSocketBadStatusException as e:
            eq(e.status_code, 400, f"WS handshake status (a2c_version={version})")
            continue
        ws.close()
        raise Fail(f"WS upgrade with a2c_version={version} was accepted")
    # a compatible direct upgrade opens and receives the Engine.IO open packet
    ws = websocket.create_connection(ws_url(eio_url(URL, transport="websocket", version=PATCH_VERSION)), timeout=5)
    try:
        first = ws.recv()
        check(isinstance(first, str) and first.startswith('0{"sid":'), f"want open packet, got {short(first)}")
    finally:
        ws.close()


@scenario()
def version_refused_websocket_identical(ctx):
    s = http()
    key = base64.b64encode(os.urandom(16)).decode()
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": key}
    for version in (None, "abc", "0.2.0", OTHER_VERSION):
        p = s.get(eio_url(URL, version=version), timeout=5)
        w = s.get(eio_url(URL, transport="websocket", version=version), headers=upgrade, timeout=5)
        eq(w.status_code, 400, f"WS-upgrade status (a2c_version={version})")
        eq(w.content, p.content, f"WS-upgrade body vs polling body (a2c_version={version})")
        eq(header_map(w), header_map(p), f"WS-upgrade headers vs polling headers (a2c_version={version})")
        if version in ("0.2.0", OTHER_VERSION):
            eq(w.headers.get("X-A2C-Error-Code"), "4008", "WS-upgrade X-A2C-Error-Code")
            eq(w.content, mismatch_body(version), "WS-upgrade body")
        if version is None:
            eq(w.content, MISSING_BODY, "WS-upgrade body")


@scenario()
def version_refused_sio_client(ctx):
    for transports in (["polling", "websocket"], ["websocket"]):
        for version in (None, "abc", "0.2.0", OTHER_VERSION):
            p = ctx.peer("A", "agent")
            try:
                p.connect(transports=transports, version=version, wait_timeout=2)
            except socketio.exceptions.ConnectionError:
                pass
            else:
                raise Fail(f"connect with a2c_version={version} over {transports} succeeded")
            check(not p.sio.connected, "client reports connected after refusal")
            if transports[0] == "polling" and version in ("0.2.0", OTHER_VERSION):
                # python-socketio hands the HTTP 400 body to connect_error
                errs = [a for (ns, a) in p.connect_errors if ns == "/"]
                check(errs, "no connect_error carrying the 4008 body")
                eq(errs[0], json.loads(mismatch_body(version)), "connect_error data")


def _connect_and_call(ctx, transports):
    o = office()
    c = ctx.peer("C1", "computer").connect(transports=transports)
    c.responders["client:tool_call"] = echo_responder
    ok_tuple(c.join(o), "computer joins")
    a = ctx.peer("A", "agent").connect(transports=transports)
    ok_tuple(a.join(o), "agent joins")
    res = a.call("client:tool_call", tool_call_payload("A", "C1"), timeout=10)
    eq(res, ECHO_RESULT, "tool_call result")
    return a, c


@scenario()
def connect_polling_then_websocket(ctx):
    a, c = _connect_and_call(ctx, ["polling", "websocket"])
    for p in (a, c):
        check(wait_until(lambda: p.sio.transport() == "websocket", 3),
              f"{p.name}: transport is {p.sio.transport()!r} after upgrade, want 'websocket'")
    # still works after the upgrade
    res = a.call("client:tool_call", tool_call_payload("A", "C1"), timeout=10)
    eq(res, ECHO_RESULT, "tool_call result after upgrade")


@scenario()
def connect_websocket_only(ctx):
    a, c = _connect_and_call(ctx, ["websocket"])
    eq(a.sio.transport(), "websocket", "transport")


@scenario()
def connect_polling_only(ctx):
    a, c = _connect_and_call(ctx, ["polling"])
    eq(a.sio.transport(), "polling", "transport")


# -- 2. auth

def _auth_refused(ctx, what, **kw):
    p = ctx.peer("A", "agent")
    try:
        p.connect(url=AUTH_URL, wait_timeout=1, **kw)
    except socketio.exceptions.ConnectionError:
        pass
    else:
        raise Fail(f"connect {what} succeeded")
    check(any(ns == NS for (ns, _) in p.connect_errors),
          f"connect {what}: no connect_error on {NS} (got {short(p.connect_errors)})")


def _auth_ok(ctx, **kw):
    o = office()
    p = ctx.peer("A", "agent").connect(url=AUTH_URL, **kw)
    check(p.sio.connected, "not connected")
    ok_tuple(p.join(o), "join after auth")


@scenario(needs=("A2C_AUTH_URL", "A2C_TOKEN_VALUE"))
def auth_refused_without_token(ctx):
    _auth_refused(ctx, "without a token")


@scenario(needs=("A2C_AUTH_URL", "A2C_TOKEN_VALUE"))
def auth_refused_wrong_token(ctx):
    _auth_refused(ctx, "with a wrong auth token", auth={"x-api-key": TOKEN + "-wrong"})
    _auth_refused(ctx, "with a wrong header token", headers={"x-api-key": "wrong-" + TOKEN})


@scenario(needs=("A2C_AUTH_URL", "A2C_TOKEN_VALUE"))
def auth_token_in_auth_object(ctx):
    _auth_ok(ctx, auth={"x-api-key": TOKEN})


@scenario(needs=("A2C_AUTH_URL", "A2C_TOKEN_VALUE"))
def auth_token_in_header(ctx):
    _auth_ok(ctx, headers={"x-api-key": TOKEN})


@scenario(needs=("A2C_AUTH_URL", "A2C_TOKEN_VALUE"))
def auth_token_bearer(ctx):
    _auth_ok(ctx, headers={"Authorization": "Bearer " + TOKEN})


# -- 3. offices

@scenario()
def join_enter_notifications(ctx):
    o = office()
    c1 = ctx.computer("C1", o)
    a = ctx.peer("A", "agent").connect()
    ok_tuple(a.join(o), "agent joins")
    got = c1.wait_event("notify:enter_office", what="for the agent")
    eq(got, {"office_id": o, "agent": "A"}, "C1's enter_office")
    c2 = ctx.peer("C2", "computer").connect()
    ok_tuple(c2.join(o), "C2 joins")
    got = a.wait_event("notify:enter_office")
    eq(got, {"office_id": o, "computer": "C2"}, "agent's enter_office")
    c1.wait_event("notify:enter_office", pred=lambda p: p.get("computer") == "C2", what="for C2")
    time.sleep(0.3)
    eq(a.received("notify:enter_office"), [{"office_id": o, "computer": "C2"}], "agent's enter_office list")
    eq(c2.received("notify:enter_office"), [], "C2 got its own enter_office")
    eq(c1.received("notify:enter_office"), [{"office_id": o, "agent": "A"}, {"office_id": o, "computer": "C2"}],
       "C1's enter_office list")


@scenario()
def join_second_agent_refused(ctx):
    o = office()
    ctx.agent("A", o)
    b = ctx.peer("B", "agent").connect()
    eq(b.join(o), (False, "Room already has an agent"), "second agent's join ack")


@scenario()
def join_duplicate_computer_name(ctx):
    o, o2 = office(), office()
    a = ctx.agent("A", o)
    ctx.computer("C1", o)
    dup = ctx.peer("C1", "computer").connect()
    refused_tuple(dup.join(o), "same computer name in the same office")
    ok_tuple(dup.join(o2), "same computer name in another office")
    time.sleep(0.2)
    eq(a.received("notify:enter_office"), [{"office_id": o, "computer": "C1"}], "agent's enter_office list")


@scenario()
def join_agent_second_office_refused(ctx):
    o, o2 = office(), office()
    a = ctx.agent("A", o)
    refused_tuple(a.join(o2), "agent joining a second office")
    # still in the first office
    c = ctx.computer("C1", o)
    c.responders["client:tool_call"] = echo_responder
    eq(a.call("client:tool_call", tool_call_payload("A", "C1"), timeout=10), ECHO_RESULT, "tool_call in first office")


@scenario()
def join_malformed_refused(ctx):
    p = ctx.peer("X", "agent").connect()
    refused_tuple(p.call("server:join_office", {"role": "boss", "name": "X", "office_id": office()}), "bad role")
    refused_tuple(p.call("server:join_office", {"role": "agent", "name": "", "office_id": office()}), "empty name")
    refused_tuple(p.call("server:join_office", "not an object"), "non-object payload")
    ok_tuple(p.join(office()), "valid join afterwards")


@scenario()
def computer_switches_office(ctx):
    o1, o2 = office(), office()
    a1 = ctx.agent("A1", o1)
    a2 = ctx.agent("A2", o2)
    c = ctx.computer("C1", o1)
    c.responders["client:tool_call"] = echo_responder
    a1.wait_event("notify:enter_office", what="for C1 in O1")
    ok_tuple(c.join(o2), "C1 joins O2")
    eq(a1.wait_event("notify:leave_office"), {"office_id": o1, "computer": "C1"}, "A1's leave_office")
    eq(a2.wait_event("notify:enter_office"), {"office_id": o2, "computer": "C1"}, "A2's enter_office")
    expect_error(a1.call("client:tool_call", tool_call_payload("A1", "C1"), timeout=10), 4104,
                 "tool_call from O1's agent after the switch")
    eq(c.got_requests("client:tool_call"), [], "C1 received a call from O1")
    req = tool_call_payload("A2", "C1")
    eq(a2.call("client:tool_call", req, timeout=10), ECHO_RESULT, "tool_call from O2's agent")
    eq(c.got_requests("client:tool_call"), [req], "C1's received calls")


@scenario()
def leave_office_notifies(ctx):
    o = office()
    a = ctx.agent("A", o)
    c1 = ctx.computer("C1", o)
    c2 = ctx.computer("C2", o)
    ok_tuple(c1.leave(o), "C1 leaves")
    eq(a.wait_event("notify:leave_office"), {"office_id": o, "computer": "C1"}, "agent's leave_office")
    eq(c2.wait_event("notify:leave_office"), {"office_id": o, "computer": "C1"}, "C2's leave_office")
    ok_tuple(a.leave(o), "agent leaves")
    eq(c2.wait_event("notify:leave_office", pred=lambda p: "agent" in p), {"office_id": o, "agent": "A"},
       "C2's leave_office for the agent")
    time.sleep(0.2)
    eq(c1.received("notify:leave_office"), [], "C1 got notifications after leaving")
    eq(a.received("notify:leave_office"), [{"office_id": o, "computer": "C1"}], "agent's leave_office list")


@scenario()
def disconnect_notifies_leave(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    a.wait_event("notify:enter_office")
    c.sio.disconnect()
    # Over long-polling, python-engineio's disconnect() marks the client
    # disconnected at once, and its write loop, if it is not already
    # waiting on the queue (a starved thread on a loaded machine), exits
    # without POSTing the queued DISCONNECT and CLOSE: the server then
    # learns of the loss at the ping timeout (pingInterval 25 s +
    # pingTimeout 20 s), which is still a bounded time.
    timeout = 50 if TRANSPORTS == ("polling",) else 10
    eq(a.wait_event("notify:leave_office", timeout=timeout), {"office_id": o, "computer": "C1"}, "agent's leave_office")


# -- 4. relay

@scenario()
def relay_tool_call(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    c.responders["client:tool_call"] = lambda p: dict(ECHO_RESULT)
    req = {"agent": "A", "req_id": rid(), "computer": "C1", "tool_name": "bundle__echo",
           "params": {"text": "hi"}, "timeout": 10}
    res = a.call("client:tool_call", req, timeout=10)
    eq(c.got_requests("client:tool_call"), [req], "payload received by the computer")
    eq(res, ECHO_RESULT, "result received by the agent")


@scenario()
def relay_get_tools(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    req = {"agent": "A", "req_id": rid(), "computer": "C1"}
    tools = [{"name": "bundle__echo", "bundle_id": "bundle", "description": "Echo text",
              "params_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
              "return_schema": None, "meta": {"a2c_tool_meta": "{\"tags\":[\"x\"]}", "n": 1.5, "b": True}}]
    answer = {"tools": tools, "req_id": req["req_id"]}
    c.responders["client:get_tools"] = lambda p: answer
    res = a.call("client:get_tools", req, timeout=10)
    eq(c.got_requests("client:get_tools"), [req], "payload received by the computer")
    eq(res, answer, "answer received by the agent")


@scenario()
def relay_get_config(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    req = {"agent": "A", "req_id": rid(), "computer": "C1"}
    answer = {"inputs": [{"id": "k", "type": "promptString", "description": "API key", "password": True}],
              "servers": {"bundle": {"name": "bundle", "type": "stdio", "disabled": False,
                                     "server_parameters": {"command": "echo", "args": ["x"], "env": None}}}}
    c.responders["client:get_config"] = lambda p: answer
    res = a.call("client:get_config", req, timeout=10)
    eq(c.got_requests("client:get_config"), [req], "payload received by the computer")
    eq(res, answer, "answer received by the agent")
    check("req_id" not in res, "get_config answer grew a req_id")


@scenario()
def relay_error_payload_passthrough(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    req = {"agent": "A", "req_id": rid(), "computer": "C1", "mcp_server": "x"}
    err = {"code": 4014, "message": "MCP Server not registered", "mcp_server": "x", "mcp_server_name": "x"}
    c.responders["client:get_resources"] = lambda p: err
    res = a.call("client:get_resources", req, timeout=10)
    eq(c.got_requests("client:get_resources"), [req], "payload received by the computer")
    eq(res, err, "ErrorPayload received by the agent")


# -- 5. errors

@scenario()
def error_not_in_office(ctx):
    a = ctx.agent("A")
    expect_error(a.call("client:tool_call", tool_call_payload("A", "C1")), 4103, "tool_call before joining")


@scenario()
def error_cross_office(ctx):
    o, o2 = office(), office()
    a = ctx.agent("A", o)
    ctx.computer("C1", o)
    cx = ctx.computer("CX-" + o2[:8], o2)
    expect_error(a.call("client:tool_call", tool_call_payload("A", cx.name)), 4104, "tool_call to another office")
    expect_error(a.call("client:get_tools", {"agent": "A", "req_id": rid(), "computer": cx.name}), 4104,
                 "get_tools to another office")
    eq(cx.got_requests(), [], "computer of the other office received requests")


@scenario()
def error_unknown_computer(ctx):
    o = office()
    a = ctx.agent("A", o)
    ctx.computer("C1", o)
    expect_error(a.call("client:tool_call", tool_call_payload("A", "nobody-" + rid())), 404,
                 "tool_call to an unknown computer")


@scenario()
def error_malformed_payload(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    c.responders["client:tool_call"] = echo_responder
    bad_timeout = tool_call_payload("A", "C1")
    bad_timeout["timeout"] = "x"
    no_req_id = tool_call_payload("A", "C1")
    del no_req_id["req_id"]
    cases = [
        ("timeout \"x\"", "client:tool_call", bad_timeout),
        ("missing req_id", "client:tool_call", no_req_id),
        ("string payload", "client:tool_call", "hello"),
        ("array payload", "client:tool_call", [1, 2]),
        ("get_tools without computer", "client:get_tools", {"agent": "A", "req_id": rid()}),
    ]
    for what, ev, data in cases:
        expect_error(a.call(ev, data), 400, what)
    expect_error(a.call_noargs("client:tool_call"), 400, "no payload")
    eq(c.got_requests(), [], "computer received malformed requests")
    check(a.sio.connected, "agent disconnected after malformed payloads")
    eq(a.call("client:tool_call", tool_call_payload("A", "C1"), timeout=10), ECHO_RESULT,
       "valid tool_call afterwards")


# -- 6. cancel

@scenario()
def cancel_broadcast(ctx):
    o, o2 = office(), office()
    a = ctx.agent("A", o)
    c1 = ctx.computer("C1", o)
    a2 = ctx.agent("A2", o2)
    c2 = ctx.computer("C2", o2)
    cancelled = {"content": [{"type": "text", "text": "cancelled"}], "isError": True,
                 "meta": {"a2c_cancelled": True, "a2c_cancel_reason": "agent_requested"}}

    def slow_tool(payload):
        # answer when the cancel arrives (real Computers interrupt the call)
        try:
            c1.wait_event("notify:tool_call_cancel", pred=lambda p: p.get("req_id") == payload["req_id"],
                          timeout=8)
        except Fail:
            return ECHO_RESULT
        return cancelled

    c1.responders["client:tool_call"] = slow_tool
    r = rid()
    done = threading.Event()
    box = []
    a.emit("client:tool_call", tool_call_payload("A", "C1", req_id=r), callback=lambda *args: (box.append(args),
                                                                                               done.set()))
    c1.wait_request("client:tool_call")
    ack = a.call("server:tool_call_cancel", {"agent": "A", "req_id": r})
    check(not is_error_payload(ack) and not (isinstance(ack, dict) and "code" in ack),
          f"cancel ack is an error: {short(ack)}")
    eq(c1.wait_event("notify:tool_call_cancel"), {"agent": "A", "req_id": r}, "C1's tool_call_cancel")
    check(done.wait(10), "original tool_call never acked after cancel")
    eq(box[0], (cancelled,), "original tool_call ack")
    time.sleep(QUIET)
    eq(c2.received("notify:tool_call_cancel"), [], "computer of another office got the cancel")
    eq(a2.received("notify:tool_call_cancel"), [], "agent of another office got the cancel")
    eq(a.received("notify:tool_call_cancel"), [], "sender got its own cancel")
    eq(c1.received("notify:tool_call_cancel"), [{"agent": "A", "req_id": r}], "C1's cancel list")


# -- 7. deadlines

def never_answer(peer):
    def h(payload):
        peer.stop.wait(12)
        raise NoAck()
    return h


@scenario()
def tool_call_deadline(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    c.responders["client:tool_call"] = never_answer(c)
    t0 = time.monotonic()
    res = a.call("client:tool_call", tool_call_payload("A", "C1", timeout=1), timeout=10)
    took = time.monotonic() - t0
    check(0.9 <= took <= 8, f"deadline answer took {took:.1f}s, want 1s..8s (timeout 1 + server slack)")
    check(isinstance(res, dict), f"want a CallToolResult, got {short(res)}")
    eq(res.get("isError"), True, "isError")
    meta = res.get("meta")
    check(isinstance(meta, dict) and meta.get("a2c_timeout") is True, f"want meta.a2c_timeout true, got {short(res)}")
    check(isinstance(res.get("content"), list), f"content not a list: {short(res)}")


@scenario(needs=("A2C_RELAY_TIMEOUT_URL",))
def get_tools_relay_timeout(ctx):
    o = office()
    a = ctx.agent("A", o, url=RELAY_TIMEOUT_URL)
    c = ctx.computer("C1", o, url=RELAY_TIMEOUT_URL)
    c.responders["client:get_tools"] = never_answer(c)
    t0 = time.monotonic()
    res = a.call("client:get_tools", {"agent": "A", "req_id": rid(), "computer": "C1"}, timeout=6)
    took = time.monotonic() - t0
    expect_error(res, 408, "get_tools to a silent computer")
    check(took <= 3, f"408 took {took:.1f}s, want <= 3s")


# -- 8. agent disconnects mid-call

@scenario()
def agent_disconnect_mid_call(ctx):
    o = office()
    a = ctx.agent("A", o)
    c = ctx.computer("C1", o)
    answered = threading.Event()

    def late(payload):
        time.sleep(1)
        answered.set()
        return ECHO_RESULT

    c.responders["client:tool_call"] = late
    a.emit("client:tool_call", tool_call_payload("A", "C1"), callback=lambda *args: None)
    c.wait_request("client:tool_call")
    a.sio.disconnect()
    check(answered.wait(5), "computer handler did not finish")
    time.sleep(0.3)
    check(c.sio.connected, "computer was disconnected after its late answer")
    eq([e for (e, _) in c.all_events() if e not in ("notify:leave_office",)], [],
       "computer got unexpected events")
    # the server is fine: a fresh office does a full relayed call
    o2 = office()
    a2 = ctx.agent("A", o2)
    c2 = ctx.computer("C9", o2)
    c2.responders["client:tool_call"] = echo_responder
    eq(a2.call("client:tool_call", tool_call_payload("A", "C9"), timeout=10), ECHO_RESULT, "fresh relayed call")
    r = http().get(URL + "/healthz", timeout=5)
    eq(r.status_code, 200, "/healthz status")


# -- 9. list_room

@scenario()
def list_room(ctx):
    o, o2 = office(), office()
    early = ctx.agent("E")
    expect_error(early.call("server:list_room", {"agent": "E", "req_id": rid(), "office_id": o}), 4103,
                 "list_room before joining")
    cb = ctx.computer("C-b", o)
    a = ctx.agent("A", o)
    ca = ctx.computer("C-a", o)
    ctx.agent("Z", o2)
    ctx.computer("C-z", o2)
    r = rid()
    res = a.call("server:list_room", {"agent": "A", "req_id": r, "office_id": o})
    check(isinstance(res, dict), f"want ListRoomRet, got {short(res)}")
    eq(res.get("req_id"), r, "req_id")
    sessions = res.get("sessions")
    check(isinstance(sessions, list), f"sessions not a list: {short(res)}")
    eq(len(sessions), 3, f"session count in {short(sessions)}")
    eq(sessions[0].get("name"), "A", "first session (the agent)")
    want = {}
    for p in (a, cb, ca):
        want[p.name] = {"sid": p.sio.get_sid(NS), "name": p.name, "role": p.role, "office_id": o,
                        "a2c_version": VERSION}
    got = {s.get("name"): s for s in sessions}
    eq(got, want, "sessions")
    expect_error(a.call("server:list_room", {"agent": "A", "req_id": rid(), "office_id": o2}), 4104,
                 "list_room of another office")


# -- 10. update notifications

@scenario()
def update_notifications(ctx):
    o, o2 = office(), office()
    a = ctx.agent("A", o)
    c1 = ctx.computer("C1", o)
    c3 = ctx.computer("C3", o)
    a2 = ctx.agent("A2", o2)
    c2 = ctx.computer("C2", o2)
    kinds = ["update_tool_list", "update_config", "update_desktop", "update_skills"]
    for k in kinds:
        ack = c1.call("server:" + k, {"computer": "C1"})
        check(not (isinstance(ack, dict) and "code" in ack), f"server:{k} acked an error: {short(ack)}")
    for k in kinds:
        eq(a.wait_event("notify:" + k), {"computer": "C1"}, f"agent's notify:{k}")
        eq(c3.wait_event("notify:" + k), {"computer": "C1"}, f"C3's notify:{k}")
    time.sleep(QUIET)
    for p in (a2, c2):
        got = [e for (e, _) in p.all_events() if e.startswith("notify:update_")]
        eq(got, [], f"{p.name} (other office) got update notifications")
    for k in kinds:
        eq(a.received("notify:" + k), [{"computer": "C1"}], f"agent's notify:{k} list")


# -- 11. a real Computer (A2C_COMPUTER_*): put_blob, skills, tool tags
#
# The Computer is alone in its office; each scenario's Agent joins it and
# leaves before the next one comes (an office holds one Agent).

COMPUTER_OFFICE = os.environ.get("A2C_COMPUTER_OFFICE", "")
COMPUTER = os.environ.get("A2C_COMPUTER", "")
LANDING_ROOT = os.environ.get("A2C_LANDING_ROOT", "")
SKILLS_DIR = os.environ.get("A2C_SKILLS_DIR", "")
NOROOT_OFFICE = os.environ.get("A2C_NOROOT_OFFICE", "")
NOROOT_COMPUTER = os.environ.get("A2C_NOROOT_COMPUTER", "")
PC = ("A2C_COMPUTER_OFFICE", "A2C_COMPUTER")

BLOB_FAILED = "Blob write failed"


def office_agent(ctx, office_id, computer, name="PA", tool=None):
    """An Agent joined to a Computer's office once the Computer answers
    (and lists tool, if given). It leaves the office when the scenario
    ends."""
    p = ctx.peer(name, "agent").connect()
    deadline = time.monotonic() + 10
    while True:
        ack = p.join(office_id)
        if ack == (True, None):
            break
        # the previous scenario's Agent may still be leaving
        check(time.monotonic() < deadline, f"agent {name} cannot join the Computer's office: {short(ack)}")
        time.sleep(0.1)
    p.left_office = office_id
    deadline = time.monotonic() + 30
    while True:
        res = p.call("client:get_tools", {"agent": name, "req_id": rid(), "computer": computer}, timeout=10)
        names = [t.get("name") for t in res.get("tools", [])] if isinstance(res, dict) else []
        if isinstance(res, dict) and "tools" in res and (tool is None or tool in names):
            return p
        check(time.monotonic() < deadline, f"Computer {computer} never listed {tool or 'its tools'}: {short(res)}")
        time.sleep(0.2)


def leave_now(p):
    """The Agent leaves its Computer's office (acked) and disconnects."""
    o = getattr(p, "left_office", None)
    if o and p.sio.connected:
        try:
            p.leave(o)
        except Exception:
            pass
    p.left_office = None
    p.close()


def b64(b):
    return base64.b64encode(b).decode()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def put(a, computer, **fields):
    req = {"agent": a.name, "req_id": rid(), "computer": computer}
    req.update(fields)
    return a.call("client:put_blob", req, timeout=15), req


def put_first(a, data, total=None, digest=None, eof=None, computer=None, **extra):
    """The first chunk of an upload of a whole file whose first chunk is data."""
    fields = {"chunk_offset": 0, "eof": (eof if eof is not None else total is None),
              "total_size": len(data) if total is None else total,
              "sha256": sha(data) if digest is None else digest, "blob": b64(data)}
    fields.update(extra)
    return put(a, computer or COMPUTER, **fields)


def expect_4019(ack, reason, what):
    """ack is the flat 4019 ErrorPayload with this reason; returns details."""
    check(isinstance(ack, dict), f"{what}: want a 4019 ErrorPayload, got {short(ack)}")
    eq(sorted(ack), ["code", "details", "message"], f"{what}: ErrorPayload keys in {short(ack)}")
    eq(ack["code"], 4019, f"{what}: code in {short(ack)}")
    eq(ack["message"], BLOB_FAILED, f"{what}: message")
    d = ack["details"]
    check(isinstance(d, dict), f"{what}: details not an object: {short(ack)}")
    eq(d.get("reason"), reason, f"{what}: details.reason in {short(ack)}")
    return d


def expect_open(ack, req, what):
    """ack opens or continues an upload: exactly upload_id, chunk_offset, req_id."""
    check(isinstance(ack, dict) and "code" not in ack, f"{what}: want a PutBlobRet, got {short(ack)}")
    eq(sorted(ack), ["chunk_offset", "req_id", "upload_id"], f"{what}: ack keys")
    eq(ack["req_id"], req["req_id"], f"{what}: req_id")
    eq(ack["chunk_offset"], req["chunk_offset"], f"{what}: chunk_offset echo")
    check(isinstance(ack["upload_id"], str) and ack["upload_id"], f"{what}: upload_id {short(ack)}")
    return ack["upload_id"]


def inside(path, root):
    rp, rr = os.path.realpath(path), os.path.realpath(root)
    return rp.startswith(rr + os.sep)


def expect_landed(ack, req, uid, data, what):
    check(isinstance(ack, dict) and "code" not in ack, f"{what}: want the final PutBlobRet, got {short(ack)}")
    eq(sorted(ack), ["chunk_offset", "landing_path", "req_id", "sha256", "total_size", "upload_id"],
       f"{what}: final ack keys")
    eq(ack["req_id"], req["req_id"], f"{what}: req_id")
    eq(ack["upload_id"], uid, f"{what}: upload_id echo")
    eq(ack["chunk_offset"], req["chunk_offset"], f"{what}: chunk_offset echo")
    eq(ack["total_size"], len(data), f"{what}: total_size")
    eq(ack["sha256"], sha(data), f"{what}: sha256")
    lp = ack["landing_path"]
    check(isinstance(lp, str) and os.path.isabs(lp), f"{what}: landing_path not absolute: {short(lp)}")
    if LANDING_ROOT:
        check(inside(lp, LANDING_ROOT), f"{what}: landing_path {lp} outside the landing root {LANDING_ROOT}")
        with open(lp, "rb") as f:
            eq(f.read() == data, True, f"{what}: the landed file's bytes equal the upload")
    return lp


def upload(a, data, chunk, computer=None, **first_extra):
    """Uploads data in chunks of chunk bytes; returns the final ack's landing_path."""
    computer = computer or COMPUTER
    first = data[:chunk]
    ack, req = put_first(a, first, total=len(data), digest=sha(data), eof=len(first) == len(data),
                         computer=computer, **first_extra)
    if len(first) == len(data):
        check(isinstance(ack, dict) and isinstance(ack.get("upload_id"), str), f"single chunk: {short(ack)}")
        return expect_landed(ack, req, ack["upload_id"], data, "single-chunk upload")
    uid = expect_open(ack, req, "first chunk")
    off = len(first)
    while True:
        part = data[off:off + chunk]
        eof = off + len(part) == len(data)
        ack, req = put(a, computer, upload_id=uid, chunk_offset=off, eof=eof, blob=b64(part))
        if eof:
            return expect_landed(ack, req, uid, data, f"final chunk at {off}")
        eq(expect_open(ack, req, f"chunk at {off}"), uid, f"upload_id echo at {off}")
        off += len(part)


def finish(a, uid, offset, rest):
    """Sends the last chunk of an open session (cleanup); returns the ack."""
    return put(a, COMPUTER, upload_id=uid, chunk_offset=offset, eof=True, blob=b64(rest))[0]


def tree(root):
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def needs_put_blob():
    if not HAS_PUT_BLOB:
        raise Skip(f"client:put_blob is 0.4.0 (server speaks {VERSION})")


class Skip(Exception):
    """The scenario does not apply to this protocol version (not counted)."""


@scenario(needs=PC)
def put_blob_chunks(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    data = os.urandom(150_000)
    lp = upload(a, data, 65536, name_hint="../../evil dir/report v1.txt")
    # the same hint again lands beside it, never over it
    data2 = os.urandom(1000)
    lp2 = upload(a, data2, 65536, name_hint="../../evil dir/report v1.txt")
    check(lp2 != lp, f"two uploads with the same name_hint landed on one path {lp}")
    with open(lp, "rb") as f:
        check(f.read() == data, "the first upload was overwritten")
    # one chunk that is also the last, without a name_hint
    upload(a, b"x", 65536)


@scenario(needs=PC)
def put_blob_unknown_before_0_4(ctx):
    if HAS_PUT_BLOB:
        raise Skip("client:put_blob exists at " + VERSION)
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    ack, _ = put_first(a, b"hello")
    eq(ack, {"code": 400, "message": "unknown event"}, "put_blob at a " + VERSION + " server")


@scenario(needs=PC)
def put_blob_invalid_upload(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    for what, uid in (("unknown upload_id", uuid.uuid4().hex), ("malformed upload_id", "../../etc/passwd")):
        ack, _ = put(a, COMPUTER, upload_id=uid, chunk_offset=0, eof=True, blob=b64(b"hi"))
        expect_4019(ack, "invalid_upload", what)
    # another Agent's upload: PA opens it and leaves, PB may not continue it
    data = b"0123456789"
    ack, req = put_first(a, data[:4], total=len(data), digest=sha(data), eof=False)
    uid = expect_open(ack, req, "PA's first chunk")
    leave_now(a)
    b = office_agent(ctx, COMPUTER_OFFICE, COMPUTER, name="PB")
    ack, _ = put(b, COMPUTER, upload_id=uid, chunk_offset=4, eof=True, blob=b64(data[4:]))
    expect_4019(ack, "invalid_upload", "another Agent's upload_id")
    leave_now(b)
    # PA may finish it (or find it ended with its leave); either frees the slot
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    finish(a, uid, 4, data[4:])


@scenario(needs=PC)
def put_blob_invalid_declaration(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    data = b"declared data"
    base = {"chunk_offset": 0, "eof": True, "total_size": len(data), "sha256": sha(data), "blob": b64(data)}
    cases = [
        ("no total_size", {k: v for k, v in base.items() if k != "total_size"}),
        ("no sha256", {k: v for k, v in base.items() if k != "sha256"}),
        ("total_size 0", dict(base, total_size=0)),
        ("sha256 not a digest", dict(base, sha256="not-a-digest")),
        ("blob not base64", dict(base, blob="!!! not base64 !!!")),
    ]
    before = tree(LANDING_ROOT) if LANDING_ROOT else set()
    for what, fields in cases:
        ack, _ = put(a, COMPUTER, **fields)
        expect_4019(ack, "invalid_declaration", what)
    if LANDING_ROOT:
        eq(sorted(tree(LANDING_ROOT) - before), [], "files written for refused first chunks")
    # a declaration repeated on a later chunk
    for key, val in (("total_size", len(data)), ("sha256", sha(data)), ("name_hint", "x.txt")):
        ack, req = put_first(a, data[:4], total=len(data), digest=sha(data), eof=False)
        uid = expect_open(ack, req, f"first chunk (then {key} again)")
        ack, _ = put(a, COMPUTER, upload_id=uid, chunk_offset=4, eof=True, blob=b64(data[4:]), **{key: val})
        expect_4019(ack, "invalid_declaration", f"{key} on a later chunk")
        finish(a, uid, 4, data[4:])


@scenario(needs=PC)
def put_blob_range(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    data = b"0123456789"
    # each fault on its own session (whether range ends one is the SDK's choice)
    for off in (5, 0, 3):
        ack, req = put_first(a, data[:4], total=len(data), digest=sha(data), eof=False)
        uid = expect_open(ack, req, "first chunk")
        ack, _ = put(a, COMPUTER, upload_id=uid, chunk_offset=off, eof=False, blob=b64(data[off:off + 2]))
        d = expect_4019(ack, "range", f"chunk_offset {off} after 4 bytes")
        check(isinstance(d.get("chunk_offset"), int) and not isinstance(d.get("chunk_offset"), bool),
              f"range without an integer details.chunk_offset: {short(ack)}")
        finish(a, uid, 4, data[4:])
    # the final size differs from the declared one: in the first chunk, and later
    ack, _ = put_first(a, data[:4], total=len(data), digest=sha(data), eof=True)
    expect_4019(ack, "range", "eof after 4 of 10 declared bytes")
    ack, req = put_first(a, data[:4], total=len(data), digest=sha(data), eof=False)
    uid = expect_open(ack, req, "first chunk")
    ack, _ = put(a, COMPUTER, upload_id=uid, chunk_offset=4, eof=True, blob=b64(data[4:7]))
    expect_4019(ack, "range", "eof at 7 of 10 declared bytes")


@scenario(needs=PC)
def put_blob_too_large(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    ack, _ = put_first(a, b"x", total=1 << 40, digest=sha(b"x"), eof=False)
    d = expect_4019(ack, "too_large", "1 TiB declared")
    t = d.get("total_size")
    check(isinstance(t, int) and not isinstance(t, bool) and t > 0, f"too_large without details.total_size: {short(ack)}")


@scenario(needs=PC)
def put_blob_busy(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    data = b"ab"
    opened, busy = [], None
    try:
        for _ in range(64):
            ack, req = put_first(a, data[:1], total=2, digest=sha(data), eof=False)
            if isinstance(ack, dict) and ack.get("code") is not None:
                busy = ack
                break
            opened.append(expect_open(ack, req, f"session {len(opened) + 1}"))
        check(busy is not None, f"{len(opened)} open uploads and never busy")
        check(opened, "busy before any upload was open")
        expect_4019(busy, "busy", f"upload {len(opened) + 1} while {len(opened)} are open")
    finally:
        acks = [finish(a, uid, 1, data[1:]) for uid in opened]
    for i, ack in enumerate(acks):
        check(isinstance(ack, dict) and isinstance(ack.get("landing_path"), str),
              f"open upload {i + 1} did not finish after the busy refusal: {short(ack)}")
    # a slot is free again
    upload(a, b"after busy", 65536)


@scenario(needs=("A2C_NOROOT_OFFICE", "A2C_NOROOT_COMPUTER"))
def put_blob_forbidden(ctx):
    needs_put_blob()
    a = office_agent(ctx, NOROOT_OFFICE, NOROOT_COMPUTER)
    ack, _ = put_first(a, b"no root", computer=NOROOT_COMPUTER)
    expect_4019(ack, "forbidden", "upload to a Computer without a landing root")


@scenario(needs=PC)
def put_blob_integrity(ctx):
    needs_put_blob()
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    before = tree(LANDING_ROOT) if LANDING_ROOT else set()
    data = b"integrity check"
    ack, _ = put_first(a, data, digest=sha(b"other bytes"))
    expect_4019(ack, "integrity", "single chunk, wrong sha256")
    ack, req = put_first(a, data[:5], total=len(data), digest=sha(b"other bytes"), eof=False)
    uid = expect_open(ack, req, "first chunk")
    ack, _ = put(a, COMPUTER, upload_id=uid, chunk_offset=5, eof=True, blob=b64(data[5:]))
    expect_4019(ack, "integrity", "two chunks, wrong sha256")
    if LANDING_ROOT:
        new = sorted(tree(LANDING_ROOT) - before)
        eq(new, [], "files left in the landing root after integrity failures")


# put_blob's io_error is not provoked: the reliable way (a landing root
# made read-only after the Computer started) does not stop root, which
# these suites run as in CI.


def skill_expectations():
    """name -> (dir, frontmatter-stripped SKILL.md body) of the valid skills."""
    out = {}
    for d in ("hello-world", "tagless", "bad-tags"):
        with open(os.path.join(SKILLS_DIR, d, "SKILL.md"), "rb") as f:
            raw = f.read()
        end = raw.index(b"\n---\n", 3) + len(b"\n---\n")
        out[d] = (d, raw[end:])
    return out


TAGS_0_4 = (_MAJOR, _MINOR) >= (0, 4)


@scenario(needs=PC + ("A2C_SKILLS_DIR",))
def skills_list(ctx):
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    r = rid()
    res = a.call("client:get_skills", {"agent": "PA", "req_id": r, "computer": COMPUTER}, timeout=10)
    check(isinstance(res, dict) and isinstance(res.get("skills"), list), f"want GetSkillsRet, got {short(res)}")
    eq(sorted(res), ["req_id", "skills"], "GetSkillsRet keys")
    eq(res["req_id"], r, "req_id")
    got = {s.get("name"): s for s in res["skills"]}
    eq(len(got), len(res["skills"]), f"duplicate names in {short(res)}")
    eq(sorted(got), ["bad-tags", "hello-world", "tagless"], "skill names (BadName is left out)")
    desc = {"hello-world": "Says hello to the user", "tagless": "A skill without tags",
            "bad-tags": "Tags that are not a list"}
    for name, ref in got.items():
        for k in ("name", "source", "path", "description"):
            check(isinstance(ref.get(k), str), f"{name}: {k} missing in {short(ref)}")
        eq(ref["source"], "user", f"{name}: source")
        eq(ref["description"], desc[name], f"{name}: description")
        check(os.path.isabs(ref["path"]), f"{name}: path not absolute: {ref['path']}")
        with open(os.path.join(ref["path"], "SKILL.md"), "rb") as f, \
                open(os.path.join(SKILLS_DIR, name, "SKILL.md"), "rb") as g:
            check(f.read() == g.read(), f"{name}: path {ref['path']} does not hold its SKILL.md")
        check("version" not in ref and "uri" not in ref, f"{name}: a user skill with version or uri: {short(ref)}")
    eq(got["hello-world"].get("license"), "MIT", "hello-world: license")
    if TAGS_0_4:
        eq(got["hello-world"].get("tags"), ["greet", "demo"], "hello-world: tags")
    else:
        check("tags" not in got["hello-world"], f"tags in a {VERSION} A2CSkillRef: {short(got['hello-world'])}")
    for name in ("tagless", "bad-tags"):
        check("tags" not in got[name], f"{name}: tags present: {short(got[name])}")


def get_skill(a, name, rel_path=None):
    req = {"agent": a.name, "req_id": rid(), "computer": COMPUTER, "name": name}
    if rel_path is not None:
        req["rel_path"] = rel_path
    return a.call("client:get_skill", req, timeout=15), req


def read_blob(a, handle):
    """All bytes behind a blob handle, and the first chunk's answer."""
    buf, off, first = b"", 0, None
    while True:
        res = a.call("client:get_blob", {"agent": a.name, "req_id": rid(), "computer": COMPUTER,
                                         "blob_handle": handle, "chunk_offset": off}, timeout=15)
        check(isinstance(res, dict) and "code" not in res, f"get_blob at {off}: {short(res)}")
        first = first or res
        eq(res.get("chunk_offset"), off, "get_blob chunk_offset")
        chunk = res["blob"] if isinstance(res["blob"], bytes) else base64.b64decode(res["blob"])
        buf += chunk
        off += len(chunk)
        if res.get("eof"):
            return buf, first
        check(chunk, f"get_blob: empty chunk without eof at {off}")


@scenario(needs=PC + ("A2C_SKILLS_DIR",))
def skill_read(ctx):
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    want = skill_expectations()
    for name, (_, body) in want.items():
        for rel in (None, "SKILL.md"):
            res, req = get_skill(a, name, rel)
            check(isinstance(res, dict) and "code" not in res, f"get_skill {name} {rel}: {short(res)}")
            eq(sorted(res), ["body", "mime_type", "name", "rel_path", "req_id", "sha256", "total_size"],
               f"{name}: GetSkillRet keys")
            eq((res["name"], res["rel_path"], res["req_id"]), (name, "SKILL.md", req["req_id"]), f"{name}: echoes")
            eq(res["mime_type"], "text/markdown", f"{name}: mime_type")
            eq(res["body"], body.decode(), f"{name}: body (frontmatter stripped)")
            eq(res["total_size"], len(body), f"{name}: total_size")
            eq(res["sha256"], sha(body), f"{name}: sha256")
    res, _ = get_skill(a, "hello-world", "notes.txt")
    eq((res.get("mime_type"), res.get("body"), res.get("sha256")), ("text/plain", "plain notes\n", sha(b"plain notes\n")),
       "notes.txt")
    res, _ = get_skill(a, "hello-world", "docs/ref.md")
    eq(res.get("body"), "# Reference\n", "docs/ref.md body")
    # binary, and text over any inline budget: a handle, read with get_blob
    for rel in ("data.bin", "big.md"):
        with open(os.path.join(SKILLS_DIR, "hello-world", rel), "rb") as f:
            raw = f.read()
        res, req = get_skill(a, "hello-world", rel)
        check(isinstance(res, dict) and "code" not in res, f"get_skill {rel}: {short(res)}")
        eq(sorted(res), ["blob_handle", "mime_type", "name", "rel_path", "req_id", "sha256", "total_size"],
           f"{rel}: GetSkillRet keys")
        eq((res["total_size"], res["sha256"]), (len(raw), sha(raw)), f"{rel}: size and digest")
        got, first = read_blob(a, res["blob_handle"])
        eq((first.get("total_size"), first.get("sha256")), (len(raw), sha(raw)), f"{rel}: get_blob size and digest")
        check(got == raw, f"{rel}: bytes read through the handle differ ({len(got)} vs {len(raw)})")


def expect_skill_error(res, code, what, reason=None):
    expect_error(res, code, what)
    if reason is not None:
        d = res.get("details")
        check(isinstance(d, dict) and d.get("reason") == reason, f"{what}: want details.reason {reason}, got {short(res)}")
        return d


@scenario(needs=PC + ("A2C_SKILLS_DIR",))
def skill_errors(ctx):
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER)
    for name in ("Bad_Name", "BadName", "a:b:c:d", "x:y:z", "mcp:a.b:y", "mcp:a__b:y", "-lead", "a--b", "a:"):
        expect_skill_error(get_skill(a, name)[0], 4016, f"name {name!r}")
    for name in ("no-such-skill", "plug:no-such", "mcp:fx", "mcp:fx:no-such"):
        expect_skill_error(get_skill(a, name)[0], 4014, f"unknown skill {name!r}")
    for rel in ("../tagless/SKILL.md", "/etc/passwd", "docs/../../tagless/SKILL.md", "escape.txt"):
        expect_skill_error(get_skill(a, "hello-world", rel)[0], 4017, f"rel_path {rel!r}", "traversal")
    for rel in (".skillenv", "docs/.skillenv"):
        expect_skill_error(get_skill(a, "hello-world", rel)[0], 4017, f"rel_path {rel!r}", "forbidden")
    for rel in ("missing.txt", "docs/none.md"):
        expect_skill_error(get_skill(a, "hello-world", rel)[0], 4017, f"rel_path {rel!r}", "not_found")
    d = expect_skill_error(get_skill(a, "hello-world", "huge.txt")[0], 4017, "huge.txt", "too_large")
    eq(d.get("total_size"), 101 << 20, "too_large details.total_size")


def tool_meta_of(tools, name):
    t = tools.get(name)
    check(t is not None, f"{name} not listed (have {sorted(tools)})")
    meta = t.get("meta") or {}
    check(isinstance(meta, dict), f"{name}: meta not an object: {short(t)}")
    if "a2c_tool_meta" not in meta:
        return meta, None
    raw = meta["a2c_tool_meta"]
    check(isinstance(raw, str), f"{name}: meta.a2c_tool_meta is not a JSON string: {short(raw)}")
    return meta, json.loads(raw)


@scenario(needs=PC)
def tools_tags(ctx):
    a = office_agent(ctx, COMPUTER_OFFICE, COMPUTER, tool="fx__plain")
    res = a.call("client:get_tools", {"agent": "PA", "req_id": rid(), "computer": COMPUTER}, timeout=10)
    tools = {t["name"]: t for t in res["tools"] if t.get("bundle_id") == "fx"}
    eq(sorted(tools), ["fx__cleared", "fx__malformed", "fx__overridden", "fx__plain", "fx__tagged"],
       "fx tools (a server-declared alias is not honoured)")
    none4 = {"auto_apply": None, "alias": None, "tags": None, "ret_object_mapper": None}
    meta, tm = tool_meta_of(tools, "fx__tagged")
    eq(meta.get("vendor.example/x"), 1, "fx__tagged: the server's other _meta key")
    if TAGS_0_4:
        eq(tm, dict(none4, tags=["alpha", "beta"]), "fx__tagged: a2c_tool_meta (server tags only)")
        eq(tool_meta_of(tools, "fx__overridden")[1], dict(none4, tags=["cfg"], auto_apply=True),
           "fx__overridden: a2c_tool_meta (config over server)")
        eq(tool_meta_of(tools, "fx__cleared")[1], dict(none4, tags=[]), "fx__cleared: a2c_tool_meta (tags [] clears)")
        eq(tool_meta_of(tools, "fx__malformed")[1], None, "fx__malformed: a2c_tool_meta (malformed, no config)")
    else:
        check(tm is None or (tm.get("tags") is None and tm.get("auto_apply") is not True),
              f"fx__tagged: server tags or auto_apply at {VERSION}: {short(tm)}")
        tm = tool_meta_of(tools, "fx__overridden")[1]
        check(tm is not None and tm.get("tags") == ["cfg"] and tm.get("auto_apply") is True,
              f"fx__overridden: want config tags [cfg] and auto_apply, got {short(tm)}")
        tm = tool_meta_of(tools, "fx__cleared")[1]
        check(tm is None or tm.get("tags") in (None, []), f"fx__cleared: {short(tm)}")
        tm = tool_meta_of(tools, "fx__malformed")[1]
        check(tm is None or tm.get("tags") is None, f"fx__malformed: {short(tm)}")
    res = a.call("client:tool_call", {"agent": "PA", "req_id": rid(), "computer": COMPUTER, "tool_name": "fx__tagged",
                                      "params": {"text": "tagged"}, "timeout": 10}, timeout=20)
    check(isinstance(res, dict) and res.get("isError") is False and res["content"][0].get("text") == "tagged",
          f"call fx__tagged: {short(res)}")


# ---------------------------------------------------------------- runner

def run_one(name, fn):
    ctx = Ctx()
    t0 = time.monotonic()
    reason = None
    try:
        fn(ctx)
    except Skip as e:
        reason = Skip(str(e))
    except Fail as e:
        reason = str(e)
    except Exception as e:  # noqa: BLE001 - any crash is a failure of this scenario
        reason = f"{type(e).__name__}: {e}"
        traceback.print_exc(file=sys.stderr)
    finally:
        try:
            ctx.close()
        except Exception:
            traceback.print_exc(file=sys.stderr)
    took = time.monotonic() - t0
    if reason is not None and not isinstance(reason, Skip):
        reason = " ".join(reason.split()) or "failed"
        if len(reason) > 400:
            reason = reason[:400] + "..."
    return reason, took


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[],
                    help="run only this scenario (repeatable, or comma-separated)")
    ap.add_argument("--list", action="store_true", help="list scenario names and exit")
    args = ap.parse_args()
    if args.list:
        for name, _, _ in SCENARIOS:
            print(name)
        return 0
    only = {n.strip() for o in args.only for n in o.split(",") if n.strip()}
    known = {name for name, _, _ in SCENARIOS}
    unknown = only - known
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if not URL:
        print("A2C_URL is not set", file=sys.stderr)
        return 2
    if TRANSPORTS not in (("polling", "websocket"), ("polling",), ("websocket",)):
        print(f"A2C_TRANSPORTS={','.join(TRANSPORTS)!r}: want polling,websocket, polling or websocket", file=sys.stderr)
        return 2
    env = {"A2C_URL": URL, "A2C_AUTH_URL": AUTH_URL, "A2C_TOKEN_VALUE": TOKEN,
           "A2C_RELAY_TIMEOUT_URL": RELAY_TIMEOUT_URL, "A2C_COMPUTER_OFFICE": COMPUTER_OFFICE,
           "A2C_COMPUTER": COMPUTER, "A2C_SKILLS_DIR": SKILLS_DIR, "A2C_NOROOT_OFFICE": NOROOT_OFFICE,
           "A2C_NOROOT_COMPUTER": NOROOT_COMPUTER}
    passed = failed = 0
    start = time.monotonic()
    for name, fn, needs in SCENARIOS:
        if only and name not in only:
            continue
        missing = [n for n in needs if not env.get(n)]
        if missing:
            print(f"skip {name}: {', '.join(missing)} not set", file=sys.stderr)
            continue
        reason, took = run_one(name, fn)
        if isinstance(reason, Skip):
            print(f"skip {name}: {reason}", file=sys.stderr)
        elif reason is None:
            passed += 1
            print(f"PASS {name}", flush=True)
        else:
            failed += 1
            print(f"FAIL {name}: {reason}", flush=True)
        print(f"  {name}: {took:.2f}s", file=sys.stderr, flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    print(f"total {time.monotonic() - start:.1f}s", file=sys.stderr, flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Background threads of python-socketio (long-polls) are not daemons;
    # every client is already disconnected, so do not wait for them.
    os._exit(code)
