"""Replays the request examples of aiod's published docs (commands and
files planes) against a running daemon, with the Python standard library
only (no SDK: PyPI is not reachable here).

Usage: aiod_replay.py BASE_URL WORKDIR PLANE   (PLANE: commands | files)
Prints "PASS name" or "FAIL name: reason" per example.
"""
import base64
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
import uuid

BASE, WORK, PLANE = sys.argv[1], sys.argv[2], sys.argv[3]


def request(method, path, body=None, headers=None, raw=False):
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        if isinstance(body, (bytes, bytearray)):
            data = bytes(body)
        else:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, payload = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, payload = e.code, e.read()
    if raw:
        return status, payload
    return status, json.loads(payload)


def data_of(method, path, body=None):
    """The docs' envelope-aware helper: unwrap data, raise on failure."""
    status, env = request(method, path, body)
    if status != 200 or not env.get("success"):
        raise AssertionError("%s %s: %d %s" % (method, path, status, env))
    return env["data"]


def scenario(fn):
    try:
        fn()
        print("PASS " + fn.__name__)
    except Exception as e:  # report and go on
        print("FAIL %s: %s" % (fn.__name__, repr(e)[:400]))
    sys.stdout.flush()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- commands (bash.mdx) ----

def wait_done(cid):
    """Long-poll from the offsets read so far until the command ends."""
    out, err = "", ""
    deadline = time.time() + 20
    while True:
        got = data_of("GET", "/v2/commands/%s?wait=true&wait_timeout=5&offset=%d&stderr_offset=%d"
                      % (cid, len(out.encode()), len(err.encode())))
        out += got["stdout"]
        err += got["stderr"]
        if got["command"]["status"] != "running" or time.time() > deadline:
            return got, out, err


def commands_run_v2():
    d = data_of("POST", "/v2/commands", {"command": "pwd && ls -la", "cwd": WORK, "timeout": 30})
    check(d["status"] == "completed" and d["exit_code"] == 0, d)
    check(d["stdout"].startswith(WORK + "\n") and "total" in d["stdout"], d)
    check(d["output"] == d["stdout"] + d["stderr"], d)


def commands_run_v1():
    d = data_of("POST", "/v1/bash/exec", {"command": "pwd && ls -la", "exec_dir": WORK, "timeout": 30})
    check(d["status"] == "completed" and d["exit_code"] == 0 and d["stdout"].startswith(WORK), d)
    check(d["stderr"] is None, "v1 stderr is null while empty: %r" % d["stderr"])


def stream(path):
    status, body = request("POST", path, {"command": "echo one; echo two >&2; exit 3"},
                           {"Accept": "application/x-ndjson"}, raw=True)
    check(status == 200, status)
    frames = [json.loads(l) for l in body.splitlines() if l.strip()]
    check([f["type"] for f in frames] == ["started", "output", "output", "exit"], frames)
    check([f["seq"] for f in frames] == [1, 2, 3, 4], frames)
    out = {f["stream"]: f for f in frames if f["type"] == "output"}
    check(out["stdout"]["data"] == "b25lCg==" and out["stdout"]["offset"] == 0, out)
    check(out["stderr"]["data"] == "dHdvCg==" and out["stderr"]["offset"] == 0, out)
    ex = frames[-1]
    check((ex["status"], ex["exit_code"], ex["stdout_offset"], ex["stderr_offset"]) == ("completed", 3, 4, 4), ex)


def commands_stream_v2():
    stream("/v2/commands")


def commands_stream_v1():
    stream("/v1/bash/exec")


def commands_background_v2():
    port = free_port()
    session = data_of("POST", "/v2/commands/sessions", {"cwd": WORK, "env": {"PORT": str(port)}})
    started = data_of("POST", "/v2/commands", {"command": "python3 -u -m http.server $PORT --bind 127.0.0.1",
                                               "session": session["session_id"], "mode": "async"})
    cid = started["command_id"]
    log = {"stdout": ""}
    for _ in range(20):
        log = data_of("GET", "/v2/commands/%s?offset=0&stderr_offset=0&wait=true&wait_timeout=5" % cid)
        if "Serving HTTP" in log["stdout"]:
            break
    check("Serving HTTP" in log["stdout"] and log["command"]["status"] == "running", log)
    data_of("POST", "/v2/commands/%s/kill" % cid, {"signal": "SIGTERM"})
    done, _, _ = wait_done(cid)
    check(done["command"]["status"] == "completed" and done["command"]["exit_code"] == -1, done)
    data_of("DELETE", "/v2/commands/sessions/%s" % session["session_id"])
    status, _ = request("DELETE", "/v2/commands/sessions/%s" % session["session_id"])
    check(status == 404, "second delete: %d" % status)


def commands_background_v1():
    port = free_port()
    session = data_of("POST", "/v1/bash/sessions/create", {"exec_dir": WORK})
    sid = session["session_id"]
    data_of("POST", "/v1/bash/exec", {"command": "python3 -u -m http.server %d --bind 127.0.0.1" % port,
                                      "session_id": sid, "async_mode": True})
    log = {"stdout": ""}
    for _ in range(20):
        log = data_of("POST", "/v1/bash/output", {"session_id": sid, "offset": 0, "stderr_offset": 0,
                                                 "wait": True, "wait_timeout": 5})
        if log["stdout"] and "Serving HTTP" in log["stdout"]:
            break
    check("Serving HTTP" in (log["stdout"] or "") and log["command"]["status"] == "running", log)
    data_of("POST", "/v1/bash/kill", {"session_id": sid, "signal": "SIGTERM"})
    data_of("POST", "/v1/bash/sessions/%s/close" % sid)


def commands_interactive_v2():
    repl = data_of("POST", "/v2/commands", {"command": "python3 -u -i -q", "mode": "async"})
    cid = repl["command_id"]
    data_of("POST", "/v2/commands/%s/stdin" % cid, {"input": "x = 6 * 7\nprint(x)\n"})
    # Follow both streams: the ">>> " prompts are on stderr, and a read
    # that names no stderr_offset (default 0) ends at once on them.
    out, err = "", ""
    for _ in range(20):
        got = data_of("GET", "/v2/commands/%s?wait=true&wait_timeout=2&offset=%d&stderr_offset=%d"
                      % (cid, len(out.encode()), len(err.encode())))
        out += got["stdout"]
        err += got["stderr"] or ""
        if "42\n" in out:  # print writes "42" and "\n" apart under -u
            break
    check(out == "42\n", out)
    data_of("POST", "/v2/commands/%s/stdin" % cid, {"input": "exit()\n"})
    got, _, _ = wait_done(cid)
    check(got["command"]["status"] == "completed" and got["command"]["exit_code"] == 0, got)


# ---- files (file.mdx) ----

def files_read_write_v2():
    demo = os.path.join(WORK, "demo")
    d = data_of("POST", "/v2/fs/write", {"path": demo + "/README.md", "content": "# demo\n"})
    check(d["file"] == demo + "/README.md" and d["bytes_written"] == 7, d)
    data_of("POST", "/v2/fs/write", {"path": demo + "/src/app.py", "content": "import sys\n\n\ndef main():\n    print(sys.argv)\n\n"})
    d = data_of("GET", "/v2/fs/read?path=%s/src/app.py&start_line=2&end_line=5" % demo)
    check(d["content"] == "\ndef main():\n    print(sys.argv)", d)


def files_read_write_v1():
    demo = os.path.join(WORK, "demo1")
    d = data_of("POST", "/v1/file/write", {"file": demo + "/README.md", "content": "# demo\n"})
    check(d["file"] == demo + "/README.md", d)
    d = data_of("POST", "/v1/file/read", {"file": demo + "/README.md", "start_line": 0, "end_line": 1})
    check(d["content"] == "# demo", d)


def files_grep_v1_v2():
    demo = os.path.join(WORK, "demo")
    for path in ("/v2/fs/grep", "/v1/file/grep"):
        d = data_of("POST", path, {"path": demo, "pattern": "argv", "recursive": True})
        check(d["match_count"] == 1 and d["matches"][0]["line_number"] == 5, d)
        check(d["matches"][0]["line_content"].strip() == "print(sys.argv)", d)


def files_editor():
    f = os.path.join(WORK, "demo", "src", "app.py")
    status, env = request("POST", "/v2/fs/edit", {"command": "str_replace", "path": f, "old_str": "nothere", "new_str": "x"})
    check(status == 400 and env["message"] == "old_str not found in file", env)
    d = data_of("POST", "/v2/fs/edit", {"command": "str_replace", "path": f, "old_str": "sys.argv", "new_str": "sys.argv[1:]"})
    check("sys.argv[1:]" in d["new_content"] and d["prev_exist"] is True, d)
    data_of("POST", "/v2/fs/edit", {"command": "undo_edit", "path": f})
    check("sys.argv[1:]" not in data_of("GET", "/v2/fs/read?path=" + f)["content"], "undo")


def files_transfer():
    target = os.path.join(WORK, "demo", "blob.bin")
    payload = os.urandom(300000)
    boundary = uuid.uuid4().hex
    body = (("--%s\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\n%s\r\n" % (boundary, target)).encode()
            + ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob.bin\"\r\n"
               "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode()
            + payload + ("\r\n--%s--\r\n" % boundary).encode())
    status, env = request("POST", "/v2/fs/upload?path=" + target, body,
                          {"Content-Type": "multipart/form-data; boundary=" + boundary})
    check(status == 200 and env["data"]["file_size"] == len(payload), env)
    status, got = request("GET", "/v2/fs/download?path=" + target, raw=True)
    check(status == 200 and got == payload, status)
    status, got = request("GET", "/v2/fs/download?path=" + target, headers={"Range": "bytes=100-199"}, raw=True)
    check(status == 206 and got == payload[100:200], status)
    status, _ = request("GET", "/v2/fs/download?path=" + target + ".missing", raw=True)
    check(status == 404, status)


def files_errors():
    missing = os.path.join(WORK, "missing.txt")
    status, env = request("POST", "/v1/file/read", {"file": missing})
    check(status == 200 and env["success"] is False, env)
    check(env["data"]["error_type"] == "not_found" and env["data"]["errno_name"] == "ENOENT", env)
    status2, env2 = request("GET", "/v2/fs/read?path=" + missing)
    check(status2 == 404 and env2["data"] == env["data"], env2)


PLANES = {
    "commands": [commands_run_v2, commands_run_v1, commands_stream_v2, commands_stream_v1,
                 commands_background_v2, commands_background_v1, commands_interactive_v2],
    "files": [files_read_write_v2, files_read_write_v1, files_grep_v1_v2, files_editor, files_transfer, files_errors],
}

for fn in PLANES[PLANE]:
    scenario(fn)
