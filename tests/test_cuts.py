"""Sessions cut by position (``liminal.harness.claude.cuts``): what /clear MARK, /undo and /fork
write. Every turn kept is the original's, the chain is one, the header names the real source."""

from __future__ import annotations

import json
from pathlib import Path

from liminal.config import GradientSettings
from liminal.harness.claude.conversation import build
from liminal.harness.claude.cuts import turn_starts, write_cut
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import read_session
from tests.transcript import Transcript

NEW = "7e57a11d-0000-4000-8000-0000000000c1"


def prompts(path: Path) -> list[str]:
    conversation = build(read_session(locate(path)))
    return [" ".join(b.head for b in t.prompt.blocks if b.kind == "text") for t in conversation.turns]


def session(tmp_path: Path, turns: int = 6) -> Path:
    t = Transcript()
    for n in range(turns):
        t.turn(n, parallel=1 + n % 2)
    return t.write(tmp_path)


def test_a_cut_up_to_a_turn_keeps_every_turn_before_it_and_names_its_source(tmp_path: Path) -> None:
    src = session(tmp_path)
    starts = turn_starts(src)
    assert len(starts) == 6 and starts == sorted(starts)
    target = src.with_name(f"{NEW}.jsonl")
    write_cut([(src, 0, starts[4])], target, NEW, GradientSettings())
    before = prompts(src)
    assert prompts(target) == before[:4]  # /undo twice, or /clear to a mark set after turn 3
    header = json.loads(target.read_bytes().splitlines()[0])
    assert header["sourceSessionId"] == src.stem and header["sourcePath"] == str(src)
    assert header["cut"] == [{"path": str(src), "start": 0, "end": starts[4]}]
    records = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    assert {r["sessionId"] for r in records if "sessionId" in r} == {NEW}


def test_a_cut_of_what_followed_a_position_links_the_parts_into_one_chain(tmp_path: Path) -> None:
    src = session(tmp_path)
    starts = turn_starts(src)
    target = src.with_name(f"{NEW}.jsonl")
    # What followed turn 2, in two parts (as the rest of one file and a later file's turns).
    write_cut([(src, starts[2], starts[4]), (src, starts[4], None)], target, NEW, GradientSettings())
    assert prompts(target) == prompts(src)[2:]
    chained = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    previous = None
    for record in chained:
        if "uuid" in record:
            assert record["parentUuid"] == previous
            previous = record["uuid"]
