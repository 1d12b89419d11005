"""Every place that numbers a thread's turns numbers the conversation's, as ``liminal threads``
counts them: ``liminal history``, the three searches (``liminal search``, ``/search``, the
model's ``search_history``) and the dashboard (its list, its "N turns", its transcript, its
search). liminal's own commands (a prompt from the client to liminal, answered by liminal) never
reached the model: shown between the turns, with no number. A thread of 3 turns with 3 commands
between them said "turn 5" for its third turn everywhere but ``liminal threads``.

The store is filled as liminal fills it: frames through the indexer (the directions say what was
liminal's), and a line of Claude Code's session file through the harness's own parser.
"""

from __future__ import annotations

import contextlib
import datetime
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from liminal import cli
from liminal.config import load
from liminal.dashboard.reader import Reader
from liminal.harness.claude.sessionfile import parse_line
from liminal.ingest.indexer import Indexer
from liminal.kernel.commands import CommandCenter
from liminal.kernel.commands.table import run_command
from liminal.mcp.tools import LiminalTools
from liminal.store.base import Store
from liminal.store.configured import open_store
from liminal.store.records import Batch, ThreadUpdate
from tests.store.conftest import event
from tests.store.test_search_conversation import THREAD, _chunk, _end, _prompt, _usage
from tests.support.mongo import KINDS, fresh_database

T0 = 1_790_000_000.0
SECOND = "the second turn names bravo-22"


def frames() -> list[tuple[str, dict[str, Any]]]:
    """Turn 1, /mark A and /context, turn 2 (the word bravo-22), /search bravo, turn 3."""
    def command(rpc: int, text: str, answer: str) -> list[tuple[str, dict[str, Any]]]:
        return [_prompt(rpc, text, "c2l")[:2], _chunk(answer, "l2c")[:2], _end(rpc, "l2c")[:2]]

    def turn(rpc: int, text: str, answer: str, used: int) -> list[tuple[str, dict[str, Any]]]:
        return [_prompt(rpc, text)[:2], _usage(used)[:2], _chunk(answer)[:2], _end(rpc)[:2]]

    return [
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {
            "name": "@agentclientprotocol/claude-agent-acp", "version": "0.100.0"}}}),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                 "params": {"cwd": "/work/demo", "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": THREAD}}),
        *turn(2, "the first turn", "first answer", 11_000),
        *command(3, "/mark A", "Mark A set."),
        *command(4, "/context", "The model sees 11.0k tokens."),
        *turn(5, SECOND, "second answer", 12_000),
        *command(6, "/search bravo", f"- turn 2 · you: {SECOND}"),
        *turn(7, "the third turn", "third answer", 13_000),
    ]


async def fill(store: Store, spool: Path) -> None:
    indexer = Indexer(store, spool)
    listed = frames()
    for n, (direction, message) in enumerate(listed):
        indexer.offer(event(direction, message, time=T0 + n))
    await indexer.aclose()
    # The CLI's own record of the third turn's tool output, written during that turn (found
    # only there: placed in its turn by its time).
    at = datetime.datetime.fromtimestamp(T0 + len(listed) - 2, datetime.UTC)
    line = orjson.dumps({
        "type": "user", "uuid": "u9", "parentUuid": "u8", "sessionId": THREAD,
        "timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "charlie-record-33"}]}})
    await store.write(Batch(session_records=[parse_line(line, THREAD, THREAD, 0)], threads=[
        ThreadUpdate(THREAD, T0 + 100, title="Numbered", named=True)]))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)

    async def filled() -> None:
        async with open_store(load(), create=True) as store:
            await fill(store, tmp_path / "spool-fill")

    anyio.run(filled)
    return tmp_path


def out_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(list(argv)) == 0, argv
    return capsys.readouterr().out


def test_history_numbers_the_turns_threads_counts(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [listed] = orjson.loads(out_of(capsys, "threads", "--json"))
    assert listed["turns"] == 3
    out = out_of(capsys, "history", THREAD)
    assert re.findall(r"── turn (\d+)", out) == ["1", "2", "3"], out  # 1, 4, 7 before
    # The commands stay, between the turns, as liminal's.
    assert out.index("first answer") < out.index("[you, to liminal] /mark A") \
        < out.index("[liminal] Mark A set.") < out.index("[you, to liminal] /context") < out.index("── turn 2")
    assert "> /mark A" not in out
    said = orjson.loads(out_of(capsys, "history", THREAD, "--json"))["messages"]
    assert [(m["text"], m["turn"], m["to_liminal"]) for m in said if m["kind"] == "user"] == [
        ("the first turn", 1, False), ("/mark A", None, True), ("/context", None, True),
        (SECOND, 2, False), ("/search bravo", None, True), ("the third turn", 3, False)]


def test_search_cites_the_turn_history_shows(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = orjson.loads(out_of(capsys, "search", "bravo-22", "--json"))
    assert [(f["turn"], f["who"]) for f in found] == [(2, "you")]  # turn 4 before
    # The CLI's record of a tool's output, placed by its time: in turn 3 (6 before).
    found = orjson.loads(out_of(capsys, "search", "charlie-record-33", "--json"))
    assert [f["turn"] for f in found] == [3]
    out = out_of(capsys, "search", "bravo-22")
    assert "Numbered · turn 2 · you" in out, out


def test_slash_search_and_the_models_search_cite_the_same_turn(home: Path) -> None:
    async def both() -> tuple[str, str]:
        tools = LiminalTools(home, thread=THREAD)
        try:
            [tool] = await tools.search_history({"query": "bravo-22"})
        finally:
            await tools.aclose()

        @contextlib.asynccontextmanager
        async def opened() -> AsyncIterator[Any]:
            async with open_store(load(), create=False) as store:
                yield store

        center = CommandCenter(None, None, None, None, None, opened)  # type: ignore[arg-type]
        try:
            slash = await run_command(center.context, THREAD, "search", "bravo-22")
        finally:
            await center.aclose()
        return tool, slash

    tool, slash = anyio.run(both)
    assert "turn 2] " + SECOND in tool, tool
    assert "turn 2" in slash and "turn 4" not in slash, slash


@pytest.mark.anyio
@pytest.mark.parametrize("store_kind", KINDS)
async def test_the_dashboard_says_the_same(store_kind: str, tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        url = (await stack.enter_async_context(fresh_database())) if store_kind == "mongodb" \
            else f"sqlite://{tmp_path / 'liminal.db'}"
        settings = load({"home": tmp_path, "store.url": url}, env={})
        async with open_store(settings) as store:
            await fill(store, tmp_path / "spool-fill")
            assert len(await store.liminal_turns(THREAD)) == 3
        reader = Reader(settings)
        stack.push_async_callback(reader.aclose)
        [row] = await reader.threads(archived=False)
        view = await reader.thread(THREAD)
        assert row["turns"] == view["turn_count"] == 3  # "6 turns" on the thread's page before
        turns = view["transcript"]["turns"]
        assert [t["n"] for t in turns] == [1, 2, 3]
        # A command is in the turn before it, as liminal's, as a move is.
        first = turns[0]["messages"]
        assert [(m["kind"], m.get("text"), bool(m.get("to_liminal"))) for m in first if m["kind"] in ("user", "agent")] == [
            ("user", "the first turn", False), ("agent", "first answer", False),
            ("user", "/mark A", True), ("agent", "Mark A set.", True),
            ("user", "/context", True), ("agent", "The model sees 11.0k tokens.", True)]
        assert [p["turn"] for p in view["points"]] == [1, 2, 3]
        found = await reader.search("bravo-22")
        assert [h["turn"] for h in found["hits"]] == [2]
