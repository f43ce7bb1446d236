"""A python-socketio Agent driving the sandbox Computer of "a2c up".

Run by test/interop (TestUpPythonAgent) with A2C_URL (the hub), A2C_OFFICE,
A2C_COMPUTER and A2C_WORKSPACE (the sandbox's workspace) set; prints
"PASS name" / "FAIL name: reason" per scenario and a closing
"N passed, M failed" line. Processes are found in /proc by a sleep
duration no other process uses.
"""
import json
import os
import random
import sys
import threading
import time
import uuid

import socketio

URL = os.environ["A2C_URL"]
OFFICE = os.environ["A2C_OFFICE"]
COMPUTER = os.environ["A2C_COMPUTER"]
WORKSPACE = os.environ["A2C_WORKSPACE"]
NS = "/smcp"
# The protocol version spoken: the server's (A2C_VERSION, default 0.4.0).
VERSION = os.environ.get("A2C_VERSION", "0.4.0")
AGENT = "py-agent"

TOOLS = sorted("sandbox__" + n for n in [
    "browser_get_info", "browser_gui_execute_action", "browser_gui_screenshot", "sandbox_execute_bash",
    "sandbox_execute_code", "sandbox_file_operations", "sandbox_get_context", "sandbox_get_packages",
    "sandbox_load_skill", "sandbox_str_replace_editor"])

results = []


def check(name, cond, reason=""):
    results.append(cond)
    print(("PASS %s" % name) if cond else ("FAIL %s: %s" % (name, str(reason)[:300])), flush=True)


def call(sio, event, payload, timeout=30):
    return sio.call(event, payload, namespace=NS, timeout=timeout)


def tool_call(sio, tool, params, timeout, req_id=None):
    return call(sio, "client:tool_call", {"agent": AGENT, "req_id": req_id or str(uuid.uuid4()), "computer": COMPUTER,
                                          "tool_name": tool, "params": params, "timeout": timeout}, timeout=timeout + 10)


def text(res):
    try:
        return res["content"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return ""


def sleep_arg(secs):
    return "%d.%06d" % (secs, random.randrange(1000000))


def procs_with(*words):
    """Live (not zombie) processes whose argv holds every word."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] == "Z":
            continue
        if all(w in argv for w in words):
            out.append(int(d))
    return out


def wait_for(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def kill_left(arg):
    for pid in procs_with("sleep", arg):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def main():
    sio = socketio.Client(reconnection=False)
    sio.connect(URL + "?a2c_version=" + VERSION, namespaces=[NS], transports=["polling", "websocket"], wait_timeout=5)
    try:
        ok = call(sio, "server:join_office", {"role": "agent", "name": AGENT, "office_id": OFFICE})
        check("join", ok == (True, None), ok)

        ret = call(sio, "client:get_tools", {"agent": AGENT, "req_id": str(uuid.uuid4()), "computer": COMPUTER})
        tools = ret.get("tools", [])
        names = sorted(t["name"] for t in tools)
        check("get_tools", names == TOOLS and all(t["bundle_id"] == "sandbox" for t in tools), names)

        res = tool_call(sio, "sandbox__sandbox_execute_bash", {"cmd": "echo hi; pwd"}, 10)
        try:
            out = json.loads(text(res))
        except ValueError:
            out = {}
        check("bash_echo", res.get("isError") is False and out.get("output") == "hi\n" + WORKSPACE + "\n"
              and out.get("exit_code") == 0, res)

        path = os.path.join(WORKSPACE, "py", "b.txt")
        res = tool_call(sio, "sandbox__sandbox_file_operations", {"action": "write", "path": path, "content": "from python\n"}, 10)
        on_disk = open(path).read() if os.path.exists(path) else None
        check("file_write", res.get("isError") is False and on_disk == "from python\n", (res, on_disk))
        res = tool_call(sio, "sandbox__sandbox_file_operations", {"action": "read", "path": path}, 10)
        check("file_read", res.get("isError") is False and "from python" in text(res), res)

        res = tool_call(sio, "sandbox__sandbox_execute_code", {"code": "print(6 * 7)", "language": "python"}, 60)
        check("python_cell", res.get("isError") is False and "42" in text(res), res)

        # Cancel: a sleep, cancelled by req_id; the original ack says so
        # and the sleep is gone within a second of the cancel.
        arg = sleep_arg(30)
        rid = str(uuid.uuid4())
        box = {}
        done = threading.Event()

        def on_ack(*args):
            box["res"] = args[0] if args else None
            done.set()

        sio.emit("client:tool_call", {"agent": AGENT, "req_id": rid, "computer": COMPUTER, "tool_name": "sandbox__sandbox_execute_bash",
                                      "params": {"cmd": "sleep " + arg}, "timeout": 60}, namespace=NS, callback=on_ack)
        try:
            started = wait_for(lambda: procs_with("sleep", arg), 15)
            sio.emit("server:tool_call_cancel", {"agent": AGENT, "req_id": rid}, namespace=NS)
            cancelled = time.time()
            acked = done.wait(10)
            res = box.get("res") or {}
            meta = res.get("meta") or {}
            check("cancel_result", started and acked and res.get("isError") is True and meta.get("a2c_cancelled") is True
                  and meta.get("a2c_cancel_reason") == "agent_requested", (started, res))
            gone = wait_for(lambda: not procs_with("sleep", arg), max(0.0, 1 - (time.time() - cancelled)))
            check("cancel_ends_process", gone, procs_with("sleep", arg))
        finally:
            kill_left(arg)

        # Timeout: a 1 s call of a 30 s sleep.
        arg = sleep_arg(30)
        try:
            start = time.time()
            res = tool_call(sio, "sandbox__sandbox_execute_bash", {"cmd": "sleep " + arg}, 1)
            took = time.time() - start
            meta = res.get("meta") or {}
            check("timeout_result", res.get("isError") is True and meta.get("a2c_timeout") is True and took < 3, (took, res))
            check("timeout_ends_process", wait_for(lambda: not procs_with("sleep", arg), 1), procs_with("sleep", arg))
        finally:
            kill_left(arg)
    finally:
        sio.disconnect()
    failed = results.count(False)
    print("%d passed, %d failed" % (len(results) - failed, failed), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
