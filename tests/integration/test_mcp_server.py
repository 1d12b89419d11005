"""``python -m liminal.mcp`` as the CLI runs it: a process on stdio over a real store (SQLite;
MongoDB too when ``LIMINAL_TEST_MONGO_URL`` is set).

Recall answers byte-exact from the store (the CLI's file deleted) and from the file (nothing
indexed); search finds what a thread said; a memo saved under one thread is found from another
server; a slash command is left for the proxy; a server started with a nonce learns its thread
when liminal binds it; bad bindings are refused before anything runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from liminal.mcp import link
from liminal.store.base import Store
from liminal.store.records import Batch, MessageRecord, SessionRecord
from liminal.store.sqlite import SqliteStore
from tests.support.mongo import KINDS, fresh_database_sync

THREAD = str(uuid.uuid4())
SESSION = str(uuid.uuid4())
RECORD = str(uuid.uuid4())
ORIGINAL = "line one\n  \"quoted\" \\ tab\there, ünïcödé 🦀\n" * 400


class Server:
    def __init__(self, home: Path, *binding: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "liminal.mcp", "--home", str(home), *binding],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})})
        self.ids = iter(range(1, 10_000))

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        rpc_id = next(self.ids)
        message = {"jsonrpc": "2.0", "id": rpc_id, "method": method, **({"params": params} if params else {})}
        self.proc.stdin.write(orjson.dumps(message) + b"\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = orjson.loads(self.proc.stdout.readline())
        assert answer["id"] == rpc_id
        return answer

    def call(self, tool: str, **arguments: Any) -> tuple[list[str], bool]:
        result = self.ask("tools/call", {"name": tool, "arguments": arguments})["result"]
        return [c["text"] for c in result["content"]], result["isError"]

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(30)


@pytest.fixture(params=KINDS)
def home(request: pytest.FixtureRequest, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home whose store (SQLite in it, or a MongoDB database of its own) holds a thread."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.delenv("LIMINAL_STORE_URL", raising=False)
    with ExitStack() as stack:
        if request.param == "mongodb":  # the server processes read it from their environment
            monkeypatch.setenv("LIMINAL_STORE_URL", stack.enter_context(fresh_database_sync()))
        yield from _seeded(home)


def _seeded(home: Path) -> Iterator[Path]:
    line = orjson.dumps({"type": "user", "uuid": RECORD, "parentUuid": None, "sessionId": SESSION,
                         "message": {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "toolu_1", "content": ORIGINAL}]}})

    async def seed() -> None:
        url = os.environ.get("LIMINAL_STORE_URL", "")
        store: Store
        if url:
            from liminal.store.mongo import MongoStore

            store = await MongoStore.open(url)
        else:
            store = await SqliteStore.open(home / "liminal.db")
        try:
            await store.write(Batch(
                session_records=[SessionRecord(SessionRecord.make_id(SESSION, 0), SESSION, THREAD, 0, RECORD,
                                               "user", None, None, ("toolu_1",), ORIGINAL, line)],
                messages=[MessageRecord("m1", THREAD, None, 1.0, "0001", "user",
                                        "the launch code is periwinkle-42"),
                          MessageRecord("m2", "other-thread", None, 2.0, "0002", "user",
                                        "periwinkle is also a colour"),
                          MessageRecord("m3", THREAD, None, 3.0, "0003", "tool_call",
                                        'mcp__liminal__search_history {"query": "periwinkle"}')]))
        finally:
            await store.aclose()

    anyio.run(seed)
    yield home


def isolated(tmp_path: Path) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}


def test_recall_is_byte_exact_from_the_store_and_from_the_file(home: Path, tmp_path: Path) -> None:
    server = Server(home, "--thread", THREAD, env=isolated(tmp_path))
    try:
        assert server.ask("initialize", {"protocolVersion": "2025-06-18"})["result"]["serverInfo"]["name"] == "liminal"
        names = [t["name"] for t in server.ask("tools/list")["result"]["tools"]]
        assert names == ["recall", "search_history", "slash", "memo_save", "memo_find", "scratchpad"]
        texts, failed = server.call("recall", key=f"{SESSION}:{RECORD}:0")
        assert not failed and texts == [ORIGINAL]  # no session file exists: the store answered
        texts, failed = server.call("recall", key=f"{SESSION}:{uuid.uuid4()}:0")
        assert failed and "neither the store nor a session file" in texts[0]
        texts, failed = server.call("recall", key="../../etc/passwd:x:0")
        assert failed and "not a recall key" in texts[0]
    finally:
        assert server.close() == 0
    # Nothing indexed (another home): the CLI's file answers, and the cache keeps it.
    other = tmp_path / "other"
    project = tmp_path / "claude" / "projects" / "-work"
    project.mkdir(parents=True)
    session = str(uuid.uuid4())
    record = str(uuid.uuid4())
    long_text = "x" * 70_000 + "END"
    (project / f"{session}.jsonl").write_bytes(orjson.dumps(
        {"type": "user", "uuid": record, "message": {"content": [{"type": "tool_result", "content": long_text}]}})
        + b"\n")
    server = Server(other, "--thread", THREAD, env=isolated(tmp_path))
    try:
        first, failed = server.call("recall", key=f"{session}:{record}:0")
        assert not failed and len(first) == 2 and "call recall with start=60000" in first[1]
        rest, _ = server.call("recall", key=f"{session}:{record}:0", start=60_000)
        assert first[0] + rest[0] == long_text
        (project / f"{session}.jsonl").unlink()
        again, failed = server.call("recall", key=f"{session}:{record}:0")
        assert not failed and again[0] == first[0]  # from the cache
    finally:
        server.close()


def test_search_memos_and_slash(home: Path, tmp_path: Path) -> None:
    server = Server(home, "--thread", THREAD, env=isolated(tmp_path))
    try:
        texts, failed = server.call("search_history", query="periwinkle")
        assert not failed and "launch code is" in texts[0] and "colour" not in texts[0]
        assert "search_history" not in texts[0], texts  # its own call is not a find
        texts, _ = server.call("search_history", query="periwinkle", all_threads=True)
        assert "colour" in texts[0]
        _, failed = server.call("memo_save", content="deploys need the VPN", tags=["ops", "#deploy"])
        assert not failed
        texts, _ = server.call("slash", command="mark", args="before-refactor")
        assert "when this turn ends" in texts[0]
        texts, failed = server.call("slash", command="mark")
        assert failed and "needs a name" in texts[0]
    finally:
        server.close()
    taken = link.take_slash(home, THREAD)
    assert [(r.command, r.args) for r in taken] == [("mark", "before-refactor")]
    assert link.take_slash(home, THREAD) == []  # each runs once
    # Another thread's server finds the memo.
    other = Server(home, "--thread", "another-thread", env=isolated(tmp_path))
    try:
        texts, _ = other.call("memo_find", tags=["deploy"])
        assert texts == ["- deploys need the VPN  #ops #deploy"]
        texts, _ = other.call("memo_find", text="nothing like it")
        assert texts == ["No memos found."]
    finally:
        other.close()


def test_a_server_started_with_a_nonce_learns_its_thread(home: Path, tmp_path: Path) -> None:
    nonce = link.new_nonce()
    server = Server(home, "--bind", nonce, env=isolated(tmp_path))
    try:
        texts, failed = server.call("search_history", query="periwinkle")
        assert failed and "not bound" in texts[0]
        link.bind(home, nonce, THREAD)
        texts, failed = server.call("search_history", query="periwinkle")
        assert not failed and "launch code" in texts[0]
    finally:
        server.close()
    assert oct((link.folder(home) / f"bind-{nonce}").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("binding", [["--thread", "../x"], ["--bind", "a/b"], ["--thread", ".hidden"]])
def test_bad_bindings_are_refused(tmp_path: Path, binding: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "liminal.mcp", "--home", str(tmp_path), *binding],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2 and "is not accepted" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_no_stdin_ends_the_server(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "liminal.mcp", "--home", str(tmp_path), "--thread", "t"],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0 and done.stdout == b""


def test_an_answer_json_cannot_carry_as_given_is_still_sent(tmp_path: Path) -> None:
    """A lone surrogate (Claude Code cuts a string in the middle of an emoji) comes back as
    U+FFFD; an integer id past 64 bits is answered with that id (it went unanswered, or rounded)."""
    claude = tmp_path / "claude" / "projects" / "-p"
    claude.mkdir(parents=True)
    session, record = str(uuid.uuid4()), str(uuid.uuid4())
    line = orjson.dumps({"type": "user", "uuid": record, "sessionId": session, "message": {
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "emoji cut @ here"}]}})
    (claude / f"{session}.jsonl").write_bytes(line.replace(b"@", b"\\ud83d") + b"\n")
    server = Server(tmp_path / "home", "--thread", session, env=isolated(tmp_path))
    try:
        texts, failed = server.call("recall", key=f"{session}:{record}:0")
        assert not failed and texts == ["emoji cut \ufffd here"]
        assert server.proc.stdin and server.proc.stdout
        server.proc.stdin.write(b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}\n')
        server.proc.stdin.flush()
        assert server.proc.stdout.readline() == b'{"jsonrpc": "2.0", "id": 123456789012345678901234567890, "result": {}}\n'
    finally:
        server.close()


def test_an_oversized_message_is_dropped_and_answered(tmp_path: Path) -> None:
    from liminal.mcp.server import MAX_MESSAGE_BYTES

    server = Server(tmp_path / "home", "--thread", THREAD, env=isolated(tmp_path))
    try:
        assert server.proc.stdin and server.proc.stdout
        server.proc.stdin.write(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"'
                                + b"y" * (2 * MAX_MESSAGE_BYTES + 1000) + b'"}}\n')
        server.proc.stdin.flush()
        refused = orjson.loads(server.proc.stdout.readline())
        assert refused["id"] is None and refused["error"]["code"] == -32600, refused
        assert server.ask("ping")["result"] == {}  # the rest of the line was dropped, not parsed
    finally:
        server.close()


def test_the_folders_it_makes_are_private(tmp_path: Path) -> None:
    """Started with the user's umask (022), as the agent starts it."""
    home = tmp_path / "home"
    old = os.umask(0o022)
    try:
        server = Server(home, "--thread", THREAD, env=isolated(tmp_path))
    finally:
        os.umask(old)
    try:
        texts, failed = server.call("slash", command="mark", args="M")
        assert not failed, texts
    finally:
        server.close()
    for path in (home, home / "mcp", home / "mcp" / "slash"):
        assert path.stat().st_mode & 0o777 == 0o700, path
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in (home / "mcp" / "slash").iterdir())


def test_calls_that_come_together_open_one_store(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first calls run concurrently; each used to open a store (and a cache) of its own."""
    import asyncio

    from liminal.mcp.tools import LiminalTools
    from liminal.store import configured as base

    opened: list[object] = []
    real = base.open_store

    def counting(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(base, "open_store", counting)

    async def together() -> list[list[str]]:
        tools = LiminalTools(home, thread=THREAD)
        try:
            return await asyncio.gather(*(tools.search_history({"query": "periwinkle"}) for _ in range(10)))
        finally:
            await tools.aclose()

    answers = asyncio.run(together())
    assert len(opened) == 1 and all("launch code" in a[0] for a in answers)


def test_a_memo_saved_before_anything_was_indexed_is_kept(tmp_path: Path) -> None:
    """The model's first act in a new install is ``memo_save``: no store exists yet (the index
    worker makes it at its first write), and the memo is kept all the same."""
    fresh = tmp_path / "fresh-home"
    server = Server(fresh, "--thread", THREAD, env=isolated(tmp_path))
    try:
        texts, failed = server.call("memo_save", content="the staging port is 8443", tags=["ops"])
        assert not failed, texts
        texts, _ = server.call("memo_find", tags=["ops"])
        assert texts == ["- the staging port is 8443  #ops"]
    finally:
        assert server.close() == 0
