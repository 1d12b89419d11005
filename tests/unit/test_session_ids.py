"""Rule 2's byte-level rewriting (``liminal.acp.session_ids``): the compact spelling is replaced
as bytes, anything else by the regular expression; the result is the expression's alone."""

from __future__ import annotations

import re

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.acp.session_ids import rewrite


def by_expression(line: bytes, old: str, new: str) -> bytes:
    """What ``rewrite`` did before its compact case (the reference)."""
    if old == new or not old:
        return line
    pattern = re.compile(rb'("sessionId"\s*:\s*)' + re.escape(orjson.dumps(old)))
    return pattern.sub(rb"\g<1>" + orjson.dumps(new).replace(b"\\", b"\\\\"), line)


IDS = st.sampled_from(["b-1", "t-1", "", 'q"uote', "back\\slash", "é", "b-10"])
PIECES = st.lists(st.one_of(
    st.builds(lambda sid, gap: b'"sessionId"' + gap + b":" + gap + orjson.dumps(sid), IDS,
              st.sampled_from([b"", b" ", b"\t"])),
    st.builds(orjson.dumps, IDS),
    st.sampled_from([b",", b"{", b"}", b'"text":"sessionId b-1"', b'"sessionId"']),
), max_size=8)


@settings(max_examples=300)
@given(PIECES, IDS, IDS)
def test_rewrite_is_the_expressions_rewrite(pieces: list[bytes], old: str, new: str) -> None:
    line = b"".join(pieces)
    assert rewrite(line, old, new) == by_expression(line, old, new)


def test_a_canonical_chunk_and_its_odd_spellings() -> None:
    line = b'{"params":{"sessionId":"b-1","x":{"sessionId" : "b-1"},"y":"\\"b-1\\"","z":"b-10"}}'
    assert rewrite(line, "b-1", "t-1") == (
        b'{"params":{"sessionId":"t-1","x":{"sessionId" : "t-1"},"y":"\\"b-1\\"","z":"b-10"}}')
