"""A python-socketio Agent watching a Go Computer's management plane.

Run by test/interop (TestManagementImperative) with A2C_URL, A2C_OFFICE
and A2C_COMPUTER set. It joins the office, prints READY, then obeys one
command per line on stdin:

  wait EV1,EV2,...  wait (15 s at most) until each notify:update_* event
                    named (without the "notify:" prefix) has arrived since
                    the last wait, then print
                      EVENTS <names seen, sorted, comma-separated>
                      SKILLS <get_skills names, sorted>
                      TOOLS <get_tools names, sorted>
                    or TIMEOUT <names seen> when they did not all arrive;
  seen              print EVENTS for what arrived since the last wait, and
                    forget it (no waiting);
  quit              leave and exit.
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
VERSION = os.environ.get("A2C_VERSION", "0.4.0")

lock = threading.Condition()
seen = []


def on_event(name):
    def handler(data):
        with lock:
            seen.append(name)
            lock.notify_all()
    return handler


def call(sio, event, payload):
    return sio.call(event, payload, namespace=NS, timeout=30)


def names(sio, event, key):
    ret = call(sio, event, {"computer": COMPUTER, "agent": "py-mgmt", "req_id": uuid.uuid4().hex})
    return sorted(x["name"] for x in (ret or {}).get(key) or [])


def main():
    sio = socketio.Client(reconnection=False)
    for ev in ("update_skills", "update_tool_list", "update_config", "update_desktop"):
        sio.on("notify:" + ev, on_event(ev), namespace=NS)
    sio.connect(URL + "?a2c_version=" + VERSION, namespaces=[NS], transports=["polling", "websocket"], wait_timeout=5)
    ok = call(sio, "server:join_office", {"role": "agent", "name": "py-mgmt", "office_id": OFFICE})
    if ok != (True, None) and ok != [True, None]:
        print("FAILJOIN %r" % (ok,), flush=True)
        return 1
    print("READY", flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "quit":
            break
        if cmd == "seen":
            with lock:
                got = sorted(set(seen))
                del seen[:]
            print("EVENTS " + ",".join(got), flush=True)
            continue
        if cmd == "wait":
            want = set(x for x in arg.split(",") if x)
            deadline = time.time() + 15
            with lock:
                while not want.issubset(seen) and time.time() < deadline:
                    lock.wait(deadline - time.time())
                got = sorted(set(seen))
                done = want.issubset(seen)
                del seen[:]
            if not done:
                print("TIMEOUT " + ",".join(got), flush=True)
                continue
            print("EVENTS " + ",".join(got), flush=True)
            print("SKILLS " + ",".join(names(sio, "client:get_skills", "skills")), flush=True)
            print("TOOLS " + ",".join(names(sio, "client:get_tools", "tools")), flush=True)
    call(sio, "server:leave_office", {"office_id": OFFICE})
    sio.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
