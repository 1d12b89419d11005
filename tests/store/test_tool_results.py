"""Claude Code's large tool outputs in the store (issue 23), on every backend: the index worker
keeps the file a session line previews (``<id>/tool-results/<name>``) with the line, in parts
where large; with every file of the thread gone, the session is written back from the store
with that file, byte for byte and 0600; recall of the output gives its whole text, not the
preview; and ``session/delete``'s removal from the store takes them with the thread, whose
tombstone takes no copy again."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from liminal.config import GradientSettings
from liminal.harness.base import Beside
from liminal.harness.claude.live import ClaudeSessions
from liminal.ingest.tail import SessionFileIndexer
from liminal.kernel.restore import write_session
from liminal.lookup.recaller import Recaller
from liminal.lookup.sessionlines import stored_beside_one, stored_lines
from liminal.store import sqlite
from liminal.store.base import Store
from liminal.store.records import DELETED, Batch, ThreadUpdate
from tests.transcript import CWD, SID, Transcript

pytestmark = pytest.mark.anyio
THREAD = "t1"
NAME = "bh6ttyhlx.txt"
# What a tool printed: not all UTF-8, line ends of both kinds, past a part's size below.
OUTPUT = b"".join(b"%06d \xff\xfe caf\xc3\xa9\r\n" % n for n in range(600))


def session_with_a_large_output(config: Path) -> tuple[Path, Path, str]:
    """A session whose second turn's tool output Claude Code put aside, as 2.1.316 does: the
    file first, then the line with its preview. Returns the session, the file, and the recall
    key of that output."""
    t = Transcript(SID)
    t.turn(1, size=500)
    folder = config / "projects" / "-work-project"
    kept = folder / SID / "tool-results" / NAME
    shown = (f"<persisted-output>\nOutput too large (13KB). Full output saved to: {kept}\n\n"
             f"Preview (first 2KB):\n{OUTPUT[:2000].decode('utf-8', 'replace')}\n...\n"
             "</persisted-output>")
    t.prompt("run the big one")
    t.tools([("Bash", {"command": "big"}, shown)])
    t.say("done")
    kept.parent.mkdir(parents=True)
    kept.write_bytes(OUTPUT)
    path = t.write(config)
    result = next(json.loads(line) for line in path.read_bytes().splitlines()
                  if b"persisted-output" in line)
    return path, kept, f"{SID}:{result['uuid']}:0"


async def index(store: Store, path: Path) -> None:
    await SessionFileIndexer(store, path, SID, THREAD, quarantine=path.parent / "q").catch_up()


async def test_a_thread_whose_files_are_gone_gets_its_large_tool_output_back_from_the_store(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite keeps raw bytes past INLINE_BYTES in parts: small here, so this file is in 4.
    monkeypatch.setattr(sqlite, "INLINE_BYTES", 4096)
    monkeypatch.setattr(sqlite, "PART_BYTES", 4000)
    config = tmp_path / "claude"
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    path, kept, key = session_with_a_large_output(config)
    session = path.read_bytes()
    await index(store, path)
    ref = Beside(SID, f"tool-results/{NAME}")
    assert await stored_beside_one(store, ref) == OUTPUT
    if store.backend == "sqlite":  # kept as any large raw bytes are: in parts
        with contextlib.closing(sqlite3.connect(tmp_path / "liminal.db")) as db:
            [(parts,)] = db.execute("SELECT COUNT(*) FROM parts WHERE owner = ?",
                                    (f"session:{ref.record_id(THREAD)}",)).fetchall()
        assert parts == -(-len(OUTPUT) // 4000)

    path.unlink()  # every file of the thread: only the store is left
    shutil.rmtree(path.with_suffix(""))
    harness = ClaudeSessions(GradientSettings(), env)
    assert await write_session(store, harness, SID, CWD) is None
    assert path.read_bytes() == session
    assert kept.read_bytes() == OUTPUT
    assert kept.stat().st_mode & 0o777 == 0o600

    # Recall of the output gives the whole of it, not the preview, with the file gone too.
    kept.unlink()
    recaller = Recaller(store, None, env)
    assert await recaller.recall(key) == OUTPUT
    # ... and from the file when the store has none of it (a session liminal never indexed).
    kept.write_bytes(OUTPUT)
    assert await Recaller(None, None, env).recall(key) == OUTPUT


async def test_session_delete_takes_the_files_with_the_thread(store: Store, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    path, _, _ = session_with_a_large_output(config)
    await index(store, path)
    ref = Beside(SID, f"tool-results/{NAME}")
    assert await stored_beside_one(store, ref) == OUTPUT
    # As ``liminal.kernel.delete`` does: everything of the thread, then its tombstone.
    await store.delete_thread(THREAD)
    await store.write(Batch(threads=[ThreadUpdate(THREAD, time.time(), state=DELETED, by_user=True)]))
    assert await stored_beside_one(store, ref) is None
    assert await store.session_records(SID) == []
    await index(store, path)  # the worker still tailing it: the tombstone takes nothing
    assert await stored_beside_one(store, ref) is None


async def test_a_file_gone_before_its_line_was_read_leaves_the_line_stored(
        store: Store, tmp_path: Path) -> None:
    """The session is still written from the store (the conversation opens); the model finds no
    file where the preview says, as it would have without liminal."""
    config = tmp_path / "claude"
    path, kept, _ = session_with_a_large_output(config)
    kept.unlink()
    await index(store, path)
    assert b"".join(line + b"\n" for line in await stored_lines(store, SID)) == path.read_bytes()
    path.unlink()
    harness = ClaudeSessions(GradientSettings(), {"CLAUDE_CONFIG_DIR": str(config)})
    assert await write_session(store, harness, SID, CWD) is None
    assert path.exists() and not kept.exists()


async def test_a_rewrite_that_kept_the_preview_gets_its_originals_file_back(
        store: Store, tmp_path: Path) -> None:
    """A swap's rewrite keeps the recent turns byte for byte: a preview there still names the
    original session's file. The rewrite written again from the store (the thread is on it)
    brings that file back where the preview says, though the original's session is not written."""
    config = tmp_path / "claude"
    path, kept, _ = session_with_a_large_output(config)
    await index(store, path)
    rewrite_id = "0b5c7a10-1111-4a2b-9c3d-0000000000ff"
    copied = [line.replace(SID.encode(), rewrite_id.encode()) if b"persisted-output" not in line
              else line for line in path.read_bytes().splitlines()[-3:]]
    rewrite = path.with_name(f"{rewrite_id}.jsonl")
    rewrite.write_bytes(b"".join(line + b"\n" for line in copied))
    data = rewrite.read_bytes()
    await SessionFileIndexer(store, rewrite, rewrite_id, THREAD, own_bytes=len(data),
                             quarantine=tmp_path / "q").catch_up()
    for each in (path, rewrite):
        each.unlink()
    shutil.rmtree(path.with_suffix(""))
    harness = ClaudeSessions(GradientSettings(), {"CLAUDE_CONFIG_DIR": str(config)})
    assert await write_session(store, harness, rewrite_id, CWD) is None
    assert rewrite.read_bytes() == data
    assert kept.read_bytes() == OUTPUT and not path.exists()


async def test_a_file_it_cannot_read_or_a_line_it_cannot_parse_stops_no_indexing(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tried again at every change, a failure here stopped the session's indexing at that line
    for good: it is said, and the lines are stored."""
    from liminal.ingest import tail

    config = tmp_path / "claude"
    path, _, _ = session_with_a_large_output(config)

    def unreadable(path: Path, max_bytes: int) -> bytes:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(tail, "read_bounded", unreadable)
    await index(store, path)
    assert b"".join(line + b"\n" for line in await stored_lines(store, SID)) == path.read_bytes()

    def broken(line: bytes) -> tuple[Beside, ...]:
        raise RecursionError("too deep")

    with path.open("ab") as f:
        f.write(b'{"type":"user","x":"<persisted-output>"}\n')
    indexer = SessionFileIndexer(store, path, SID, THREAD, quarantine=tmp_path / "q")
    monkeypatch.setattr(indexer.harness, "beside_in", broken)
    await indexer.catch_up()
    assert b"".join(line + b"\n" for line in await stored_lines(store, SID)) == path.read_bytes()
