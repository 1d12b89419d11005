"""Private by default: liminal's home is 0700, everything liminal writes is 0600, the agent keeps
the user's umask, and ids and paths from outside never reach a file they should not."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.harness.claude.paths import SessionNotFound, find, locate
from tests.integration.test_proxy_process import agent_pid, running
from tests.support.proxy_process import REPO, child_env, scripted_agent_argv
from tests.transcript import SID, Transcript

pytestmark = pytest.mark.anyio


def modes(root: Path) -> dict[str, int]:
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def liminal(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "liminal", *args], env=child_env(tmp_path, **env),
                          capture_output=True, timeout=60, check=False, cwd=REPO)


async def test_everything_liminal_writes_is_private_and_the_agent_keeps_the_users_umask(
    tmp_path: Path,
) -> None:
    home = tmp_path / "liminal-home"
    home.mkdir(mode=0o755)  # an older liminal, or a person, made it readable by others
    home.chmod(0o755)
    previous = os.umask(0o022)  # the user's own
    try:
        async with running(tmp_path, scripted_agent_argv()) as proxy:
            await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
            session = (await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []},
                                           rpc_id=2))["result"]["sessionId"]
            await proxy.prompt(session, "chunks:20 used:1000")
            status = await anyio.Path(f"/proc/{await agent_pid(proxy)}/status").read_text()
            await proxy.close_stdin()
            assert await proxy.wait_exit() == 0
        # A rewrite by hand, of a session the CLI wrote 0600.
        claude = tmp_path / "claude"
        transcript = Transcript()
        for n in range(30):
            transcript.turn(n, parallel=2, size=3000, prose=20)
        source = transcript.write(claude)
        source.chmod(0o600)
        done = liminal(tmp_path, "compress", SID, "--target-tokens", "8000", CLAUDE_CONFIG_DIR=str(claude))
        assert done.returncode == 0, done.stderr
    finally:
        os.umask(previous)
    assert "Umask:\t0022" in status  # the agent writes the user's files with the user's umask
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    written = modes(home)
    assert any(name.endswith("liminal.db") for name in written), written
    loose = {name: oct(mode) for name, mode in written.items()
             if mode != (0o700 if (home / name).is_dir() else 0o600)}
    assert loose == {}
    rewrites = [p for p in source.parent.glob("*.jsonl") if p != source]
    assert rewrites and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in rewrites)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "a/b", "..", "x" * 36, "/etc/passwd",
                                 "00000000-0000-0000-0000-00000000000/", "\x00", ""])
def test_an_id_from_a_frame_never_becomes_a_path(tmp_path: Path, bad: str) -> None:
    # What the swap and the index do with a session id they read in a frame.
    (tmp_path / "projects" / "p").mkdir(parents=True)
    assert find(bad, "/work", {"CLAUDE_CONFIG_DIR": str(tmp_path)}) is None


def finishes(call: Callable[[], Any], seconds: float = 10) -> BaseException | None:
    """Run ``call`` in a thread; fail the test if it does not return (a FIFO blocks forever)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, "still reading after 10 s"
    return outcome[0]


def special_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    return {"fifo": fifo, "zero": zero, "folder": folder}


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_a_session_reference_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = special_files(tmp_path)[kind]
    error = finishes(lambda: locate(str(path)))
    assert isinstance(error, SessionNotFound) and "not a regular file" in str(error)


@pytest.mark.parametrize("command", ["inspect", "compress"])
@pytest.mark.parametrize("ref", ["fifo", "zero", "../../x"])
def test_inspect_and_compress_refuse_what_is_not_a_session_in_one_line(
    tmp_path: Path, command: str, ref: str
) -> None:
    files = special_files(tmp_path)
    target = str(files[ref]) if ref in files else ref
    done = liminal(tmp_path, command, target, CLAUDE_CONFIG_DIR=str(tmp_path))
    assert done.returncode != 0
    assert b"Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_relative_home_or_config_reaches_the_mcp_server_as_the_same_place(
    tmp_path: Path,
) -> None:
    """The agent starts liminal's MCP server in the session's folder, not in liminal's: a home,
    a config file or a PYTHONPATH entry given relative to where liminal started must reach it
    as the same place (else its tools look for bind files in a home made in the user's project,
    and a relative --config there is "no such file")."""
    import json

    started = tmp_path / "started-here"
    started.mkdir()
    (started / "liminal.toml").write_text("[swap]\nnotice = \"info\"\n")
    env = child_env(tmp_path, LIMINAL_HOME="rel-home", PYTHONPATH=os.path.relpath(REPO, started))
    argv = [sys.executable, "-m", "liminal", "--config", "liminal.toml", "acp", "--",
            *scripted_agent_argv()]
    project = tmp_path / "project"
    project.mkdir()
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
             {"jsonrpc": "2.0", "id": 2, "method": "session/new",
              "params": {"cwd": str(project), "mcpServers": []}}]
    done = subprocess.run(argv, input=b"".join(json.dumps(m).encode() + b"\n" for m in lines),
                          env=env, cwd=started, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    sent = [json.loads(line) for line in (tmp_path / "agent_in.bin").read_bytes().splitlines()]
    spec = next(m for m in sent if m.get("method") == "session/new")["params"]["mcpServers"][0]
    args = spec["args"]
    assert args[args.index("--home") + 1] == str(started / "rel-home")
    assert args[args.index("--config") + 1] == str(started / "liminal.toml")
    assert Path({e["name"]: e["value"] for e in spec["env"]}["PYTHONPATH"]).resolve() == REPO.resolve()
    # Started as the agent starts it, in the session's folder, it reads the same config.
    shown = subprocess.run([spec["command"], "-m", "liminal", *args[args.index("--home"):args.index("--home") + 4],
                            "config", "--json"],
                           env={**env, **{e["name"]: e["value"] for e in spec["env"]}},
                           cwd=project, capture_output=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["settings"]["swap.notice"]["value"] == "info"
    assert not (project / "rel-home").exists()
