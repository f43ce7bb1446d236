"""A python-socketio Agent that joins a fresh office of "a2c up" and calls
that office's own sandbox at once.

Run by test/interop (TestUpOfficeSandboxes) with A2C_URL (the hub) and
A2C_OFFICE set; prints "PASS name" / "FAIL name: reason" per scenario.
"""
import json
import os
import uuid

import socketio

URL = os.environ["A2C_URL"]
OFFICE = os.environ["A2C_OFFICE"]
NS = "/smcp"
VERSION = os.environ.get("A2C_VERSION", "0.4.0")
AGENT = "py-office-agent"


def check(name, cond, reason=""):
    print(("PASS %s" % name) if cond else ("FAIL %s: %s" % (name, str(reason)[:300])), flush=True)


sio = socketio.Client()
sio.connect(URL + "?a2c_version=" + VERSION, namespaces=[NS], socketio_path="/socket.io/", wait_timeout=10)
try:
    ok = sio.call("server:join_office", {"role": "agent", "name": AGENT, "office_id": OFFICE}, namespace=NS, timeout=15)
    check("join", ok is True or (isinstance(ok, (list, tuple)) and ok and ok[0] is True), ok)
    # The join was answered once the office's sandbox was in: the first
    # call finds it, with no retry.
    res = sio.call("client:tool_call", {"agent": AGENT, "req_id": str(uuid.uuid4()), "computer": "sandbox",
                                        "tool_name": "sandbox__sandbox_execute_bash",
                                        "params": {"cmd": "echo from-$(hostname); cat /proc/1/comm"}, "timeout": 20},
                   namespace=NS, timeout=30)
    text = json.loads(res["content"][0]["text"]) if isinstance(res, dict) and res.get("content") else {}
    check("first-call", text.get("output") == "from-sandbox\nsandbox-init\n", res)
finally:
    sio.disconnect()
