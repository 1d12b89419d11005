"""Sessions cut from Claude Code session files by byte position: what ``/clear MARK``, ``/undo``
and ``/fork`` write (``liminal.kernel.commands``).

A position is a byte offset at a line boundary between turns (a mark is the file's size once a
turn is on disk; the CLI only ever appends, so a position stays valid). A cut takes byte ranges
of one or more files of a thread's lineage, in order, links their records into one parent chain
and writes them as a new session through the gradient with no target to meet: every turn is
kept as it was, ids and chain made consistent, validated before anything is written.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import orjson

from liminal.config import GradientSettings
from liminal.gradient.rewrite import prepare, write_atomically
from liminal.harness.claude.conversation import build
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import read_session

UNLIMITED = 10**9  # a target no session reaches: the gradient keeps every turn whole


def turn_starts(path: Path) -> list[int]:
    """Where each turn of the session begins (the offset of its prompt's line), oldest first."""
    conversation = build(read_session(locate(path)))
    return [turn.records[0].offset for turn in conversation.turns]


def _linked(chunks: Sequence[bytes]) -> bytes:
    """The chunks' lines as one file: the first record of each chunk after the first is made the
    child of the last record of the chunk before (its own parent is in a part left out)."""
    out: list[bytes] = []
    last_uuid: str | None = None
    for chunk in chunks:
        first = True
        for line in chunk.splitlines(keepends=True):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                out.append(line)
                continue
            if isinstance(record, dict) and isinstance(record.get("uuid"), str):
                if first:
                    record["parentUuid"] = last_uuid
                    line = orjson.dumps(record) + b"\n"
                    first = False
                last_uuid = record["uuid"]
            out.append(line if line.endswith(b"\n") else line + b"\n")
    return b"".join(out)


def write_cut(parts: Sequence[tuple[Path, int, int | None]], target: Path, new_id: str,
              settings: GradientSettings, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """Write ``[(file, start, end)]`` (end None: to the end) as session ``new_id`` at ``target``.
    Returns (tokens, bytes) of what was written. Raises (nothing written) if the result would
    not be a valid session."""
    chunks = []
    for path, start, end in parts:
        with path.open("rb") as f:
            f.seek(start)
            chunks.append(f.read() if end is None else f.read(max(0, end - start)))
    data = _linked(chunks)
    if not data:
        raise ValueError("nothing to keep: the cut is empty")
    with tempfile.TemporaryDirectory(prefix="liminal-cut-") as folder:
        source = Path(folder) / f"{uuid.uuid4()}.jsonl"
        source.write_bytes(data)
        prepared = prepare(source, UNLIMITED, new_id=new_id, settings=settings, env=env)
        # The header names where the records came from, not the scratch file they were read from:
        # other tools (and a later rewrite) read it.
        note = orjson.loads(prepared.rendered.lines[0])
        first = parts[0][0]
        note.update(sourceSessionId=first.stem, sourcePath=str(first),
                    cut=[{"path": str(p), "start": start, "end": end} for p, start, end in parts])
        lines = (orjson.dumps(note) + b"\n", *prepared.rendered.lines[1:])
        write_atomically(target, lines)
    return prepared.result.tokens_after, sum(len(line) for line in lines)
