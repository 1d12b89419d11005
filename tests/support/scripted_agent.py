"""A small ACP agent for integration tests, driven by what the client sends.

Every byte it reads is appended to $AGENT_LOG_IN and every byte it writes to $AGENT_LOG_OUT, so a
test can compare both sides of the proxy exactly. Behaviour by method:

- ``initialize``, ``session/new``, ``session/load``: plausible results. A load replays what a
  compressed session would: a ``[compressed]`` preamble, then the last prompt this agent was
  given (remembered beside $AGENT_LOG_IN, so across restarts too) and a short answer, and
  an ``available_commands_update``. With ``$AGENT_REPLAY_ALL``, a load replays every turn
  this agent was given instead (remembered the same way), as a real adapter replays a
  session: the prompt, a tool call with its output, and the answer as it streamed, then the
  commands and a ``usage_update``.
- ``session/prompt``: the prompt text ``chunks:N`` streams N ``agent_message_chunk`` updates
  (of about B bytes each with ``size:B``);
  ``ask`` first sends ``session/request_permission`` and waits for the answer; ``until-cancel``
  says ``working`` and runs until a ``session/cancel`` of its session (answered ``cancelled``),
  handling everything else meanwhile; ``used:N`` sends a
  ``usage_update`` with ``used`` N; then end_turn.
- ``session/set_mode``, ``session/set_config_option``, ``session/close``: empty results (an
  error for a mode or value named ``no-such...``, as an agent refuses one it does not have).
- ``session/list``: every session it created, loaded or resumed (remembered beside
  $AGENT_LOG_IN, so across restarts too), newest first, titled ``title of <id>``.
- ``$AGENT_SPEAKS_V2``: ``initialize`` asking for version 2 or later is answered in v2 (version 2,
  ``info``, ``capabilities``), as an adapter that speaks both answers; everything after is v1.
- ``$AGENT_FAIL`` names one method that answers with an error instead;
  ``$AGENT_FAIL_RESUMED`` one that does so only for sessions opened by load or resume.
- ``_echo``: answers with the request's params (plus ``padding`` of ``pad`` bytes if asked).
- ``_say``: writes ``params.raw`` (a string) to stdout verbatim as one line.
- ``_stderr``: writes ``params.text`` to stderr.
- ``_die``: exits at once with ``params.code``.
- ``$AGENT_CLAUDE_CONFIG_DIR``: keep a Claude Code session file per session there, as the CLI
  would (``tests.support.claude_files``): a fixture's copy for a new session, each turn appended
  before the prompt is answered. With ``$AGENT_CLAUDE_NEW_EMPTY`` a new session has no file
  until its first turn, as the real CLI's.
- ``_close_stdout``: closes its stdout and goes on running (reading stdin, answering nothing).
- anything else with an id: a -32601 error. Notifications are ignored.

Lines are read as Node's ``TextDecoder`` reads them (the Claude adapters): invalid UTF-8 becomes
U+FFFD and the rest is read as usual.

Flags: ``--ignore-eof`` keeps running after stdin closes (like the older Claude adapter);
``--ignore-term`` also ignores SIGTERM (so only SIGKILL stops it).

Several processes (liminal's recycle starts more): each appends its pid to
``$AGENT_LOG_IN.pids`` at start and logs what it reads to ``$AGENT_LOG_IN.<pid>`` as well.
``_pid`` answers ``{"pid": <its pid>}``.

- ``$AGENT_OPEN_SECONDS``: ``session/load`` and ``session/resume`` take this long to answer (a
  real adapter takes a second or more to open a session: the window a swap spends opening it).
- ``$AGENT_LOAD_NEEDS_FILE``: with ``$AGENT_CLAUDE_CONFIG_DIR``, a load or resume of a session
  whose file is not there is refused as Claude Code's adapter refuses it ("Resource not found");
  the bytes of each file it opens are appended to ``$AGENT_LOG_IN.opened`` (one JSON line each).
- ``$AGENT_NO_CLOSE``: no ``sessionCapabilities.close`` (like the older Claude adapter).
- ``$AGENT_LIST``: ``sessionCapabilities.list`` advertised (``session/list`` answers either way).
- ``$AGENT_CHILD_PER_SESSION``: every session opened (new, load, resume) starts a child process
  that lives as long as the agent's process group, as the older Claude adapter's Claude Code
  processes do.
- ``$AGENT_LATER`` = ``"<what> <method>"``: in every process but the first, ``<method>``
  answers with an error (``fail``), never answers (``hang``), exits (``die``), or first waits
  until the FIFO ``$AGENT_GATE`` is opened and closed by the test (``gate``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

IGNORE_EOF = "--ignore-eof" in sys.argv
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

# Open for the life of the process, on purpose.
log_in = open(os.environ["AGENT_LOG_IN"], "ab") if os.environ.get("AGENT_LOG_IN") else None  # noqa: SIM115
own_log_in = None
FIRST = True  # the first process started with this log
if os.environ.get("AGENT_LOG_IN"):
    with open(os.environ["AGENT_LOG_IN"] + ".pids", "a+") as pids:
        pids.seek(0)
        FIRST = not pids.read().strip()
        pids.write(f"{os.getpid()}\n")
    own_log_in = open(f"{os.environ['AGENT_LOG_IN']}.{os.getpid()}", "ab")  # noqa: SIM115
LATER_WHAT, _, LATER_METHOD = os.environ.get("AGENT_LATER", "").partition(" ")
children: list[subprocess.Popen[bytes]] = []
log_out = open(os.environ["AGENT_LOG_OUT"], "ab") if os.environ.get("AGENT_LOG_OUT") else None  # noqa: SIM115
out = sys.stdout.buffer
stdin = sys.stdin.buffer


def send_raw(line: bytes) -> None:
    try:
        out.write(line + b"\n")
        out.flush()
    except OSError:  # stdout closed (``_close_stdout``)
        return
    if log_out:
        log_out.write(line + b"\n")
        log_out.flush()


def send(message: dict) -> None:
    send_raw(json.dumps(message, separators=(",", ":")).encode())


def read_line() -> bytes | None:
    line = stdin.readline()
    if not line:
        return None
    for log in (log_in, own_log_in):
        if log:
            log.write(line)
            log.flush()
    return line


def parse(line: bytes) -> Any:
    return json.loads(line.decode("utf-8", "replace"))


def session_opened() -> None:
    if os.environ.get("AGENT_CHILD_PER_SESSION"):
        children.append(subprocess.Popen(["sleep", "100000"]))


def later(method: str | None, rpc_id: object) -> bool:
    """``$AGENT_LATER`` for this method in a later process: True if the request is dealt with."""
    if FIRST or method != LATER_METHOD:
        return False
    if LATER_WHAT == "gate":
        with open(os.environ["AGENT_GATE"], "rb") as gate:
            gate.read()
        return False
    if LATER_WHAT == "fail":
        send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32603, "message": "scripted later failure"}})
    elif LATER_WHAT == "die":
        os._exit(9)
    return True  # hang: never answered


CLAUDE_DIR = os.environ.get("AGENT_CLAUDE_CONFIG_DIR")
session_cwd: dict[str, str] = {}
resumed: set[object] = set()  # sessions opened by session/load or session/resume


def claude_file(sid: str) -> object:
    """The session's file, as Claude Code keeps it (``$AGENT_CLAUDE_CONFIG_DIR``), or None."""
    if not CLAUDE_DIR or sid not in session_cwd:
        return None
    from pathlib import Path

    from tests.support import claude_files

    return claude_files.session_path(Path(CLAUDE_DIR), session_cwd[sid], sid)


def remember(sid: str) -> None:
    if not os.environ.get("AGENT_LOG_IN"):
        return
    with open(os.environ["AGENT_LOG_IN"] + ".sessions", "a") as known:
        known.write(sid + "\n")


def known_sessions() -> list[str]:
    try:
        with open(os.environ["AGENT_LOG_IN"] + ".sessions") as known:
            ids = known.read().split()
    except (KeyError, FileNotFoundError):
        return []
    return list(reversed(dict.fromkeys(ids)))


def remember_prompt(text: str) -> None:
    if os.environ.get("AGENT_LOG_IN"):
        with open(os.environ["AGENT_LOG_IN"] + ".prompt", "w") as last:
            last.write(text)


def remember_turn(prompt: str, answer: str) -> None:
    if os.environ.get("AGENT_LOG_IN"):
        with open(os.environ["AGENT_LOG_IN"] + ".turns", "a") as turns:
            turns.write(json.dumps({"prompt": prompt, "answer": answer}) + "\n")


def replay_every_turn(sid: str) -> None:
    try:
        with open(os.environ["AGENT_LOG_IN"] + ".turns") as turns:
            lines = turns.read().splitlines()
    except (KeyError, FileNotFoundError):
        lines = []
    for n, line in enumerate(lines):
        turn = json.loads(line)
        update(sid, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": turn["prompt"]}})
        update(sid, {"sessionUpdate": "tool_call", "toolCallId": f"tool-{n}", "title": "Read notes.txt",
                     "kind": "read", "status": "completed", "rawInput": {"path": "notes.txt"},
                     "content": [{"type": "content", "content": {"type": "text", "text": f"notes of turn {n} " * 20}}]})
        update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": turn["answer"]}})
    update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": []})
    update(sid, {"sessionUpdate": "usage_update", "used": 1000 * len(lines), "size": 200000})


def last_prompt() -> str:
    try:
        with open(os.environ["AGENT_LOG_IN"] + ".prompt") as last:
            return last.read()
    except (KeyError, FileNotFoundError):
        return ""


def update(sid: str, body: dict) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}})


def handle(message: dict) -> None:
    method = message.get("method")
    rpc_id = message.get("id")
    params = message.get("params") or {}
    if later(method, rpc_id):
        return
    if method == "initialize":
        capabilities = {} if os.environ.get("AGENT_NO_RESUME") else {"resume": {}, "close": {}}
        if os.environ.get("AGENT_NO_CLOSE"):
            capabilities.pop("close", None)
        if os.environ.get("AGENT_LIST"):
            capabilities["list"] = {}
        asked = params.get("protocolVersion")
        if os.environ.get("AGENT_SPEAKS_V2") and isinstance(asked, int) and asked >= 2:
            # An agent that speaks v2 as well answers a client asking for it in v2 (codex-acp).
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {
                "protocolVersion": 2, "info": {"name": "scripted", "version": "2"}, "capabilities": {}}})
            return
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True, "sessionCapabilities": capabilities},
            "authMethods": []}})
    elif method == "_pid":
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"pid": os.getpid()}})
    elif method == "session/new":
        sid = str(uuid.uuid4())
        if CLAUDE_DIR:
            from pathlib import Path

            from tests.support import claude_files

            session_cwd[sid] = str(params.get("cwd") or "/work")
            if not os.environ.get("AGENT_CLAUDE_NEW_EMPTY"):
                claude_files.create(Path(CLAUDE_DIR), session_cwd[sid], sid)
        remember(sid)
        session_opened()
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": sid}})
    elif method == "session/list":
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessions": [
            {"sessionId": sid, "cwd": "/work", "title": f"title of {sid}"} for sid in known_sessions()]}})
    elif method in ("session/load", "session/resume"):
        sid = params.get("sessionId")
        if os.environ.get("AGENT_FAIL") == method:
            send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32002, "message": "scripted failure"}})
            return
        remember(sid)
        resumed.add(sid)
        session_opened()
        if os.environ.get("AGENT_OPEN_SECONDS"):
            time.sleep(float(os.environ["AGENT_OPEN_SECONDS"]))
        if CLAUDE_DIR and isinstance(sid, str):
            session_cwd[sid] = str(params.get("cwd") or "/work")
            if os.environ.get("AGENT_LOAD_NEEDS_FILE"):
                opened = claude_file(sid)
                if not opened.is_file():  # type: ignore[attr-defined]
                    send({"jsonrpc": "2.0", "id": rpc_id, "error": {
                        "code": -32002, "message": f"Resource not found: {sid}"}})
                    return
                with open(os.environ["AGENT_LOG_IN"] + ".opened", "a") as log:
                    log.write(json.dumps({"sessionId": sid, "path": str(opened),
                                          "bytes": opened.read_text()}) + "\n")  # type: ignore[attr-defined]
        if method == "session/load" and os.environ.get("AGENT_REPLAY_ALL"):
            replay_every_turn(sid)
        elif method == "session/load":
            update(sid, {"sessionUpdate": "user_message_chunk",
                         "content": {"type": "text", "text": "[compressed] replayed preamble"}})
            if last_prompt():
                update(sid, {"sessionUpdate": "user_message_chunk",
                             "content": {"type": "text", "text": last_prompt()}})
                update(sid, {"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": "[compressed] replayed answer"}})
            update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": []})
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})
    elif method == "session/prompt":
        sid = params["sessionId"]
        text = " ".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))
        remember_prompt(text)
        if "ask" in text.split():
            send({"jsonrpc": "2.0", "id": 900, "method": "session/request_permission", "params": {
                "sessionId": sid, "toolCall": {"toolCallId": "t1", "title": "touch"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]}})
            while True:
                line = read_line()
                if line is None:
                    return
                answer = parse(line)
                if answer.get("id") == 900:
                    break
                handle(answer)  # the client goes on with other sessions meanwhile
        if "until-cancel" in text.split():
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "working"}})
            while True:
                line = read_line()
                if line is None:
                    return
                message = parse(line)
                if message.get("method") == "session/cancel" and message["params"].get("sessionId") == sid:
                    send({"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": "cancelled"}})
                    return
                handle(message)
        n = size = 0
        for word in text.split():
            if word.startswith("chunks:"):
                n = int(word.split(":", 1)[1])
            if word.startswith("size:"):
                size = int(word.split(":", 1)[1])
        answer = []
        for i in range(n):
            chunk = f"chunk {i} é中"
            answer.append(chunk + "x" * (size - len(chunk)))
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": answer[-1]}}}})
        if os.environ.get("AGENT_REPLAY_ALL"):
            remember_turn(text, "".join(answer))
        path = claude_file(sid)
        if path is not None and not path.exists() and os.environ.get("AGENT_CLAUDE_NEW_EMPTY"):  # type: ignore[attr-defined]
            path.parent.mkdir(parents=True, exist_ok=True)  # type: ignore[attr-defined]
            path.touch()  # type: ignore[attr-defined]
        if path is not None and path.exists():  # type: ignore[attr-defined]
            from tests.support import claude_files

            used = [int(w.split(":", 1)[1]) for w in text.split() if w.startswith("used:")]
            claude_files.append_turn(path, sid, session_cwd[sid], text, f"answer to {text}",  # type: ignore[arg-type]
                                     used[-1] if used else 1000)
        for word in text.split():
            if word.startswith("used:"):
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                    "sessionUpdate": "usage_update", "used": int(word.split(":", 1)[1]), "size": 200000}}})
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": "end_turn"}})
    elif method in ("session/set_mode", "session/set_config_option", "session/close"):
        if (os.environ.get("AGENT_FAIL") == method or "no-such" in str(params.get("modeId") or params.get("value"))
                or (os.environ.get("AGENT_FAIL_RESUMED") == method and params.get("sessionId") in resumed)):
            send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32603, "message": "scripted failure"}})
        else:
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})
    elif method == "_echo":
        if "pad" in params:  # a larger answer than the request, for the frame cap
            params = dict(params, padding="p" * int(params["pad"]))
        raw = json.dumps(params, separators=(",", ":"))
        send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(rpc_id).encode() + b',"result":' + raw.encode() + b"}")
    elif method == "_say":
        send_raw(params["raw"].encode())
        if rpc_id is not None:
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})
    elif method == "_stderr":  # "text" written "times" times, each followed by "end"
        text, end = params["text"], params.get("end", "\n")
        for _ in range(int(params.get("times", 1))):
            sys.stderr.write(text + end)
        sys.stderr.flush()
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {}})
    elif method == "_die":
        os._exit(int(params.get("code", 3)))
    elif method == "_hang":
        pass  # never answers
    elif method == "_close_stdout":  # goes on running, but can answer nothing any more
        out.flush()
        os.close(1)
    elif rpc_id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32601, "message": f"no {method}"}})


def main() -> None:
    while True:
        line = read_line()
        if line is None:
            break
        try:
            message = parse(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message)
    while IGNORE_EOF:
        time.sleep(3600)


if __name__ == "__main__":
    main()
