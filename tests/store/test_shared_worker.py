"""``SharedWorker``'s side of the pipe (``liminal.ingest.shared``), against a stand-in worker
that notes every line it reads: what a spool writer calls never waits on the worker, lines
are never torn or reordered when the pipe is full, and a worker that dies is replaced and told
every spool still attached."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import orjson
import pytest

from liminal import config
from liminal.ingest.shared import SharedWorker

pytestmark = pytest.mark.anyio

# A worker that reads nothing until ``GO`` exists (so the pipe fills), then notes each line it
# reads in ``NOTED`` (with its pid) and answers a seal with ``drained``.
STAND_IN = r"""
import os, sys, time, json
go, noted = os.environ["GO"], os.environ["NOTED"]
while not os.path.exists(go):
    time.sleep(0.01)
with open(noted, "a") as out:
    for line in sys.stdin.buffer:
        out.write(json.dumps([os.getpid(), line.decode()]) + "\n")
        out.flush()
        if line.strip():
            what, key = json.loads(line)
            if what == "seal":
                sys.stdout.buffer.write(json.dumps(["drained", key]).encode() + b"\n")
                sys.stdout.buffer.flush()
"""


def noted(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [tuple(orjson.loads(line)) for line in path.read_text().splitlines()]  # type: ignore[misc]


async def until(predicate: Callable[[], bool], timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - another process's files and state, no event
            await anyio.sleep(0.02)


async def test_a_full_pipe_neither_blocks_the_writers_nor_tears_a_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go, log = tmp_path / "go", tmp_path / "noted"
    monkeypatch.setenv("GO", str(go))
    monkeypatch.setenv("NOTED", str(log))
    # Paths of 2 kB, 200 of them: 400 kB of lines, several times what a pipe holds.
    spools = [tmp_path / f"{n:04d}{'x' * 2000}" for n in range(200)]
    async with SharedWorker(config.load({"home": tmp_path}),
                            worker_argv=[sys.executable, "-c", STAND_IN]) as shared:
        shared.attach(spools[0])
        await until(lambda: shared.pid is not None)
        # The worker reads nothing yet: a write that waited for it would hang here for good.
        for spool in spools[1:]:
            shared.attach(spool)
            shared.poke()  # dropped while lines wait: never in their middle
        assert shared._out  # the pipe is full, the rest waits in memory
        go.touch()
        assert await shared.drained(spools[-1], 30)
        lines = [line for _, line in noted(log) if line.strip()]
        assert lines == [orjson.dumps(["add", str(s)]).decode() + "\n" for s in spools] \
            + [orjson.dumps(["seal", str(spools[-1])]).decode() + "\n"]
        await shared.aclose(10)


async def test_a_dead_worker_is_replaced_and_told_every_spool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go, log = tmp_path / "go", tmp_path / "noted"
    go.touch()
    monkeypatch.setenv("GO", str(go))
    monkeypatch.setenv("NOTED", str(log))
    a, b = tmp_path / "a", tmp_path / "b"
    async with SharedWorker(config.load({"home": tmp_path}),
                            worker_argv=[sys.executable, "-c", STAND_IN]) as shared:
        shared.attach(a)
        shared.attach(b)
        await until(lambda: len(noted(log)) == 2)
        first = shared.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await until(lambda: shared.pid not in (None, first))
        second = shared.pid
        await until(lambda: [line for pid, line in noted(log) if pid == second] == [
            orjson.dumps(["add", str(a)]).decode() + "\n", orjson.dumps(["add", str(b)]).decode() + "\n"])
        assert await shared.drained(a, 30)  # the new one answers for a spool the old one had
        assert shared.workers_started == 2
        await shared.aclose(10)
