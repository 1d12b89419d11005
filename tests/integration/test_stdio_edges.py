"""liminal's stdin and stdout as a shell or a service manager may hand them over: ``/dev/null``, a
regular file, closed. ``liminal acp`` and ``liminal mcp`` must take each like any other end of
input: exit 0, the answers where stdout goes, not a line of traceback, no hang.

``liminal acp -- cat </dev/null`` printed asyncio's ``PermissionError: [Errno 1]`` (epoll
refuses a character device) and never saw the end of its input; with stdin closed, fd 0 was
the event loop's epoll and the reader thread died on EINVAL, the proxy hanging the same way;
``liminal mcp`` with stdin or stdout closed crashed on ``sys.stdin`` being None.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.proxy_process import child_env, liminal_argv, scripted_agent_argv

INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'

# How stdin and stdout are handed over, as sh redirections; "$IN" is a file holding INITIALIZE.
CASES = {
    "stdin /dev/null": "</dev/null",
    "stdin closed": "<&-",
    "stdin a file, stdout a file": '<"$IN" >"$OUT"',
    "stdin a file, stdout /dev/null": '<"$IN" >/dev/null',
    "stdin a file, stdout closed": '<"$IN" >&-',
    "stdin /dev/null, stdout and stderr /dev/null": "</dev/null >/dev/null 2>/dev/null",
}

COMMANDS = {
    "liminal acp": liminal_argv(scripted_agent_argv()),
    "liminal mcp": [sys.executable, "-m", "liminal", "mcp", "--thread", "t-1"],
    "python -m liminal.mcp": [sys.executable, "-m", "liminal.mcp", "--thread", "t-1"],
}


def run(tmp_path: Path, argv: list[str], redirections: str) -> tuple[int, str]:
    (tmp_path / "in.ndjson").write_bytes(INITIALIZE)
    env = child_env(tmp_path, IN=str(tmp_path / "in.ndjson"), OUT=str(tmp_path / "out.ndjson"))
    # ``exec`` with the redirections: the command itself starts with them, as from a shell.
    script = f'exec "$@" {redirections} 2>>"$ERR"' if "2>" not in redirections else f'exec "$@" {redirections}'
    env["ERR"] = str(tmp_path / "stderr.log")
    done = subprocess.run(["sh", "-c", script, "sh", *argv], env=env, timeout=60,
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    err = tmp_path / "stderr.log"
    return done.returncode, err.read_text() if err.exists() else ""


@pytest.mark.parametrize("redirections", list(CASES.values()), ids=list(CASES))
@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_stdin_and_stdout_of_any_kind_end_cleanly(tmp_path: Path, command: str, redirections: str) -> None:
    code, stderr = run(tmp_path, COMMANDS[command], redirections)
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
    out = tmp_path / "out.ndjson"
    if '>"$OUT"' in redirections:
        answers = [json.loads(line) for line in out.read_bytes().splitlines()]
        assert [a["id"] for a in answers] == [1], answers  # the initialize answered, into the file
