"""Checks on rewritten session files, shared by the gradient tests and bench/compress.py."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from liminal.harness.claude.conversation import build
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import read_session


def recent_intact(source: Path, new: Path, recent_turns: int) -> bool:
    """Every record of the source's last ``recent_turns`` turns is in ``new``, byte for byte
    apart from ``sessionId`` and ``parentUuid``."""
    conv = build(read_session(locate(source)))
    wanted = {r.uuid: r for t in conv.turns[-recent_turns:] for r in t.records if r.uuid}
    original = conv.session.raw(wanted.values())
    norm = re.compile(rb'"parentUuid":(null|"[^"]*")')
    sid = conv.session.location.session_id.encode()
    found = 0
    with new.open("rb") as handle:
        for line in handle:
            rec = orjson.loads(line)
            if rec.get("uuid") in wanted:
                src = wanted[rec["uuid"]]
                before = norm.sub(b"", original[src.line]).replace(sid, b"X")
                after = norm.sub(b"", line).replace(rec["sessionId"].encode(), b"X")
                if before != after:
                    return False
                found += 1
    return found == len(wanted)
