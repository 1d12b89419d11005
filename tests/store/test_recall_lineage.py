"""Recall keys resolve from the store alone, whatever session of a thread's lineage they name
(issue 20).

A thread's sessions are made as liminal makes them, with the real harnesses: the CLI's original,
a swap's rewrite of it, the CLI's turns appended, a second rewrite, a cut (what ``/undo`` and
``/clear MARK`` write), and a rewrite of the cut. Each file is indexed as the index worker indexes
it (``SessionWatch``, told how much liminal wrote by ``rewrites.jsonl``). Then every file is
deleted and a recaller with no files of its own (another sidecar sharing the store) must give
back, byte for byte, what every key in the last session named while the files were there.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from liminal.config import GradientSettings
from liminal.gradient.recall import KEY_IN_MARKER, RecallError, RecallKey
from liminal.harness.base import Rewritten, SessionHarness
from liminal.harness.claude.live import ClaudeSessions
from liminal.harness.codex.live import CodexSessions
from liminal.harness.known import line_parser
from liminal.ingest import rewrites
from liminal.ingest.sessions import SessionWatch
from liminal.lookup.recaller import Recaller
from liminal.lookup.sessionlines import Incomplete, stored_lines
from liminal.store.base import Store, StoreError
from liminal.store.cache import LocalCache
from liminal.store.records import Batch
from tests.support.codex_rollouts import Call, RolloutBuilder, TurnSpec
from tests.transcript import CWD, SID, Transcript

pytestmark = pytest.mark.anyio
SETTINGS = GradientSettings(target_tokens=12_000, recent_tokens=2_000, middle_tokens=4_000,
                            summary_tokens=1_000)
LONG = "y" * 400  # a tool input too long to keep whole: its cut key has a path


class Lineage:
    """One thread's sessions, written as liminal and the CLI write them."""

    def __init__(self, harness: SessionHarness, home: Path) -> None:
        self.harness = harness
        self.notes = home / "rewrites.jsonl"
        self.paths: dict[str, Path] = {}
        self.order: list[str] = []
        self.rewritten: list[str] = []  # the sessions a rewrite was made of: what keys name
        self.cli: ClaudeCli | CodexCli | None = None  # what appends the CLI's turns

    def original(self, session_id: str, path: Path) -> None:
        self.paths[session_id] = path
        self.order.append(session_id)

    def moved(self, rewritten: Rewritten) -> str:
        """The thread is on ``rewritten`` now: noted as the mover notes it."""
        rewrites.note(self.notes, rewritten.new_id, rewritten.size)
        self.paths[rewritten.new_id] = rewritten.path
        self.order.append(rewritten.new_id)
        return rewritten.new_id

    def rewrite(self) -> str:
        new_id = str(uuid.uuid4())
        self.rewritten.append(self.order[-1])
        return self.moved(self.harness.rewrite(self.current, SETTINGS.target_tokens, new_id))

    def undo(self) -> str:
        """``/undo``: a cut of the current session up to its last turn."""
        current = self.paths[self.order[-1]]
        starts = self.harness.turns(current).starts
        new_id = str(uuid.uuid4())
        return self.moved(self.harness.cut([(current, 0, starts[-1])], current, new_id,
                                           keeps_thread=True))

    @property
    def current(self) -> Path:
        return self.paths[self.order[-1]]

    async def index(self, store: Store, thread: str) -> None:
        """What the index worker does for each backing session it sees."""
        watch = SessionWatch(store, lambda backing, cwd: self.paths.get(backing),
                             lambda backing: rewrites.own_bytes(self.notes, backing),
                             quarantine=self.notes.parent / "quarantine")
        for backing in self.order:
            watch.watch(thread, backing, CWD)
        # Every line indexed, however slow the store (the worker's own stop bounds this at 5 s a
        # file; a FerretDB under load took longer, and the test read half a lineage).
        await watch.close(seconds_per_file=300)


class ClaudeCli:
    """Claude Code's side: turns appended to whichever session the thread is on."""

    def __init__(self) -> None:
        self._ids = itertools.count(10_000)
        self.turn = 0

    def append(self, path: Path, session_id: str, turns: int) -> None:
        lines = path.read_bytes().splitlines()
        last = next(json.loads(raw)["uuid"] for raw in reversed(lines) if b'"uuid"' in raw)
        t = Transcript(session_id)
        t._ids = self._ids  # uuids unique across the thread's sessions, as the CLI's are
        t.parent = last
        for _ in range(turns):
            self.turn += 1
            if self.turn % 3 == 0:
                t.prompt(f"request {self.turn}: run the long one")
                t.tools([("Bash", {"command": f"echo {LONG}{self.turn}", "description": "Echo"},
                          f"{LONG}{self.turn}\n")])
                t.say("done")
            else:
                t.turn(self.turn, size=3000)
        with path.open("ab") as f:
            f.write(b"".join(t.lines()))


def claude_thread(tmp_path: Path) -> tuple[Lineage, dict[str, str]]:
    config = tmp_path / "claude"
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    lineage = Lineage(ClaudeSessions(SETTINGS, env), tmp_path / "home")
    cli = ClaudeCli()
    original = Transcript(SID)
    original._ids = cli._ids
    original.turn(0, size=3000)
    lineage.original(SID, original.write(config))
    cli.append(lineage.current, SID, 30)
    for step in ("rewrite", "rewrite", "undo", "rewrite"):
        getattr(lineage, step)()
        cli.append(lineage.current, lineage.order[-1], 6)
    lineage.rewrite()
    lineage.cli = cli
    return lineage, env


class CodexCli:
    """Codex's side: turns appended to whichever rollout the thread is on."""

    def __init__(self) -> None:
        self.turn = 0
        self.calls = 0

    def append(self, path: Path, session_id: str, turns: int) -> None:
        builder = RolloutBuilder("0.137", session_id, cwd=CWD)
        builder._calls = self.calls
        del builder.lines[:]  # the turns only: the rollout has its session_meta
        for _ in range(turns):
            self.turn += 1
            n = self.turn
            command = f"echo {LONG}{n}" if n % 3 == 0 else f"seq {n} {n + 300}"
            output = "\n".join(str(k) for k in range(n, n + 300))
            builder.turn(TurnSpec(f"question {n}: what about item {n}?", [Call(command, output)],
                                  f"answer {n}."))
        self.calls = builder._calls
        with path.open("ab") as f:
            f.write(builder.bytes())


def codex_thread(tmp_path: Path) -> tuple[Lineage, dict[str, str]]:
    home = tmp_path / "codex"
    env = {"CODEX_HOME": str(home)}
    lineage = Lineage(CodexSessions(SETTINGS, env), tmp_path / "home")
    cli = CodexCli()
    builder = RolloutBuilder("0.137", cwd=CWD)
    lineage.original(builder.session_id, builder.write(home))
    cli.append(lineage.current, builder.session_id, 14)
    for step in ("rewrite", "rewrite", "undo", "rewrite"):
        getattr(lineage, step)()
        cli.append(lineage.current, lineage.order[-1], 6)
    lineage.rewrite()
    lineage.cli = cli
    return lineage, env


def keys_in(path: Path) -> list[RecallKey]:
    return [RecallKey.parse(k) for k in dict.fromkeys(KEY_IN_MARKER.findall(path.read_text()))]


def copied(lineage: Lineage, key: RecallKey) -> bool:
    """The key names a record liminal copied into a rewrite or a cut (in the bytes it wrote)."""
    own = rewrites.own_bytes(lineage.notes, key.session_id)
    if not own:
        return False
    head = lineage.paths[key.session_id].read_bytes()[:own]
    return f'"{key.uuid}"'.encode() in head


@pytest.mark.parametrize("cli", ["claude", "codex"])
async def test_every_key_of_a_thread_resolves_from_the_store_alone(
        store: Store, tmp_path: Path, cli: str) -> None:
    lineage, env = (claude_thread if cli == "claude" else codex_thread)(tmp_path)
    thread = lineage.order[0]
    # Every key any session of the thread holds (a key stays in a later rewrite while its
    # record is in the middle band).
    keys = list(dict.fromkeys(k for backing in lineage.order for k in keys_in(lineage.paths[backing])))
    with_files = Recaller(None, None, env)
    expected = {key: await with_files.recall(str(key)) for key in keys}
    # The keys name the original and the sessions liminal wrote, records the CLI appended to
    # them and records liminal copied into them (what the store had no line of).
    named = {key.session_id for key in keys}
    assert named == set(lineage.rewritten), (named, lineage.rewritten)
    assert any(copied(lineage, key) for key in keys)
    assert any(not copied(lineage, key) for key in keys)
    if cli == "codex":  # a cut tool input's key names the call, not its output
        assert any(key.block == 1 for key in keys)

    await lineage.index(store, thread)
    for path in lineage.paths.values():
        path.unlink()
    # Another sidecar sharing the store: none of the CLI's files, no journal, no notes.
    elsewhere = {name: str(tmp_path / "elsewhere") for name in env}
    recaller = Recaller(store, None, elsewhere)
    wrong = {}
    for key in keys:
        try:
            value = await recaller.recall(str(key))
        except RecallError as exc:
            value = str(exc).encode()
        if value != expected[key]:
            wrong[str(key)] = value[:120]
    assert not wrong, (f"{len(wrong)} of {len(keys)} keys", wrong)


async def test_liminals_own_lines_are_not_found_by_search_twice(store: Store, tmp_path: Path) -> None:
    """The records liminal copied into its rewrites are in the store for recall, not as more
    hits: a search finds each text of the conversation once."""
    lineage, _ = claude_thread(tmp_path)
    thread = lineage.order[0]
    await lineage.index(store, thread)
    own_ids = set()
    for backing in lineage.order[1:]:
        records = await store.session_records(backing)
        own = rewrites.own_bytes(lineage.notes, backing)
        # The file as it is, liminal's lines and the CLI's: the session can be written again.
        assert b"".join(r.raw + b"\n" for r in records) == lineage.paths[backing].read_bytes()
        assert [r.offset < own for r in records] == [r.own for r in records]
        own_ids |= {r.id for r in records if r.own}
    assert own_ids
    hits = await store.search("line", thread_id=thread, limit=1000)
    assert hits and not own_ids & {h.id for h in hits}


async def test_a_key_the_store_never_saw_is_read_from_its_file_and_its_absence_is_said(
        store: Store, tmp_path: Path) -> None:
    """A session liminal never indexed (``store.index = false``, ``liminal compress`` by hand):
    the file answers while it exists; once it is gone the error names the key."""
    lineage, env = claude_thread(tmp_path)
    [key, *_] = keys_in(lineage.current)
    recaller = Recaller(store, None, env)
    value = await recaller.recall(str(key))
    assert value
    lineage.paths[key.session_id].unlink()
    with pytest.raises(RecallError, match="neither the store nor a session file has it"):
        await Recaller(store, None, env).recall(str(key))


class DownStore:
    """Every call fails as a store that does not answer fails."""

    def __getattr__(self, name: str) -> Callable[..., Awaitable[None]]:
        async def down(*args: object, **kwargs: object) -> None:
            raise StoreError("connection refused")

        return down


async def test_a_store_that_is_down_leaves_recall_to_the_files(tmp_path: Path) -> None:
    lineage, env = claude_thread(tmp_path)
    keys = keys_in(lineage.current)
    recaller = Recaller(DownStore(), None, env)  # type: ignore[arg-type]
    for key in keys:
        assert await recaller.recall(str(key)) == await Recaller(None, None, env).recall(str(key))


async def test_a_store_indexed_before_liminal_kept_its_own_lines_gets_them(
        store: Store, tmp_path: Path) -> None:
    """A store an older liminal indexed holds a rewrite's lines from where liminal's bytes
    ended: the next watch of that file adds liminal's lines before them."""
    lineage, _ = claude_thread(tmp_path)
    thread = lineage.order[0]
    rewrite = lineage.order[1]
    own = rewrites.own_bytes(lineage.notes, rewrite)
    path = lineage.paths[rewrite]
    parse = line_parser(path)
    data = path.read_bytes()
    old = []
    offset = own
    for raw in data[own:].splitlines(keepends=True):
        old.append(parse(raw[:-1], rewrite, thread, offset))
        offset += len(raw)
    await store.write(Batch(session_records=old))
    await lineage.index(store, thread)
    records = await store.session_records(rewrite)
    assert b"".join(r.raw + b"\n" for r in records) == data
    assert any(r.own for r in records)


async def test_a_codex_call_stored_without_its_id_is_found_in_its_session(
        store: Store, tmp_path: Path) -> None:
    """An earlier liminal kept a Codex call's line with no id (only an output had its
    ``call_id``), so the key of a cut tool input found nothing by id in the store."""
    lineage, env = codex_thread(tmp_path)
    keys = [k for backing in lineage.order for k in keys_in(lineage.paths[backing]) if k.block == 1]
    assert keys
    expected = {key: await Recaller(None, None, env).recall(str(key)) for key in keys}
    await lineage.index(store, lineage.order[0])
    for backing in lineage.order:
        records = await store.session_records(backing)
        await store.write(Batch(session_records=[
            replace(r, uuid=None) for r in records if r.type == "response_item:function_call"]))
    for path in lineage.paths.values():
        path.unlink()
    recaller = Recaller(store, None, {"CODEX_HOME": str(tmp_path / "elsewhere")})
    for key in keys:
        assert await recaller.recall(str(key)) == expected[key]


async def test_the_cache_keeps_what_was_recalled_and_never_a_failure(store: Store, tmp_path: Path) -> None:
    lineage, env = claude_thread(tmp_path)
    key = next(k for k in keys_in(lineage.current) if copied(lineage, k))
    expected = await Recaller(None, None, env).recall(str(key))
    cache = LocalCache(tmp_path / "cache", 600)
    elsewhere = {"CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere")}
    with pytest.raises(RecallError):  # the store has not indexed the thread yet
        await Recaller(store, cache, elsewhere).recall(str(key))
    assert await cache.get(f"recall:{key}") is None
    await lineage.index(store, lineage.order[0])
    assert await Recaller(store, cache, elsewhere).recall(str(key)) == expected
    # Then the store is gone too: the cache answers (Redis: for every sidecar on it).
    assert await Recaller(None, cache, elsewhere).recall(str(key)) == expected


@pytest.mark.parametrize("cli", ["claude", "codex"])
async def test_the_keys_of_a_fork_resolve_from_the_store_alone(
        store: Store, tmp_path: Path, cli: str) -> None:
    """``/fork`` writes a session that is a thread of its own: not noted as liminal's, its file
    is indexed whole as the fork's when it is opened (its history is the fork's conversation);
    the keys of the fork's own rewrite name it, and the keys it copied name the parent's
    sessions."""
    parent, env = (claude_thread if cli == "claude" else codex_thread)(tmp_path)
    assert parent.cli is not None
    fork = Lineage(parent.harness, tmp_path / "home")
    fork_id = str(uuid.uuid4())
    written = parent.harness.cut([(parent.current, 0, None)], parent.current, fork_id)
    fork.original(fork_id, written.path)
    parent.cli.append(fork.current, fork_id, 8)
    fork.rewrite()
    keys = list(dict.fromkeys(k for path in fork.paths.values() for k in keys_in(path)))
    named = {k.session_id for k in keys}
    assert fork_id in named and named & set(parent.order), named
    expected = {key: await Recaller(None, None, env).recall(str(key)) for key in keys}
    await parent.index(store, parent.order[0])
    await fork.index(store, fork_id)
    for path in [*parent.paths.values(), *fork.paths.values()]:
        path.unlink()
    recaller = Recaller(store, None, {name: str(tmp_path / "elsewhere") for name in env})
    for key in keys:
        assert await recaller.recall(str(key)) == expected[key], key


@pytest.mark.parametrize("cli", ["claude", "codex"])
async def test_every_session_of_a_thread_is_written_again_from_the_store_alone(
        store: Store, tmp_path: Path, cli: str) -> None:
    """Issue 23: the store is the system of record. Every session of a thread (the CLI's
    original, the rewrites and the cut liminal wrote, the turns the CLI appended to each, the
    last rewrite the CLI never appended to) is written again from the store where the CLI looks
    for it, byte for byte, 0600, once every file is gone."""
    lineage, env = (claude_thread if cli == "claude" else codex_thread)(tmp_path)
    thread = lineage.order[0]
    await lineage.index(store, thread)
    files = {backing: lineage.paths[backing].read_bytes() for backing in lineage.order}
    for path in lineage.paths.values():
        path.unlink()
    harness = (ClaudeSessions if cli == "claude" else CodexSessions)(SETTINGS, env)
    for backing in lineage.order:
        assert harness.locate(backing, CWD) is None
        path = harness.restore(backing, CWD, await stored_lines(store, backing))
        assert path.read_bytes() == files[backing], backing
        assert path.stat().st_mode & 0o777 == 0o600
        assert harness.locate(backing, CWD) == path
        assert harness.names(path) == backing
    # And the keys of the last session resolve from the files written again, as from the old.
    keys = [RecallKey.parse(k) for k in dict.fromkeys(
        KEY_IN_MARKER.findall(files[lineage.order[-1]].decode()))]
    assert keys
    recaller = Recaller(None, None, env)
    for key in keys:
        assert await recaller.recall(str(key))


async def test_a_session_the_store_does_not_hold_whole_is_not_written(
        store: Store, tmp_path: Path) -> None:
    """A line set aside by the indexer (or never indexed) leaves a gap: no file is written
    from a store that would give the CLI another conversation."""
    lineage, _ = claude_thread(tmp_path)
    thread = lineage.order[0]
    with pytest.raises(Incomplete, match="no line"):
        await stored_lines(store, thread)
    await lineage.index(store, thread)
    records = await store.session_records(thread)
    gone = records[len(records) // 2]
    assert await store.delete_thread(thread)
    await store.write(Batch(session_records=[r for r in records if r.id != gone.id]))
    with pytest.raises(Incomplete, match=f"lacks bytes {gone.offset} "):
        await stored_lines(store, thread)


async def test_a_rollout_is_written_again_where_codexs_state_database_names_it(
        store: Store, tmp_path: Path) -> None:
    """Codex resumes a thread from the path its state database names first; a row naming a file
    that is gone made the app server's ``thread/resume`` say "no rollout found" (codex-acp
    2.6.0: the load answered from the thread's metadata, the next prompt "thread not found"),
    though a rollout of that id was on disk under another day's name."""
    lineage, env = codex_thread(tmp_path)
    await lineage.index(store, lineage.order[0])
    backing = lineage.order[-1]
    data = lineage.paths[backing].read_bytes()
    for path in lineage.paths.values():
        path.unlink()
    home = Path(env["CODEX_HOME"])
    named = home / "sessions" / "2025" / "01" / "02" / f"rollout-2025-01-02T03-04-05-{backing}.jsonl"
    with contextlib.closing(sqlite3.connect(home / "state_5.sqlite")) as db, db:
        db.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT)")
        db.execute("INSERT INTO threads VALUES (?, ?)", (backing, str(named)))
        db.execute("INSERT INTO threads VALUES (?, ?)", (lineage.order[0], "/etc/passwd"))
    harness = CodexSessions(SETTINGS, env)
    assert harness.restore(backing, CWD, await stored_lines(store, backing)) == named
    assert named.read_bytes() == data
    # A row naming anything but a rollout of that id under CODEX_HOME is not followed.
    original = harness.restore(lineage.order[0], CWD, await stored_lines(store, lineage.order[0]))
    assert original.is_relative_to(home / "sessions") and original.name.endswith(f"-{lineage.order[0]}.jsonl")
