"""A load's catch-up of an older file of the same session (``restore.catch_up``): another
sidecar went on on the session, the store has more of it than the file here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from liminal.kernel import restore

pytestmark = pytest.mark.anyio
LINES = [b'{"n":1}', b'{"n":2}', b'{"n":3}']


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Store:
    def __init__(self, lines: list[bytes]) -> None:
        self.records, offset = [], 0
        for line in lines:
            self.records.append(SimpleNamespace(offset=offset, raw=line))
            offset += len(line) + 1
        self.end = offset

    async def session_file_end(self, backing: str) -> int:
        return self.end

    async def session_records(self, backing: str, **_: Any) -> list[Any]:
        return self.records


def harness(path: Path) -> Any:
    return SimpleNamespace(locate=lambda backing, cwd: path if path.exists() else None)


def whole(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


async def test_the_store_s_further_lines_are_appended_to_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(whole(LINES[:1]))
    assert await restore.catch_up(Store(LINES), harness(path), "s", None) is None  # type: ignore[arg-type]
    assert path.read_bytes() == whole(LINES)


async def test_a_file_as_long_as_the_store_s_or_longer_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(whole([*LINES, b'{"n":4}']))  # this machine's turn, not indexed yet
    assert await restore.catch_up(Store(LINES), harness(path), "s", None) is None  # type: ignore[arg-type]
    assert path.read_bytes() == whole([*LINES, b'{"n":4}'])


async def test_a_file_that_is_not_the_start_of_the_store_s_is_left_alone_and_said(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"n":9}\n')
    why = await restore.catch_up(Store(LINES), harness(path), "s", None)  # type: ignore[arg-type]
    assert why is not None and "not the start" in why
    assert path.read_bytes() == b'{"n":9}\n'


async def test_no_file_here_is_not_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    assert await restore.catch_up(Store(LINES), harness(path), "s", None) is None  # type: ignore[arg-type]
    assert not path.exists()
