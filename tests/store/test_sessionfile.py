"""Claude Code session files indexed as they grow."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import structlog.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.harness.claude.paths import encode_cwd, find
from liminal.harness.claude.sessionfile import model_calls, parse_line
from liminal.ingest.indexer import Indexer
from liminal.ingest.sessions import SessionFiles
from liminal.ingest.tail import SessionFileIndexer, read_complete_lines
from liminal.kernel.journal import SwapJournal
from liminal.store.base import StoreError
from liminal.store.sqlite import SqliteStore
from tests.store.conftest import conversation

pytestmark = pytest.mark.anyio
SID = "sess-1"

RECORDS: list[dict[str, Any]] = [
    {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": SID,
     "timestamp": "2026-11-22T04:00:00.000Z",
     "message": {"role": "user", "content": "Refactor the flux capacitor module"}},
    {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": SID,
     "message": {"id": "msg_1", "role": "assistant", "content": [
         {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"path": "flux.py"}}],
         "usage": {"input_tokens": 10, "cache_read_input_tokens": 12000, "output_tokens": 5}}},
    {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": SID,
     "message": {"role": "user", "content": [
         {"type": "tool_result", "tool_use_id": "toolu_01", "content": "def gigawatts(): ..."}]},
     "toolUseResult": {"file": {"filePath": "flux.py",
                                "content": "def gigawatts():\n    return 1.21  # full output"}}},
]


async def eventually(predicate: Callable[[], bool]) -> None:
    while True:
        if predicate():
            return
        await anyio.sleep(0.05)


def line(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record) + b"\n"


def test_parse_line_keeps_usage_tool_ids_and_full_outputs() -> None:
    r = parse_line(line(RECORDS[1])[:-1], SID, "t", 0)
    assert (r.uuid, r.type, r.tool_ids) == ("a1", "assistant", ("toolu_01",))
    assert r.usage == {"input_tokens": 10, "cache_read_input_tokens": 12000, "output_tokens": 5}
    r = parse_line(line(RECORDS[2])[:-1], SID, "t", 100)
    assert r.tool_ids == ("toolu_01",) and "return 1.21  # full output" in r.text
    junk = parse_line(b"{torn", SID, None, 7)
    assert (junk.type, junk.raw, junk.id) == (None, b"{torn", f"{SID}@000000000007")


def test_parse_line_reads_a_line_orjson_refuses() -> None:
    """JavaScript writes half an emoji as a lone ``\\ud83d`` escape; orjson refuses the line.
    Kept with no fields, the record had no uuid (recall through the store missed it) and no
    text (search never found it)."""
    raw = b'{"type":"user","uuid":"u9","message":{"role":"user","content":"half \\ud83d an emoji"}}'
    r = parse_line(raw, SID, "t", 0)
    assert (r.uuid, r.type, r.raw) == ("u9", "user", raw) and "an emoji" in r.text


def test_model_calls_are_one_per_response_with_its_usage() -> None:
    """``bench/cost.py --store`` prices a recorded thread from these."""
    usage = {"input_tokens": 10, "cache_read_input_tokens": 12000, "cache_creation_input_tokens": 300,
             "output_tokens": 5}
    lines = []
    for n, stamp in enumerate(["2026-11-22T04:00:01.000Z", "2026-11-22T04:00:01.500Z",
                               "2026-11-22T04:00:09.000Z", "not a time"]):
        record = dict(RECORDS[1], uuid=f"a{n}", timestamp=stamp)
        # Two lines (two content blocks) of one response, then a second response.
        record["message"] = dict(record["message"], usage=usage if n < 2 else dict(usage, output_tokens=7))
        lines.append(parse_line(line(record)[:-1], SID, "t", n * 100))
    lines.append(parse_line(line(RECORDS[2])[:-1], SID, "t", 999))
    calls = model_calls(lines)
    assert [(c.input, c.cache_read, c.cache_write, c.uncached, c.output) for c in calls] == [
        (12310, 12000, 300, 10, 5), (12310, 12000, 300, 10, 7)]
    assert calls[1].t - calls[0].t == 8.0
    assert calls[0].cache_write_1h == 0  # no split: the 5-minute cache (or not said)
    hour = dict(RECORDS[1], uuid="h", timestamp="2026-11-22T04:01:00.000Z")
    hour["message"] = dict(hour["message"], usage=dict(usage, cache_creation={
        "ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 300}))
    [call] = model_calls([parse_line(line(hour)[:-1], SID, "t", 0)])
    assert (call.cache_write, call.cache_write_1h) == (300, 300)  # billed at the hour's 2x


def test_only_complete_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}\n{"c":')
    lines, end = read_complete_lines(path, 0)
    assert lines == [(0, b'{"a":1}'), (8, b'{"b":2}')] and end == 16
    assert read_complete_lines(path, end) == ([], 16)


def test_a_session_file_not_there_yet_is_none() -> None:
    """The indexer waits for the file (the CLI writes it at the first prompt): ``find`` is
    ``locate`` without the exception."""
    env = {"CLAUDE_CONFIG_DIR": "/nonexistent"}
    assert find("00000000-0000-4000-8000-000000000000", "/work", env) is None


async def test_the_file_is_indexed_as_it_grows(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "liminal.db")
    path = tmp_path / f"{SID}.jsonl"
    path.write_bytes(line(RECORDS[0]) + line(RECORDS[1])[:20])  # the second line half written
    watcher = SessionFileIndexer(store, path, SID, "t", quarantine=tmp_path / "quarantine")
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run, stop)
        with anyio.fail_after(10):
            await eventually(lambda: watcher.indexed >= 1)
            with path.open("ab") as f:
                f.write(line(RECORDS[1])[20:] + line(RECORDS[2]))
            await eventually(lambda: watcher.indexed >= 3)
        stop.set()
    records = await store.session_records(SID)
    assert [r.uuid for r in records] == ["u1", "a1", "u2"]
    assert b"".join(r.raw + b"\n" for r in records) == path.read_bytes()
    # A restart resumes where the store says indexing stopped; nothing is read twice.
    again = SessionFileIndexer(store, path, SID, "t", quarantine=tmp_path / "quarantine")
    assert await again.catch_up() == 0
    hits = await store.search("full output")
    assert [h.id for h in hits] == [records[2].id]
    await store.aclose()


async def test_a_file_written_again_under_another_name_is_followed(tmp_path: Path) -> None:
    """A CLI's file written again under another name before a load (Gemini's
    ``prepare_load``: its bytes a prefix, a line added): the watcher goes on in the new file
    from where it was, and the turns written there are indexed, nothing twice."""
    store = await SqliteStore.open(tmp_path / "liminal.db")
    path = tmp_path / f"{SID}.jsonl"
    path.write_bytes(line(RECORDS[0]))
    moved = tmp_path / f"{SID}-again.jsonl"
    watcher = SessionFileIndexer(store, path, SID, "t", quarantine=tmp_path / "quarantine",
                                 relocate=lambda: moved if moved.exists() else None)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run, stop)
        with anyio.fail_after(10):
            await eventually(lambda: watcher.indexed >= 1)
            moved.write_bytes(line(RECORDS[0]) + line(RECORDS[1]))
            path.unlink()
            await eventually(lambda: watcher.indexed >= 2)
            with moved.open("ab") as f:
                f.write(line(RECORDS[2]))
            await eventually(lambda: watcher.indexed >= 3)
        stop.set()
    records = await store.session_records(SID)
    assert [r.uuid for r in records] == ["u1", "a1", "u2"] and watcher.path == moved
    await store.aclose()


async def test_what_liminal_wrote_is_kept_as_liminals(tmp_path: Path) -> None:
    """A swap's rewrite is a compressed copy of records indexed from the older file: kept
    under the new session, for the recall keys that will name it, marked as liminal's and
    without text (search finds the older file's line); what the CLI appends after it is the
    CLI's."""
    store = await SqliteStore.open(tmp_path / "liminal.db")
    path = tmp_path / f"{SID}.jsonl"
    rewrite = line(RECORDS[0]) + line(RECORDS[1])
    path.write_bytes(rewrite + line(RECORDS[2]))
    watcher = SessionFileIndexer(store, path, SID, "t", quarantine=tmp_path / "quarantine",
                                 own_bytes=len(rewrite))
    assert await watcher.catch_up() == 3
    records = await store.session_records(SID)
    assert [(r.uuid, r.own, bool(r.text)) for r in records] == [
        ("u1", True, False), ("a1", True, False), ("u2", False, True)]
    assert b"".join(r.raw + b"\n" for r in records) == path.read_bytes()
    assert await store.search("capacitor") == []  # found in the older file, indexed before
    assert [h.id for h in await store.search("gigawatts")] == [records[2].id]
    # Read again from where the store says indexing stopped: nothing is indexed twice.
    again = SessionFileIndexer(store, path, SID, "t", quarantine=tmp_path / "quarantine",
                               own_bytes=len(rewrite))
    assert await again.catch_up() == 0
    await store.aclose()


def test_the_journal_knows_how_much_liminal_wrote(tmp_path: Path) -> None:
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    journal.note_rewrite("n1", 10)
    journal.note_rewrite("n2", 4096)
    assert [journal.own_bytes(b) for b in ("n1", "n2", "old")] == [10, 4096, 0]


async def test_the_indexer_watches_the_threads_session_file(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "liminal.db")
    folder = tmp_path / "claude" / "projects" / encode_cwd("/work/demo")
    folder.mkdir(parents=True)
    path = folder / f"{SID}.jsonl"

    looked: list[str] = []  # calls of ``locate`` (it may run in a worker thread)

    def locate(backing_id: str, cwd: str) -> Path | None:  # SID is not a UUID: a stand-in
        looked.append(backing_id)
        found = folder / f"{backing_id}.jsonl"
        return found if encode_cwd(cwd) == folder.name and found.is_file() else None

    indexer = Indexer(store, tmp_path / "spool", session_files=SessionFiles(locate))
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for e in conversation():
            indexer.offer(e)
        with anyio.fail_after(10):  # the indexer looked for the file, and found none
            while SID not in looked:  # noqa: ASYNC110 - a stand-in's calls, from any thread
                await anyio.sleep(0.01)
        path.write_bytes(b"".join(line(r) for r in RECORDS))  # appears after session/new
        with anyio.fail_after(10):
            while True:
                if len(await store.session_records(SID)) >= 3:
                    break
                await anyio.sleep(0.1)
        await indexer.aclose()
    records = await store.session_records(SID)
    assert records[1].usage is not None and records[1].usage["cache_read_input_tokens"] == 12000
    assert {r.thread_id for r in records} == {SID}
    await store.aclose()


@settings(max_examples=150)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
       st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), st.integers(0, 64))
def test_only_complete_lines_are_read_from_where_indexing_stopped(
        tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes,
        start_line: int) -> None:
    """A line without its newline is still being written: it is never read, and the offset
    returned is where the next read must start."""
    path = tmp_path_factory.mktemp("session") / "s.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + tail)
    first = min(start_line, len(lines))
    offset = sum(len(line) + 1 for line in lines[:first])
    got, end = read_complete_lines(path, offset, max_bytes=1 << 20)
    expected, at = [], offset
    for line in lines[first:]:
        expected.append((at, line))
        at += len(line) + 1
    assert got == expected and end == at


async def test_a_store_failure_at_the_first_catch_up_does_not_stop_the_watcher(
        tmp_path: Path) -> None:
    class Down:
        async def session_file_end(self, backing_id: str) -> int:
            raise StoreError("store is down (test)")

    path = tmp_path / f"{SID}.jsonl"
    path.write_bytes(line(RECORDS[0]))
    watcher = SessionFileIndexer(Down(), path, SID, "t",  # type: ignore[arg-type]
                                 quarantine=tmp_path / "quarantine")
    stop = anyio.Event()
    stop.set()
    with anyio.fail_after(10):
        await watcher.run(stop)  # returns at the stop, having logged the failure
    assert watcher.indexed == 0


@pytest.mark.parametrize("failure", ["find raises", "folder gone"])
async def test_a_session_file_watcher_that_fails_does_not_stop_the_indexing_of_frames(
        tmp_path: Path, failure: str) -> None:
    """Looking for a session file (a folder it may not read) or watching it (its folder removed,
    the system's inotify instances used up) can fail; the frames and the other threads' files
    are indexed regardless."""
    store = await SqliteStore.open(tmp_path / "liminal.db")
    gone = tmp_path / "gone" / f"{SID}.jsonl"

    def locate(backing_id: str, cwd: str) -> Path | None:
        if failure == "find raises":
            raise PermissionError(13, "Permission denied", str(tmp_path / "projects"))
        return gone  # found, then its folder went before the watch began

    indexer = Indexer(store, tmp_path / "spool", session_files=SessionFiles(locate))
    events = conversation()
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(indexer.run)
            for e in events[:4]:  # up to session/new's answer: the watch starts here
                indexer.offer(e)
            with anyio.fail_after(10):  # and has failed
                while not [r for r in logs if r["event"].startswith("session file watch failed")]:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            for e in events[4:]:
                indexer.offer(e)
            with anyio.fail_after(10):
                await indexer.aclose()
    assert await store.frame_count() == len(events)
    assert "turn_end" in [m.kind for m in await store.messages(SID)]
    await store.aclose()


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("where", ["claude tool input", "claude usage", "codex usage"])
async def test_a_line_the_store_cannot_take_as_parsed_does_not_stop_the_files_indexing(
        tmp_path: Path, where: str) -> None:
    """JSON nested deeper than orjson writes (254 levels) reads fine but cannot be written
    again: the line is kept (raw), and the lines after it are indexed."""
    from liminal.harness.codex.records import parse_line as codex_line

    odd: dict[str, Any]
    if where == "claude tool input":
        odd = {"type": "assistant", "uuid": "a9", "sessionId": SID, "message": {
            "role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_9", "name": "Edit", "input": _deep(300)}]}}
    elif where == "claude usage":
        odd = {"type": "assistant", "uuid": "a9", "sessionId": SID, "message": {
            "role": "assistant", "content": "deep usage", "usage": {"input_tokens": _deep(300)}}}
    else:
        odd = {"timestamp": "2026-11-22T04:00:00.000Z", "type": "event_msg", "payload": {
            "type": "token_count", "info": {"last_token_usage": {"total_tokens": _deep(300)}}}}
    path = tmp_path / f"{SID}.jsonl"
    deep_line = json.dumps(odd).encode() + b"\n"  # orjson cannot write it either
    path.write_bytes(line(RECORDS[0]) + deep_line + line(RECORDS[2]))
    store = await SqliteStore.open(tmp_path / "liminal.db")
    watcher = SessionFileIndexer(store, path, SID, "t", quarantine=tmp_path / "quarantine")
    if where.startswith("codex"):  # a rollout under a Claude-like name: its parser said
        watcher.parse = codex_line
    with contextlib.suppress(Exception):  # as the watcher's loop does: logged, tried again
        await watcher.catch_up()
    with contextlib.suppress(Exception):  # ... at the file's next change
        await watcher.catch_up()
    records = await store.session_records(SID)
    assert len(records) == 3
    assert b"".join(r.raw + b"\n" for r in records) == path.read_bytes()
    await store.aclose()
