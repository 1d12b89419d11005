"""Search finds what a person wrote (issue 20): ``liminal search``, ``/search`` and the model's
``search_history`` show the conversation, each thing said once, with a time and a readable
place (the thread's title, the turn); liminal's own commands, liminal's own tools and the CLI's
bookkeeping records (Claude Code's ``api-request-blob``) only when asked for (``--all``).

The store is filled as liminal fills it: frames through the indexer (the directions say what
was liminal's), and Claude Code's session lines through the harness's own line parser.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from liminal import cli
from liminal.harness.claude.sessionfile import parse_line
from liminal.ingest.indexer import Indexer
from liminal.kernel.commands import CommandCenter
from liminal.kernel.commands.table import run_command
from liminal.mcp.tools import LiminalTools
from liminal.store.records import Batch, ThreadUpdate
from liminal.store.sqlite import SqliteStore
from tests.store.conftest import event

THREAD = "6f1c0d2e-8a4b-4c1d-9e2f-3a5b7c9d1e0f"
FACT = "remember: the launch word is zanzibar-77"
T0 = 1_790_000_000.0  # 2026-09-21


def _update(update: dict[str, Any], direction: str = "a2c", at: float = 0) -> tuple[str, dict[str, Any], float]:
    return direction, {"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": THREAD, "update": update}}, at


def _prompt(rpc: int, text: str, direction: str = "c2a") -> tuple[str, dict[str, Any], float]:
    return direction, {"jsonrpc": "2.0", "id": rpc, "method": "session/prompt", "params": {
        "sessionId": THREAD, "prompt": [{"type": "text", "text": text}]}}, 0


def _end(rpc: int, direction: str = "a2c") -> tuple[str, dict[str, Any], float]:
    return direction, {"jsonrpc": "2.0", "id": rpc, "result": {"stopReason": "end_turn"}}, 0


def _usage(used: int) -> tuple[str, dict[str, Any], float]:
    return _update({"sessionUpdate": "usage_update", "used": used, "size": 1_000_000})


def _chunk(text: str, direction: str = "a2c") -> tuple[str, dict[str, Any], float]:
    return _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
                   direction)


def frames() -> list[tuple[str, dict[str, Any], float]]:
    """A thread as claude-agent-acp and liminal wrote it: three turns the model answered (a fact,
    a shell tool, the model's own search_history call), then /search and /rename, which liminal
    answered itself (the client's prompt to liminal, liminal's answer to the client)."""
    search_answer = f"- [you, 2026-09-21 10:00, turn 1] {FACT}"
    return [
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}, 0),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {
            "name": "@agentclientprotocol/claude-agent-acp", "version": "0.100.0"}}}, 0),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                 "params": {"cwd": "/work/demo", "mcpServers": []}}, 0),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": THREAD}}, 0),
        _prompt(2, FACT), _usage(11_753), _chunk("Noted: zanzibar-77."), _usage(11_762), _usage(11_762),
        _end(2),
        _prompt(3, "TOOL please"), _usage(11_780),
        _update({"sessionUpdate": "tool_call", "toolCallId": "toolu_01", "title": "echo zanzibar-tool-output",
                 "kind": "execute", "status": "pending",
                 "rawInput": {"command": "echo zanzibar-tool-output", "description": "Echo"}}),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_01", "status": "completed",
                 "content": [{"type": "content", "content": {
                     "type": "text", "text": "```console\nzanzibar-tool-output\n```"}}],
                 "rawOutput": "zanzibar-tool-output"}),
        _usage(11_817), _chunk("the tool ran"), _usage(11_873), _usage(11_873), _end(3),
        _prompt(4, "SEARCH it"),
        _update({"sessionUpdate": "tool_call", "toolCallId": "toolu_02",
                 "title": "mcp__liminal__search_history", "kind": "other", "status": "pending",
                 "rawInput": {"query": "zanzibar"}}),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_02", "status": "completed",
                 "content": [{"type": "content", "content": {"type": "text", "text": search_answer}}],
                 "rawOutput": [{"type": "text", "text": search_answer}]}),
        _chunk("searched"), _usage(12_141), _end(4),
        _prompt(5, "/search zanzibar", "c2l"), _chunk(f"- turn 1 · you: {FACT}", "l2c"), _end(5, "l2c"),
        _prompt(6, "/rename Flux work", "c2l"), _chunk("Thread renamed: Flux work", "l2c"), _end(6, "l2c"),
    ]


def session_lines() -> list[dict[str, Any]]:
    """Claude Code 2.1.316's file of the same thread: the conversation's lines, and among its
    bookkeeping an ``api-request-blob`` holding a copy of the first prompt (without a time)."""
    def line(kind: str, n: int, content: Any, **extra: Any) -> dict[str, Any]:
        return {"type": kind, "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None,
                "sessionId": THREAD, "timestamp": f"2026-09-21T10:00:{n:02d}.000Z",
                "message": {"role": kind, "content": content}, **extra}

    return [
        line("user", 0, [{"type": "text", "text": FACT}]),
        {"type": "api-request-blob", "sessionId": THREAD, "hash": "04605068", "message": {
            "role": "user", "content": [{"type": "text", "text": f"<system-reminder>\nAttribution\n"
                                                                 f"</system-reminder>\n\n{FACT}"}]}},
        line("assistant", 1, [{"type": "text", "text": "Noted: zanzibar-77."}]),
        {"type": "last-prompt", "lastPrompt": FACT, "leafUuid": "u1", "sessionId": THREAD},
        line("user", 2, [{"type": "text", "text": "TOOL please"}]),
        line("assistant", 3, [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                               "input": {"command": "echo zanzibar-tool-output"}}]),
        line("user", 4, [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "zanzibar-tool-output"}],
             toolUseResult={"stdout": "zanzibar-tool-output", "stderr": ""}),
        line("user", 5, [{"type": "text", "text": "Caveat: zanzibar is a word the CLI wrote"}], isMeta=True),
        line("assistant", 6, [{"type": "tool_use", "id": "toolu_02", "name": "mcp__liminal__search_history",
                               "input": {"query": "zanzibar"}}]),
        line("user", 7, [{"type": "tool_result", "tool_use_id": "toolu_02",
                          "content": [{"type": "text", "text": f"- [you, turn 1] {FACT}"}]}]),
    ]


async def fill(db: Path) -> None:
    store = await SqliteStore.open(db)
    indexer = Indexer(store, db.parent / "spool")
    for n, (direction, message, _) in enumerate(frames()):
        indexer.offer(event(direction, message, time=T0 + n))
    await indexer.aclose()
    offset = 0
    records = []
    for obj in session_lines():
        raw = orjson.dumps(obj)
        records.append(parse_line(raw, THREAD, THREAD, offset))
        offset += len(raw) + 1
    await store.write(Batch(session_records=records, threads=[
        ThreadUpdate(THREAD, T0 + 100, title="Flux work", named=True)]))
    await store.aclose()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)
    anyio.run(fill, tmp_path / "liminal.db")
    return tmp_path


BOOKKEEPING = ("api-request-blob", "system-reminder", "/search", "Thread renamed", "search_history",
               "Caveat", "@0000")


def test_liminal_search_shows_what_was_said_once_with_a_time_and_a_place(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["search", "zanzibar"]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if not line.startswith(" ")]
    # The prompt (kept by the client and by the CLI's record), the model's answer, the shell
    # tool (its call and its output, each in the client's copy and the CLI's): once each.
    assert len(heads) == 3, out
    assert out.count(FACT) == 1, out
    for head in heads:
        assert re.match(r"2026-09-2\d \d\d:\d\d · Flux work · turn \d · ", head), head
    assert any(h.endswith("turn 1 · you") for h in heads) and any(h.endswith("turn 1 · model") for h in heads)
    assert any(h.endswith("turn 2 · tool (echo zanzibar-tool-output)") for h in heads), heads
    for word in (*BOOKKEEPING, THREAD):
        assert word not in out, (word, out)
    assert all(len(line) <= 100 for line in out.splitlines())

    # The rest, when asked for: liminal's own commands and tools, the CLI's bookkeeping.
    assert cli.main(["search", "zanzibar", "--all"]) == 0
    everything = capsys.readouterr().out
    for word in ("api-request-blob", "/search zanzibar", "you, to liminal", "search_history", "Caveat"):
        assert word in everything, (word, everything)

    assert cli.main(["search", "zanzibar", "--json"]) == 0
    found = orjson.loads(capsys.readouterr().out)
    assert [(f["thread_title"], f["turn"], f["who"]) for f in found if FACT in f["snippet"]] == [
        ("Flux work", 1, "you")]
    assert all(f["time"] for f in found)


def test_a_summary_by_the_model_is_placed_in_its_thread_and_a_memo_among_the_memos(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both are kept under pseudo-threads of the store (``liminal-summaries``, ``liminal-memos``):
    ``search --all`` showed each as a thread called "liminal-", "before liminal" (found making
    the model's summaries the default, issue 24). A summary is the older turns of the thread it
    names; a memo belongs to no thread."""
    from liminal.lookup.memos import MEMO_THREAD
    from liminal.store.records import SUMMARY_THREAD, MessageRecord

    async def add() -> None:
        store = await SqliteStore.open(home / "liminal.db")
        try:
            await store.write(Batch(messages=[
                MessageRecord("summary-1", SUMMARY_THREAD, None, T0 + 50, f"{T0 + 50:017.6f}", "summary",
                              "## SUMMARY\nThe launch word zanzibar-77 was noted.", data={"thread": THREAD}),
                MessageRecord("memo-1", MEMO_THREAD, None, T0 + 60, f"{T0 + 60:017.6f}", "memo",
                              "zanzibar-77 is the launch word", data={"tags": [], "thread": THREAD})]))
        finally:
            await store.aclose()

    anyio.run(add)
    assert cli.main(["search", "zanzibar", "--all"]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert any(h.endswith("· Flux work · older turns · model's summary") for h in heads), heads
    assert not [h for h in heads if "liminal- ·" in h], heads
    # The memo once: among the memos the command lists first (``--all`` listed it a second
    # time, found among liminal's own messages); placed among the memos where it is a find.
    assert [h for h in heads if "memo" in h] == [f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(T0 + 60))} · memo"]
    assert cli.main(["search", "zanzibar", "--all", "--json"]) == 0
    memos = [f for f in orjson.loads(capsys.readouterr().out) if f["who"] == "memo"]
    assert [(f["thread_id"], f["id"]) for f in memos] == [(MEMO_THREAD, "memo-1")]


def test_the_models_search_and_slash_search_show_the_conversation(home: Path) -> None:
    async def both() -> tuple[str, str]:
        tools = LiminalTools(home, thread=THREAD)
        try:
            [tool] = await tools.search_history({"query": "zanzibar"})
        finally:
            await tools.aclose()

        @contextlib.asynccontextmanager
        async def open_store() -> AsyncIterator[Any]:
            async with contextlib.AsyncExitStack() as stack:
                yield await stack.enter_async_context(_opened(home / "liminal.db"))

        center = CommandCenter(None, None, None, None, None, open_store)  # type: ignore[arg-type]
        try:
            slash = await run_command(center.context, THREAD, "search", "zanzibar")
            assert "api-request-blob" in await run_command(center.context, THREAD, "search", "--all zanzibar")
        finally:
            await center.aclose()
        return tool, slash

    tool, slash = anyio.run(both)
    for text in (tool, slash):
        lines = text.splitlines()
        assert len(lines) == 3 and text.count(FACT) == 1, text
        assert all(re.search(r"turn \d", line) and re.search(r"2026-09-2\d \d\d:\d\d", line) for line in lines), text
        for word in (*BOOKKEEPING, THREAD):
            assert word not in text, (word, text)
    assert "[you, 2026-09-2" in tool and "turn 1] " + FACT in tool


@contextlib.asynccontextmanager
async def _opened(db: Path) -> AsyncIterator[SqliteStore]:
    store = await SqliteStore.open(db, create=False)
    try:
        yield store
    finally:
        await store.aclose()


def test_a_hit_past_liminals_own_is_still_found(tmp_path: Path) -> None:
    """Liminal's own part of a thread taking the first places does not push what was said out
    of a short list: the search asks again for more."""
    from liminal.lookup.search import find

    async def run() -> list[str]:
        db = tmp_path / "liminal.db"
        store = await SqliteStore.open(db)
        indexer = Indexer(store, tmp_path / "spool")
        rows = [_prompt(2, "needle from the person")]
        for n in range(30):
            rows += [_prompt(10 + n, f"/search needle needle needle {n}", "c2l"),
                     _chunk(f"needle needle needle {n}", "l2c"), _end(10 + n, "l2c")]
        for n, (direction, message, _) in enumerate(rows):
            indexer.offer(event(direction, message, time=T0 + n))
        await indexer.aclose()
        try:
            return [f.hit.snippet for f in await find(store, "needle", limit=1)]
        finally:
            await store.aclose()

    assert anyio.run(run) == ["needle from the person"]
