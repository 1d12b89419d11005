"""A session file as the store holds it (``liminal.lookup.sessionlines``, issue 23): every line
the indexer read gives the file back byte for byte, on every backend; a line it cut or never
stored is a gap, and the session is not written from a gap."""

from __future__ import annotations

from pathlib import Path

import pytest

from liminal.config import GradientSettings
from liminal.harness.claude.live import ClaudeSessions
from liminal.ingest import tail
from liminal.ingest.tail import SessionFileIndexer
from liminal.lookup.sessionlines import Incomplete, stored_lines
from liminal.store.base import Store
from tests.transcript import CWD, SID, Transcript

pytestmark = pytest.mark.anyio


def odd_lines() -> list[bytes]:
    """What a CLI's file can hold besides plain JSON: bytes that are not UTF-8, a NUL, a carriage
    return, text in other scripts, an empty line, a long line (in parts on SQLite past 64 MiB;
    1 MiB here)."""
    return [b'{"type":"summary","text":"caf\xc3\xa9 \xe2\x9c\x93"}', b'not json \xff\xfe at all',
            b'{"nul":"a\x00b"}', b'{"cr":"a\rb"}', b"", b'{"long":"' + b"z" * (1 << 20) + b'"}',
            b'{"type":"user","uuid":"u9"}']


async def index(store: Store, path: Path, backing: str) -> None:
    indexer = SessionFileIndexer(store, path, backing, "t1",
                                 quarantine=path.parent / "quarantine")
    await indexer.catch_up()


async def test_every_line_the_indexer_read_gives_the_file_back(store: Store, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    t = Transcript(SID)
    t.turn(1, size=2000)
    path = t.write(config)
    with path.open("ab") as f:
        f.write(b"".join(line + b"\n" for line in odd_lines()))
    data = path.read_bytes()
    await index(store, path, SID)
    assert b"".join(line + b"\n" for line in await stored_lines(store, SID)) == data
    path.unlink()
    harness = ClaudeSessions(GradientSettings(), {"CLAUDE_CONFIG_DIR": str(config)})
    written = harness.restore(SID, CWD, await stored_lines(store, SID))
    assert written == path and written.read_bytes() == data


async def test_a_line_the_indexer_cut_is_a_gap(store: Store, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A line past ``tail.MAX_LINE`` is stored as its head only (the indexer's memory is
    bounded): the next line's offset shows what is missing."""
    monkeypatch.setattr(tail, "MAX_LINE", 1024)
    config = tmp_path / "claude"
    t = Transcript(SID)
    t.turn(1, size=200)
    path = t.write(config)
    at = path.stat().st_size
    with path.open("ab") as f:
        f.write(b'{"runaway":"' + b"r" * 5000 + b'"}\n{"type":"user","uuid":"after"}\n')
    await index(store, path, SID)
    with pytest.raises(Incomplete, match=f"lacks bytes {at + 1024 + 1} to "):
        await stored_lines(store, SID)
