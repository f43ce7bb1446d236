"""A python-socketio Agent driving a Go Computer through a Go server.

Run by test/interop (TestComputerPythonAgent) with A2C_URL, A2C_OFFICE and
A2C_COMPUTER set; prints "PASS name" / "FAIL name: reason" per scenario
and a closing "N passed, M failed" line.
"""
import os
import sys
import threading
import time
import uuid

import socketio

URL = os.environ["A2C_URL"]
OFFICE = os.environ["A2C_OFFICE"]
COMPUTER = os.environ["A2C_COMPUTER"]
NS = "/smcp"
# The protocol version spoken: the server's (A2C_VERSION, default 0.4.0).
VERSION = os.environ.get("A2C_VERSION", "0.4.0")

results = []


def check(name, cond, reason=""):
    results.append(cond)
    print(("PASS %s" % name) if cond else ("FAIL %s: %s" % (name, str(reason)[:300])), flush=True)


def call(sio, event, payload, timeout=30):
    return sio.call(event, payload, namespace=NS, timeout=timeout)


def main():
    sio = socketio.Client(reconnection=False)
    sio.connect(URL + "?a2c_version=" + VERSION, namespaces=[NS], transports=["polling", "websocket"], wait_timeout=5)
    try:
        ok = call(sio, "server:join_office", {"role": "agent", "name": "py-agent", "office_id": OFFICE})
        check("join", ok == (True, None), ok)

        tools = []
        deadline = time.time() + 40
        while time.time() < deadline:
            ret = call(sio, "client:get_tools", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER})
            tools = [t["name"] for t in ret.get("tools", [])]
            if "ev__echo" in tools:
                break
            time.sleep(0.3)
        check("get_tools", "ev__echo" in tools and all(t.startswith("ev__") for t in tools), tools)

        res = call(sio, "client:tool_call", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                             "tool_name": "ev__echo", "params": {"message": "from python"}, "timeout": 20})
        check("tool_call_echo", res.get("isError") is False and res["content"][0]["text"] == "Echo: from python", res)

        res = call(sio, "client:tool_call", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                             "tool_name": "ev__missing", "params": {}, "timeout": 5})
        check("tool_call_unknown_4001", res.get("isError") is True and res.get("meta", {}).get("error_code") == 4001, res)

        res = call(sio, "client:tool_call", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                             "tool_name": "ev__trigger-long-running-operation",
                                             "params": {"duration": 10, "steps": 10}, "timeout": 1})
        check("tool_call_timeout", res.get("isError") is True and res.get("meta", {}).get("a2c_timeout") is True, res)

        res = call(sio, "client:tool_call", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                             "tool_name": "ev__get-sum", "params": {"a": 2, "b": 40}, "timeout": 20})
        check("tool_call_add", res.get("isError") is False and "42" in res["content"][0]["text"], res)

        check("forbidden_tool_absent", "ev__get-env" not in tools, tools)
        res = call(sio, "client:tool_call", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                             "tool_name": "ev__get-env", "params": {}, "timeout": 5})
        check("forbidden_tool_4001", res.get("isError") is True and res.get("meta", {}).get("error_code") == 4001, res)

        # Cancel: start a long call, cancel it by req_id, read the original ack.
        rid = str(uuid.uuid4())
        box = {}
        done = threading.Event()

        def on_ack(*args):
            box["res"] = args[0] if args else None
            done.set()

        sio.emit("client:tool_call", {"agent": "py-agent", "req_id": rid, "computer": COMPUTER,
                                      "tool_name": "ev__trigger-long-running-operation",
                                      "params": {"duration": 10, "steps": 10}, "timeout": 30},
                 namespace=NS, callback=on_ack)
        # The cancel may overtake the call on its way to the Computer (which
        # ignores a cancel for an unknown req_id): repeat it until the call's
        # own ack arrives, rather than guessing a delay.
        deadline = time.time() + 15
        while not done.is_set() and time.time() < deadline:
            call(sio, "server:tool_call_cancel", {"agent": "py-agent", "req_id": rid}, timeout=5)
            done.wait(1)
        res = box.get("res") or {}
        check("tool_call_cancel", res.get("isError") is True and res.get("meta", {}).get("a2c_cancelled") is True
              and res.get("meta", {}).get("a2c_cancel_reason") == "agent_requested", res)

        ret = call(sio, "client:get_resources", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                                 "mcp_server": "ev"})
        ok = isinstance(ret.get("resources"), list) and len(ret["resources"]) > 0
        if ok and ret.get("next_cursor"):
            nxt = call(sio, "client:get_resources", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                                     "mcp_server": "ev", "cursor": ret["next_cursor"]})
            ok = len(nxt.get("resources", [])) > 0
        check("get_resources_paging", ok, ret)

        ret = call(sio, "client:get_desktop", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER})
        check("get_desktop", ret.get("desktops") == [] and "req_id" in ret, ret)

        ret = call(sio, "client:get_blob", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                            "blob_handle": "blob1.forged.handle"})
        check("get_blob_4018", ret.get("code") == 4018 and ret.get("details", {}).get("reason") == "invalid_handle", ret)

        ret = call(sio, "client:get_config", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER})
        check("get_config", "ev" in ret.get("servers", {}) and "req_id" not in ret, ret)

        ret = call(sio, "client:get_resources", {"agent": "py-agent", "req_id": str(uuid.uuid4()), "computer": COMPUTER,
                                                 "mcp_server": "unknown"})
        check("get_resources_4014", ret.get("code") == 4014 and ret.get("mcp_server") == "unknown", ret)
    except Exception as e:  # a crash is a failure, reported, not a traceback
        check("no_exception", False, repr(e))
    finally:
        sio.disconnect()
    failed = results.count(False)
    print("%d passed, %d failed" % (len(results) - failed, failed), flush=True)
    os._exit(1 if failed else 0)


main()
