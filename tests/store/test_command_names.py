"""Every command that takes a thread or a session reads it one way (``liminal.lookup.names``):
its id, a session's id, or a unique prefix of either; an unknown one is "no such thread: X",
exit 1; an ambiguous one lists the candidates. And every command that prints survives a reader
that stops reading.

Found by a new user: ``liminal swaps d6db1964`` said "no swaps yet" for a thread with moves that
``liminal history d6db1964`` showed, ``liminal inspect d6db1964`` said it was neither a file nor
an id, and ``liminal history X | head`` ended in a BrokenPipeError traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from liminal import cli
from liminal.ingest.indexer import Indexer
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.store.sqlite import SqliteStore
from tests.store.conftest import conversation, moved
from tests.support import claude_files
from tests.support.proxy_process import REPO

THREAD = "d6db1964-0c4e-4b8a-9f51-2a7f3c1d9e10"
BACKING = "5b0a7e22-41d3-4c55-8e0f-6a2b9c7d1e33"
OTHER = "d6e01234-7777-4a2b-9c3d-00000000abcd"  # "d6" names both
CWD = "/work/demo"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with two threads in its store, one of them moved onto a second session (its
    swap in the journal, its sessions' files in the CLI's folder)."""
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)

    async def fill() -> None:
        store = await SqliteStore.open(tmp_path / "liminal.db")
        indexer = Indexer(store, tmp_path / "spool")
        for e in [*conversation(THREAD), *moved(THREAD, [BACKING], t0=1100.0),
                  *conversation(OTHER, connection="conn2", t0=1200.0)]:
            indexer.offer(e)
        await indexer.aclose()
        await store.aclose()

    anyio.run(fill)
    SwapJournal(tmp_path / "swaps.jsonl").append(SwapRecord(
        THREAD, THREAD, BACKING, "committed", "context 131200 tokens >= 120000", 1101.0, 0.4,
        131200, 80000, cwd=CWD, move="swap"))
    for session in (THREAD, BACKING):
        claude_files.create(tmp_path / "claude", CWD, session)
    yield tmp_path


def test_a_prefix_names_the_thread_in_every_command(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["history", "d6db"], ["search", "flux", "--thread", "d6db"], ["swaps", "d6db"],
                 ["swaps", "5b0a7e22"], ["inspect", "d6db1964"], ["compress", "d6db1964", "--dry-run"],
                 ["threads", "rename", "d6db", "Flux", "work"], ["threads", "archive", "d6db"],
                 ["threads", "unarchive", "d6db"]):
        assert cli.main(argv) == 0, (argv, capsys.readouterr().err)
        out = capsys.readouterr().out
        assert "no swaps" not in out and "no match" not in out, (argv, out)
    assert cli.main(["swaps", "d6db", "--json"]) == 0
    assert THREAD in capsys.readouterr().out
    # A thread names its latest session, a session's id that session.
    assert cli.main(["inspect", "d6db1964", "--json"]) == 0
    assert BACKING in capsys.readouterr().out
    assert cli.main(["inspect", THREAD[:13], "--json"]) == 0
    assert BACKING in capsys.readouterr().out
    assert cli.main(["threads", "delete", "d6db", "--yes"]) == 0
    assert f"deleted thread {THREAD}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["history", "{}"], ["search", "flux", "--thread", "{}"], ["swaps", "{}"], ["inspect", "{}"],
    ["compress", "{}", "--dry-run"], ["threads", "rename", "{}", "x"], ["threads", "archive", "{}"],
    ["threads", "unarchive", "{}"], ["threads", "delete", "{}", "--yes"],
])
def test_an_unknown_or_ambiguous_id_is_said_the_same_way(
        home: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    for given, said in (("ffff0000", "no such thread: ffff0000"),
                        ("d6", f"'d6' names 2 threads: {THREAD}, {OTHER}")):
        assert cli.main([a.format(given) for a in argv]) == 1
        err = capsys.readouterr().err
        if argv[0] in ("inspect", "compress") and given == "ffff0000":
            said = "no such thread or session: ffff0000"  # a session liminal never saw is looked for too
        assert err.startswith("liminal ") and said in err and len(err.splitlines()) == 1, err


def test_archiving_says_what_it_did_and_when_there_was_nothing_to_do(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, unarchiving a thread that was not archived said "thread ... is active"."""
    assert cli.main(["threads", "unarchive", "d6db"]) == 0
    assert capsys.readouterr().out == f"thread {THREAD} is not archived; nothing to do\n"
    assert cli.main(["threads", "archive", "d6db"]) == 0
    assert capsys.readouterr().out.startswith(f"archived thread {THREAD}")
    assert cli.main(["threads", "archive", "d6db"]) == 0
    assert capsys.readouterr().out == f"thread {THREAD} is already archived; nothing to do\n"
    assert cli.main(["threads", "unarchive", "d6db"]) == 0
    assert capsys.readouterr().out == f"unarchived thread {THREAD}\n"


READING = [
    ["threads"], ["threads", "--json"], ["threads", "--all"], ["history", "d6db"],
    ["history", "d6db", "--json"], ["search", "flux"], ["search", "flux", "--json"], ["swaps"],
    ["swaps", "--json"], ["swaps", "d6db"], ["inspect", "d6db"], ["inspect", "d6db", "--json"],
    ["compress", "d6db", "--dry-run"], ["compress", "d6db", "--dry-run", "--json"], ["config"],
    ["doctor"], ["--help"], ["threads", "--help"], ["--version"],
]


@pytest.mark.parametrize("argv", READING, ids=" ".join)
def test_every_command_that_prints_survives_a_reader_that_stops_reading(home: Path, argv: list[str]) -> None:
    """stdout a pipe whose reader has gone before the first write (``| head`` once it has its
    lines): exit 141 as a Unix tool's, nothing on stderr but what the command would say anyway."""
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        done = subprocess.run([sys.executable, "-m", "liminal", *argv], stdout=write,
                              stderr=subprocess.PIPE, env=env, timeout=120, check=False)
    finally:
        os.close(write)
    err = done.stderr.decode()
    # argparse's own output (--help, --version) swallows the error itself: a quiet 0.
    assert done.returncode == (0 if {"--help", "--version"} & set(argv) else 128 + signal.SIGPIPE), err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
