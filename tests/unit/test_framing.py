from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from liminal.acp.framing import HEAD_BYTES, LineFramer, Oversized


def feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes | Oversized]:
    out: list[bytes | Oversized] = []
    for chunk in chunks:
        out.extend(framer.feed(chunk))
    out.extend(framer.close())
    return out


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


def test_lines_keep_their_exact_bytes() -> None:
    framer = LineFramer(1024)
    data = b'{"a": 1}\r\n  {"b":"\xc3\xa9"}  \n\n{"c":123456789012345678901234567890}\n'
    assert feed_all(framer, [data]) == [
        b'{"a": 1}\r', b'  {"b":"\xc3\xa9"}  ', b"", b'{"c":123456789012345678901234567890}'
    ]


def test_unterminated_last_line_is_returned_at_close() -> None:
    framer = LineFramer(1024)
    assert framer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}") == []
    assert framer.close() == [b'{"b":2}']
    assert framer.close() == []


def test_line_over_the_cap_becomes_oversized_and_the_stream_recovers() -> None:
    framer = LineFramer(100)
    big = b'{"id":7,"method":"x","params":"' + b"a" * 500 + b'"}'
    out = feed_all(framer, [b'{"ok":1}\n', big[:50], big[50:300], big[300:] + b'\n{"ok":2}\n'])
    assert out[0] == b'{"ok":1}'
    assert isinstance(out[1], Oversized)
    assert out[1].size == len(big)
    assert out[1].head == big[:HEAD_BYTES]
    assert out[1].tail.endswith(b'"}')
    assert out[2] == b'{"ok":2}'


def test_oversized_line_inside_one_chunk() -> None:
    framer = LineFramer(10)
    out = framer.feed(b"short\n" + b"x" * 50 + b"\nok\n")
    assert out[0] == b"short"
    assert isinstance(out[1], Oversized) and out[1].size == 50
    assert out[2] == b"ok"


def test_buffer_never_grows_past_the_cap_plus_a_chunk() -> None:
    framer = LineFramer(1000)
    for _ in range(1000):
        framer.feed(b"y" * 4096)
        assert framer.buffered <= 1000 + HEAD_BYTES + 4096


@given(st.lists(st.binary(max_size=200), max_size=30), st.lists(st.integers(min_value=0), max_size=20))
def test_any_bytes_any_splits_round_trip(lines: list[bytes], cuts: list[int]) -> None:
    lines = [line.replace(b"\n", b"") for line in lines]
    data = b"".join(line + b"\n" for line in lines)
    framer = LineFramer(1 << 20)
    assert feed_all(framer, split_at(data, cuts)) == lines


@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0), max_size=20),
       st.integers(min_value=1, max_value=300))
def test_arbitrary_input_never_crashes_and_accounts_for_every_byte(
    data: bytes, cuts: list[int], cap: int
) -> None:
    framer = LineFramer(cap)
    out = feed_all(framer, split_at(data, cuts))
    total = sum(item.size if isinstance(item, Oversized) else len(item) for item in out)
    assert total + data.count(b"\n") == len(data)
    for item in out:
        if isinstance(item, bytes):
            assert len(item) <= cap
        else:
            assert item.size > cap
