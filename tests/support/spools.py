"""The spool files under a ``LIMINAL_HOME``, read while the index worker removes them: a folder or
file that goes between the listing and the look is one fewer, never an error (``Path.glob`` raises
``FileNotFoundError`` there on Python 3.11)."""

from __future__ import annotations

import os
from pathlib import Path


def spool_files(home: Path) -> list[Path]:
    found: list[Path] = []
    try:
        folders = [e.path for e in os.scandir(home / "spool") if e.is_dir()]
    except FileNotFoundError:
        return found
    for folder in folders:
        try:
            found += [Path(e.path) for e in os.scandir(folder) if e.name.endswith(".spool")]
        except FileNotFoundError:
            continue
    return found


def spooled_bytes(home: Path) -> int:
    total = 0
    for path in spool_files(home):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            continue
    return total
