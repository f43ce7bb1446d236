"""Baseline for bench/aiod: print(1) sent straight to an ipykernel with
Debian's jupyter_client, timed from execute_request to the idle status.
Usage: kernel_baseline.py N; prints {"p50": µs, "p99": µs}."""
import json
import sys
import time

from jupyter_client.manager import start_new_kernel

n = int(sys.argv[1])
km, kc = start_new_kernel(kernel_name="python3")
try:
    def cell():
        msg_id = kc.execute("print(1)")
        while True:
            msg = kc.get_iopub_msg(timeout=30)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                break
        kc.get_shell_msg(timeout=30)

    for _ in range(max(n // 10, 1)):
        cell()
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        cell()
        lat.append((time.perf_counter() - t0) * 1e6)
    lat.sort()
    print(json.dumps({"p50": lat[n // 2], "p99": lat[n * 99 // 100]}))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
